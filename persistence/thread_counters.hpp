// Counters written by many threads at millions of increments a second and read rarely (a
// metrics scrape, a benchmark's before and after): one slot per thread, each on a cache line
// of its own and written by its thread alone with plain (relaxed) stores, so an increment
// is no locked instruction. In proctor-bench's (b) an atomic increment shared by both cores
// cost several percent of its throughput, which a count must not change.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace proctor {

/// `Kinds` counters per thread, summed over the threads when read. One set per `Tag` (its
/// state is static: nothing runs to initialise it, so it may count inside operator new).
/// Threads beyond the first `slots - 1` share the last slot, with atomic increments.
template <class Tag, size_t Kinds>
class thread_counters {
public:
  static void add(size_t kind) noexcept {
    if (mine_ == nullptr) {
      unsigned i = next_.fetch_add(1, std::memory_order_relaxed);
      shared_ = i >= slots - 1;
      mine_ = &slots_[shared_ ? slots - 1 : i];
    }
    auto& n = mine_->n[kind];
    if (shared_)
      n.fetch_add(1, std::memory_order_relaxed);
    else
      n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  /// What all threads added to counter `kind` so far.
  static uint64_t sum(size_t kind) noexcept {
    uint64_t total = 0;
    for (const auto& s : slots_)
      total += s.n[kind].load(std::memory_order_relaxed);
    return total;
  }

private:
  static constexpr unsigned slots = 256;
  struct alignas(64) slot {
    std::array<std::atomic<uint64_t>, Kinds> n{};
  };
  static inline slot slots_[slots];
  static inline std::atomic<unsigned> next_{0};
  // Constant-initialised: no thread_local constructor runs on first use.
  static inline thread_local slot* mine_ = nullptr;
  static inline thread_local bool shared_ = false;
};

}  // namespace proctor
