#pragma once

#include <cstddef>
#include <functional>
#include <iterator>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace proctor {

/// An unordered map that grows without stopping: it rehashes a few entries per insert
/// instead of all of them at once.
///
/// The executor keeps every procedure it knows (and every finished tree, until its result
/// expires) in maps that grow to hundreds of thousands of entries. A `std::unordered_map`
/// grows by rehashing all of its nodes at once: at 140k entries that walk took 10-20 ms,
/// during which the executor (on every submit's and every wait's path) answered nothing; in
/// proctor-bench (c) each such pause put hundreds of procedures over the p99 line.
///
/// Here, when the current table is about to grow, a second table is reserved at twice its
/// size, and every insert after that moves `migrate_per_insert` entries into it (node handles
/// move: no entry is copied or reallocated). New entries go to the second table, which was
/// sized not to rehash before the move is done. Lookups try both tables.
///
/// The interface is the subset of `std::unordered_map` the executor uses. Iteration order is
/// unspecified. Inserts may invalidate iterators (as in `std::unordered_map`); erasing does
/// not invalidate others.
template <class K, class V, class Hash = std::hash<K>>
class incremental_map {
public:
  using table = std::unordered_map<K, V, Hash>;
  using key_type = K;
  using mapped_type = V;
  using value_type = typename table::value_type;
  static constexpr size_t migrate_per_insert = 64;

  template <bool Const>
  class basic_iterator {
  public:
    using owner_ptr = std::conditional_t<Const, const incremental_map*, incremental_map*>;
    using inner =
      std::conditional_t<Const, typename table::const_iterator, typename table::iterator>;
    using iterator_category = std::forward_iterator_tag;
    using value_type = typename table::value_type;
    using difference_type = std::ptrdiff_t;
    using reference = std::conditional_t<Const, const value_type&, value_type&>;
    using pointer = std::conditional_t<Const, const value_type*, value_type*>;

    basic_iterator() = default;
    /// `part`: 0 = the old table, 1 = the new one, 2 = end.
    basic_iterator(owner_ptr m, int part, inner it) : m_(m), part_(part), it_(it) { skip_empty(); }
    operator basic_iterator<true>() const requires(!Const) {
      return basic_iterator<true>(m_, part_, it_);
    }

    reference operator*() const { return *it_; }
    pointer operator->() const { return &*it_; }
    basic_iterator& operator++() {
      ++it_;
      skip_empty();
      return *this;
    }
    basic_iterator operator++(int) {
      auto old = *this;
      ++*this;
      return old;
    }
    friend bool operator==(const basic_iterator& a, const basic_iterator& b) {
      return a.part_ == b.part_ && (a.part_ == 2 || a.it_ == b.it_);
    }

  private:
    friend class incremental_map;
    void skip_empty() {
      if (part_ == 0 && it_ == m_->old_.end()) {
        part_ = 1;
        it_ = m_->cur_.begin();
      }
      if (part_ == 1 && it_ == m_->cur_.end())
        part_ = 2;
    }
    owner_ptr m_ = nullptr;
    int part_ = 2;
    inner it_{};
  };
  using iterator = basic_iterator<false>;
  using const_iterator = basic_iterator<true>;

  iterator begin() { return iterator(this, 0, old_.begin()); }
  iterator end() { return iterator(this, 2, {}); }
  const_iterator begin() const { return const_iterator(this, 0, old_.begin()); }
  const_iterator end() const { return const_iterator(this, 2, {}); }

  iterator find(const K& k) {
    if (auto it = cur_.find(k); it != cur_.end())
      return iterator(this, 1, it);
    if (auto it = old_.find(k); it != old_.end())
      return iterator(this, 0, it);
    return end();
  }
  const_iterator find(const K& k) const {
    if (auto it = cur_.find(k); it != cur_.end())
      return const_iterator(this, 1, it);
    if (auto it = old_.find(k); it != old_.end())
      return const_iterator(this, 0, it);
    return end();
  }
  bool contains(const K& k) const { return cur_.contains(k) || old_.contains(k); }
  size_t count(const K& k) const { return contains(k) ? 1 : 0; }

  template <class... Args>
  std::pair<iterator, bool> try_emplace(const K& k, Args&&... args) {
    grow();
    if (auto it = old_.find(k); it != old_.end())
      return {iterator(this, 0, it), false};
    auto [it, fresh] = cur_.try_emplace(k, std::forward<Args>(args)...);
    return {iterator(this, 1, it), fresh};
  }
  template <class M>
  std::pair<iterator, bool> emplace(const K& k, M&& v) {
    return try_emplace(k, std::forward<M>(v));
  }
  V& operator[](const K& k) { return try_emplace(k).first->second; }

  size_t erase(const K& k) { return cur_.erase(k) + old_.erase(k); }
  iterator erase(iterator pos) {
    if (pos.part_ == 0)
      return iterator(this, 0, old_.erase(pos.it_));
    return iterator(this, 1, cur_.erase(pos.it_));
  }

  size_t size() const { return old_.size() + cur_.size(); }
  bool empty() const { return size() == 0; }
  void clear() {
    old_.clear();
    cur_.clear();
  }
  /// Room for `n` entries without rehashing (recovery knows its count up front).
  void reserve(size_t n) {
    finish_migration();
    cur_.reserve(n);
  }

private:
  /// Before an insert into cur_: move a few entries out of old_, and if cur_ would rehash,
  /// make it old_ and start over with a new table twice its size.
  void grow() {
    if (!old_.empty()) {
      migrate(migrate_per_insert);
    } else if (cur_.size() + 1 > static_cast<size_t>(static_cast<float>(cur_.bucket_count())
                                                     * cur_.max_load_factor())
               && cur_.size() >= 1024) {
      old_.swap(cur_);
      table fresh;
      // Twice the size, plus room for the inserts made while old_ drains (at most one per
      // `migrate_per_insert` entries moved).
      fresh.reserve(2 * old_.size() + old_.size() / migrate_per_insert + 16);
      cur_.swap(fresh);
      migrate(migrate_per_insert);
    }
  }
  void migrate(size_t n) {
    for (size_t i = 0; i < n && !old_.empty(); ++i)
      cur_.insert(old_.extract(old_.begin()));
    if (old_.empty())
      table{}.swap(old_);  // its bucket array goes too
  }
  void finish_migration() { migrate(old_.size()); }

  table old_;  ///< being drained into cur_ (empty when no growth is under way)
  table cur_;
};

}  // namespace proctor
