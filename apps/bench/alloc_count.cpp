#include "apps/bench/alloc_count.hpp"

#include <cstdlib>
#include <new>

#include "persistence/thread_counters.hpp"

namespace proctor::bench {

namespace {
// A thread_counters set: its per-thread slots keep the count from adding a locked
// instruction per allocation, and nothing in it runs a constructor inside operator new.
struct allocations_tag {};
using allocation_counts = thread_counters<allocations_tag, 1>;
}  // namespace

uint64_t heap_allocations() {
  return allocation_counts::sum(0);
}

}  // namespace proctor::bench

// libstdc++'s array and nothrow forms call this one; the aligned forms (rare here) are not
// counted.
void* operator new(std::size_t size) {
  proctor::bench::allocation_counts::add(0);
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
