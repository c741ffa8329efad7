#include "actors/scheduling/deadline_queue.hpp"

#include <algorithm>

namespace proctor {

namespace {

// Children of heap position p are 4p+1 .. 4p+4: four children halve the depth of a binary
// heap, and a pop compares four keys that sit side by side in memory.
constexpr size_t arity = 4;

size_t parent_of(size_t pos) {
  return (pos - 1) / arity;
}

}  // namespace

deadline_handle deadline_queue::arm(int64_t deadline_ms, const deadline_entry& entry) {
  auto s = take_slot();
  auto& sl = slots_[s];
  sl.entry = entry;
  if (size_ == keys_.capacity()) {
    keys_.add_page();
    key_slot_.add_page();
  }
  sift_up(size_++, key{deadline_ms, next_seq_++}, s);
  return deadline_handle{s, sl.generation};
}

bool deadline_queue::cancel(deadline_handle h) {
  if (!h || h.slot_ >= slots_used_ || slots_[h.slot_].generation != h.generation_)
    return false;
  remove_at(slots_[h.slot_].pos);
  return true;
}

size_t deadline_queue::pop_due(int64_t now_ms, size_t max, std::vector<fired_deadline>* out) {
  size_t n = 0;
  while (n < max && size_ > 0 && keys_[0].deadline_ms <= now_ms) {
    out->push_back(fired_deadline{keys_[0].deadline_ms, slots_[key_slot_[0]].entry});
    remove_at(0);
    ++n;
  }
  return n;
}

std::optional<int64_t> deadline_queue::next_deadline() const {
  if (size_ == 0)
    return std::nullopt;
  return keys_[0].deadline_ms;
}

size_t deadline_queue::bytes_used() const {
  return keys_.bytes() + key_slot_.bytes() + slots_.bytes();
}

uint32_t deadline_queue::take_slot() {
  if (free_head_ != none_) {
    auto s = free_head_;
    free_head_ = slots_[s].pos;
    return s;
  }
  if (slots_used_ == slots_.capacity())
    slots_.add_page();
  auto s = static_cast<uint32_t>(slots_used_++);
  slots_[s] = slot{};
  return s;
}

void deadline_queue::free_slot(uint32_t s) {
  auto& sl = slots_[s];
  if (sl.generation == UINT32_MAX) {
    sl.generation = 0;  // retired: a handle of any earlier generation stays stale forever
    return;
  }
  ++sl.generation;
  sl.pos = free_head_;
  free_head_ = s;
}

void deadline_queue::place(size_t pos, const key& k, uint32_t s) {
  keys_[pos] = k;
  key_slot_[pos] = s;
  slots_[s].pos = static_cast<uint32_t>(pos);
}

void deadline_queue::sift_up(size_t pos, key k, uint32_t s) {
  while (pos > 0) {
    auto up = parent_of(pos);
    if (!before(k, keys_[up]))
      break;
    place(pos, keys_[up], key_slot_[up]);
    pos = up;
  }
  place(pos, k, s);
}

void deadline_queue::sift_down(size_t pos, key k, uint32_t s) {
  for (;;) {
    auto first = pos * arity + 1;
    if (first >= size_)
      break;
    auto last = std::min(first + arity, size_);
    auto best = first;
    for (auto c = first + 1; c < last; ++c)
      if (before(keys_[c], keys_[best]))
        best = c;
    if (!before(keys_[best], k))
      break;
    place(pos, keys_[best], key_slot_[best]);
    pos = best;
  }
  place(pos, k, s);
}

void deadline_queue::remove_at(size_t pos) {
  free_slot(key_slot_[pos]);
  --size_;
  if (pos != size_) {
    // The last key fills the hole; it may belong above or below it.
    auto k = keys_[size_];
    auto s = key_slot_[size_];
    if (pos > 0 && before(k, keys_[parent_of(pos)]))
      sift_up(pos, k, s);
    else
      sift_down(pos, k, s);
  }
  // Give back a page once two are empty, so a queue hovering at a page boundary does not
  // allocate and free one page per arm.
  if (keys_.capacity() >= size_ + 2 * decltype(keys_)::page_size) {
    keys_.drop_page();
    key_slot_.drop_page();
  }
}

}  // namespace proctor
