#include "apps/bench/alloc_count.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace proctor::bench {

namespace {

// One counter per thread, on a cache line of its own, written by that thread alone with
// plain (relaxed) stores: no locked instruction per allocation. (b) makes millions of
// allocations a second; an atomic increment shared by both cores cost several percent of
// its throughput, which the count must not change. Threads beyond `slots - 1` share the
// last one, with an atomic increment.
constexpr unsigned slots = 256;
struct alignas(64) slot {
  std::atomic<uint64_t> n{0};
};
slot counts[slots];
std::atomic<unsigned> next_slot{0};
// Constant-initialised: no TLS constructor runs inside operator new.
thread_local slot* mine = nullptr;
thread_local bool shared = false;

void count_one() {
  if (mine == nullptr) {
    unsigned i = next_slot.fetch_add(1, std::memory_order_relaxed);
    shared = i >= slots - 1;
    mine = &counts[shared ? slots - 1 : i];
  }
  if (shared)
    mine->n.fetch_add(1, std::memory_order_relaxed);
  else
    mine->n.store(mine->n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

}  // namespace

uint64_t heap_allocations() {
  uint64_t sum = 0;
  for (const auto& s : counts)
    sum += s.n.load(std::memory_order_relaxed);
  return sum;
}

}  // namespace proctor::bench

// libstdc++'s array and nothrow forms call this one; the aligned forms (rare here) are not
// counted.
void* operator new(std::size_t size) {
  proctor::bench::count_one();
  if (size == 0)
    size = 1;
  for (;;) {
    if (void* p = std::malloc(size))
      return p;
    std::new_handler h = std::get_new_handler();
    if (h == nullptr)
      throw std::bad_alloc();
    h();
  }
}

// The matching deletes (the array and sized forms call these): memory from malloc goes back
// to free, also under a sanitizer whose own operator delete would call it a mismatch.
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
