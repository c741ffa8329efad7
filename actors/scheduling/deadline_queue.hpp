// Every deadline of a node in one structure: the data structure of the timeout actor
// (docs/concepts.md, "The timeout actor"). Pure data structure, no CAF; the actor owns one and
// keeps a single CAF timer set to `next_deadline()`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace proctor {

/// What a deadline is for; the queue only stores and returns it. 24 bytes (4 of padding).
struct deadline_entry {
  uint64_t owner = 0;  ///< procedure (or tree) id the deadline belongs to
  uint64_t token = 0;  ///< tells the owner's deadlines apart, e.g. the step's journal sequence
  uint32_t kind = 0;   ///< what expires (wait, call timeout, back-off, TTL...): the actor's enum
};
static_assert(sizeof(deadline_entry) == 24);

/// Names one armed deadline for `cancel`. A default handle names nothing. Once its deadline
/// fired or was cancelled a handle names nothing either, and never a later deadline (see
/// `deadline_queue`).
class deadline_handle {
public:
  deadline_handle() = default;

  /// False for a default handle; true for one `arm` returned, whether or not it is still armed.
  explicit operator bool() const { return generation_ != 0; }

  friend bool operator==(deadline_handle, deadline_handle) = default;

private:
  friend class deadline_queue;
  deadline_handle(uint32_t slot, uint32_t generation) : slot_(slot), generation_(generation) {}

  uint32_t slot_ = 0;
  uint32_t generation_ = 0;
};

/// A deadline that `pop_due` found due.
struct fired_deadline {
  int64_t deadline_ms = 0;
  deadline_entry entry;
};

/// Deadlines keyed by absolute wall-clock time, milliseconds since the Unix epoch, fired in
/// deadline order and, among equal deadlines, in the order they were armed.
///
/// Why wall-clock milliseconds: deadlines are journaled as absolute wall-clock times so that a
/// restarted node (another process, possibly another machine) re-arms them with what remains;
/// a steady clock's epoch means nothing across processes. The queue never reads a clock: the
/// caller passes `now_ms`, so a wall clock stepping back only delays firings (nothing is due
/// until it catches up) and tests drive time by hand.
///
/// Structure: a 4-ary min-heap of (deadline, arm sequence) keys, with a side array of slots
/// (payload, generation, heap position) so that `cancel` finds its heap node in O(1) and
/// removes it in O(log n). Per armed entry: 16 bytes of heap key + 4 of heap-to-slot index
/// + 32 of slot = 52 bytes (`bytes_used()` counts allocated pages, so a little more). All
/// three arrays grow by fixed pages and never move what they hold: one std::vector growing
/// past 1M 32-byte elements stalled 130 ms here (copy and first touch of the new block),
/// the kind of pause `incremental_map` removed from the executor. Heap pages are given back
/// as the heap shrinks; slot pages stay at their high-water mark, their slots reused.
///
/// Why a heap rather than a timing wheel. Measured 2026-11-25 on the shared 2-core machine (AMD
/// EPYC VM), g++ 12 -O2, thread CPU time, 1,000,000 entries due within the same second, all armed,
/// then popped in batches of 1024 (deadline_queue_test's DISABLED_measure):
///   this heap:  arm 6.5 M/s, pop 2.7 M/s, arm+pop 1.9 M/s, cancel (random order) 5.2 M/s,
///               52.2 bytes/entry
///   wheel prototype (1 ms buckets over a 65 s window, 32-byte doubly linked nodes, not kept):
///               arm 10 M/s, pop 5.7 M/s, arm+pop 3.6 M/s, 32.6 bytes/entry
/// The wheel was about twice as fast and 37 % smaller, but only on its best case: it held no
/// deadline outside its window and no past one. A complete wheel needs, besides the buckets, an
/// ordered structure for deadlines already past (a restarted node re-arms every journaled deadline,
/// many of them expired while it was down, and they must fire in deadline order), either levels
/// with cascading or an overflow heap for deadlines beyond the window (result and event TTLs are
/// hours), a migration step that keeps equal deadlines FIFO across the two, and bucket scans to
/// make `next_deadline()` exact. The heap gets all of that from one comparison. Its 1.9 M arm+pop/s
/// is several times the node's best durable step rate (0.3-0.7 M steps/s in docs/benchmarks.md),
/// and most steps arm no deadline at all. Both structures are bound by cache misses on this
/// machine: branch-free child selection and cache-line aligned sibling groups made the heap no
/// measurably faster, so the plain code stayed.
///
/// Handles: a slot's generation grows each time the slot is freed; a handle matches only while
/// its generation is the slot's. A slot whose generation would wrap is retired instead of
/// reused (32 bytes leaked per 2^32 reuses of one slot), so a stale handle can never cancel
/// a later entry.
///
/// Not thread-safe: one actor owns it.
class deadline_queue {
public:
  // -- modifiers ------------------------------------------------------------------------------

  /// Arms `entry` to fire at `deadline_ms`. A deadline already past is due at once (it fires
  /// at the next `pop_due`, in deadline order among the others). O(log n), O(1) on average
  /// for deadlines later than most already armed.
  deadline_handle arm(int64_t deadline_ms, const deadline_entry& entry);

  /// Removes the deadline `h` names. Returns false, changing nothing, if it already fired, was
  /// cancelled, or `h` is a default handle. O(log n).
  bool cancel(deadline_handle h);

  /// Appends to `*out` at most `max` entries whose deadline is at or before `now_ms`, in
  /// deadline order (ties in arm order), and removes them. Returns how many it appended.
  size_t pop_due(int64_t now_ms, size_t max, std::vector<fired_deadline>* out);

  // -- observers ------------------------------------------------------------------------------

  /// The earliest armed deadline (possibly already past): what the single timer is set to.
  std::optional<int64_t> next_deadline() const;

  /// Armed entries.
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  /// Bytes allocated for entries (heap and slot pages, page tables), not counting `*this`.
  size_t bytes_used() const;

private:
  /// Heap order: earlier deadline first, then earlier arm.
  struct key {
    int64_t deadline_ms;
    uint64_t seq;
  };
  /// 32 bytes. A free slot keeps the next free slot's index in `pos`.
  struct slot {
    deadline_entry entry;
    uint32_t generation = 1;  ///< 0 only once retired
    uint32_t pos = 0;         ///< heap position of its key
  };
  static_assert(sizeof(slot) == 32);

  /// An array grown and shrunk by fixed pages: growing never moves what it holds.
  template <class T>
  class paged_array {
  public:
    static constexpr unsigned page_bits = 12;
    static constexpr size_t page_size = size_t{1} << page_bits;

    T& operator[](size_t i) { return pages_[i >> page_bits][i & (page_size - 1)]; }
    const T& operator[](size_t i) const { return pages_[i >> page_bits][i & (page_size - 1)]; }
    size_t capacity() const { return pages_.size() * page_size; }
    void add_page() { pages_.push_back(std::make_unique_for_overwrite<T[]>(page_size)); }
    void drop_page() { pages_.pop_back(); }
    size_t bytes() const {
      return pages_.size() * page_size * sizeof(T)
             + pages_.capacity() * sizeof(std::unique_ptr<T[]>);
    }

  private:
    std::vector<std::unique_ptr<T[]>> pages_;
  };

  static bool before(const key& a, const key& b) {
    return a.deadline_ms < b.deadline_ms || (a.deadline_ms == b.deadline_ms && a.seq < b.seq);
  }

  uint32_t take_slot();
  void free_slot(uint32_t s);
  void place(size_t pos, const key& k, uint32_t s);
  void sift_up(size_t pos, key k, uint32_t s);
  void sift_down(size_t pos, key k, uint32_t s);
  void remove_at(size_t pos);

  static constexpr uint32_t none_ = UINT32_MAX;

  paged_array<key> keys_;           // the heap
  paged_array<uint32_t> key_slot_;  // heap position -> slot
  paged_array<slot> slots_;
  size_t size_ = 0;
  size_t slots_used_ = 0;  // slots ever handed out; those below are in use, free or retired
  uint32_t free_head_ = none_;
  uint64_t next_seq_ = 0;
};

}  // namespace proctor
