#include "persistence/tree_memtable.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <rocksdb/version.h>

#include "persistence/keys.hpp"

namespace rocksdb {

// RocksDB's memory/allocator.h, which is not installed: the interface of the Arena that a
// memtable iterator may be asked to live in (RocksDB's Arena derives from it alone). It has
// not changed since RocksDB 3; the check below pins the version this was read from.
class Allocator {
public:
  virtual ~Allocator() {}
  virtual char* Allocate(size_t bytes) = 0;
  virtual char* AllocateAligned(size_t bytes, size_t huge_page_size = 0,
                                Logger* logger = nullptr) = 0;
  virtual size_t BlockSize() const = 0;
};

}  // namespace rocksdb

static_assert(ROCKSDB_MAJOR == 7, "tree_memtable declares RocksDB 7's internal Allocator; "
                                  "check memory/allocator.h of this RocksDB version");

namespace proctor {

namespace {

using rocksdb::MemTableRep;
using rocksdb::Slice;
using entries = std::vector<const char*>;
using entries_ptr = std::shared_ptr<const entries>;

/// Iterates over a snapshot of entries in key order. A prefix iterator takes its snapshot at
/// each seek: that tree's entries only (all of them for SeekToFirst / SeekToLast).
class snapshot_iterator final : public MemTableRep::Iterator {
public:
  using source = std::function<entries_ptr(const Slice* internal_key)>;

  snapshot_iterator(const MemTableRep::KeyComparator& cmp, entries_ptr all, source src)
      : cmp_(cmp), v_(std::move(all)), src_(std::move(src)) {
    i_ = v_ ? v_->size() : 0;
  }

  bool Valid() const override { return v_ && i_ < v_->size(); }
  const char* key() const override { return (*v_)[i_]; }
  void Next() override { ++i_; }
  void Prev() override { i_ = i_ == 0 ? v_->size() : i_ - 1; }

  void Seek(const Slice& ikey, const char*) override {
    take(&ikey);
    auto it = std::lower_bound(v_->begin(), v_->end(), ikey,
                               [this](const char* e, const Slice& k) { return cmp_(e, k) < 0; });
    i_ = static_cast<size_t>(it - v_->begin());
  }

  void SeekForPrev(const Slice& ikey, const char*) override {
    take(&ikey);
    auto it = std::upper_bound(v_->begin(), v_->end(), ikey,
                               [this](const Slice& k, const char* e) { return cmp_(e, k) > 0; });
    i_ = it == v_->begin() ? v_->size() : static_cast<size_t>(it - v_->begin()) - 1;
  }

  void SeekToFirst() override {
    take(nullptr);
    i_ = 0;
  }

  void SeekToLast() override {
    take(nullptr);
    i_ = v_->empty() ? 0 : v_->size() - 1;
  }

private:
  void take(const Slice* ikey) {
    if (src_)
      v_ = src_(ikey);
  }

  const MemTableRep::KeyComparator& cmp_;
  entries_ptr v_;
  source src_;  ///< set for a prefix iterator
  size_t i_ = 0;
};

/// Entry order, for the standard algorithms.
struct entry_less {
  const MemTableRep::KeyComparator* cmp;
  bool operator()(const char* a, const char* b) const { return (*cmp)(a, b) < 0; }
};

class tree_rep final : public MemTableRep {
public:
  tree_rep(const KeyComparator& cmp, rocksdb::Allocator* allocator)
      : MemTableRep(allocator), cmp_(cmp) {}

  void Insert(rocksdb::KeyHandle handle) override {
    const auto* e = static_cast<const char*>(handle);
    std::unique_lock g(mu_);
    auto [v, created] = list(UserKey(e));
    if (created)
      v->reserve(first_capacity);
    // A tree's records come in key order: append. Anything else (the same key again with a
    // newer sequence number, which sorts first) goes where it belongs.
    if (v->empty() || cmp_(v->back(), e) < 0) {
      v->push_back(e);
    } else {
      auto at = std::upper_bound(v->begin(), v->end(), e, less());
      v->insert(at, e);
    }
    bytes_.fetch_add(sizeof(const char*) + (created ? tree_overhead : 0),
                     std::memory_order_relaxed);
  }

  bool Contains(const char* key) const override {
    std::shared_lock g(mu_);
    const auto* v = find(UserKey(key));
    if (v == nullptr)
      return false;
    return std::binary_search(v->begin(), v->end(), key, less());
  }

  void MarkReadOnly() override {
    std::unique_lock g(mu_);
    read_only_ = true;
  }

  size_t ApproximateMemoryUsage() override { return bytes_.load(std::memory_order_relaxed); }

  Iterator* GetIterator(rocksdb::Arena* arena) override {
    return make_iterator(arena, ordered(), {});
  }

  Iterator* GetDynamicPrefixIterator(rocksdb::Arena* arena) override {
    return make_iterator(arena, nullptr, [this](const Slice* ikey) -> entries_ptr {
      if (ikey == nullptr)
        return ordered();
      Slice user(ikey->data(), ikey->size() - 8);
      std::shared_lock g(mu_);
      const auto* v = find(user);
      return v == nullptr ? std::make_shared<const entries>() : std::make_shared<const entries>(*v);
    });
  }

private:
  /// Per tree: the map node, its vector, some of the vector's unused capacity.
  static constexpr size_t tree_overhead = 96;
  /// A tree's vector starts with room for this many records: one allocation where growing
  /// from one took four for the 6 records of proctor-bench (b)'s 5-step procedure (a
  /// Submitted, a record per step; docs/benchmarks.md, "What a procedure costs").
  static constexpr size_t first_capacity = 8;

  entry_less less() const { return {&cmp_}; }

  /// Journal keys are at least 8 bytes; shorter ones (only in a damaged store) share a list.
  static bool root_of(const Slice& user, uint64_t* root) {
    if (user.size() < 8)
      return false;
    *root = journal_keys::get_be64(user.data());
    return true;
  }

  std::pair<entries*, bool> list(const Slice& user) {
    uint64_t root = 0;
    if (!root_of(user, &root))
      return {&short_keys_, false};
    auto [it, created] = trees_.try_emplace(root);
    return {&it->second, created};
  }

  const entries* find(const Slice& user) const {
    uint64_t root = 0;
    if (!root_of(user, &root))
      return &short_keys_;
    auto it = trees_.find(root);
    return it == trees_.end() ? nullptr : &it->second;
  }

  /// All entries in key order; built once for a memtable that no longer changes.
  entries_ptr ordered() {
    std::shared_lock g(mu_);
    if (read_only_) {
      std::lock_guard b(build_mu_);
      if (!ordered_)
        ordered_ = build();
      return ordered_;
    }
    return build();
  }

  entries_ptr build() const {
    std::vector<std::pair<uint64_t, const entries*>> trees;
    trees.reserve(trees_.size());
    size_t n = short_keys_.size();
    for (const auto& [root, v] : trees_) {
      trees.emplace_back(root, &v);
      n += v.size();
    }
    std::sort(trees.begin(), trees.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    auto out = std::make_shared<entries>();
    out->reserve(n);
    for (const auto& t : trees)
      out->insert(out->end(), t.second->begin(), t.second->end());
    out->insert(out->end(), short_keys_.begin(), short_keys_.end());
    // Trees in root order are in key order under RocksDB's bytewise comparator (big-endian
    // root ids); short keys, or another comparator, need the sort.
    if (!std::is_sorted(out->begin(), out->end(), less()))
      std::sort(out->begin(), out->end(), less());
    return out;
  }

  Iterator* make_iterator(rocksdb::Arena* arena, entries_ptr all,
                          snapshot_iterator::source src) const {
    if (arena == nullptr)
      return new snapshot_iterator(cmp_, std::move(all), std::move(src));
    // RocksDB destroys an iterator placed in its arena without freeing it: the arena goes.
    auto* alloc = reinterpret_cast<rocksdb::Allocator*>(arena);
    void* mem = alloc->AllocateAligned(sizeof(snapshot_iterator));
    return new (mem) snapshot_iterator(cmp_, std::move(all), std::move(src));
  }

  const KeyComparator& cmp_;
  mutable std::shared_mutex mu_;  ///< the writer holds it exclusively, readers shared
  std::unordered_map<uint64_t, entries> trees_;
  entries short_keys_;
  bool read_only_ = false;
  std::mutex build_mu_;
  entries_ptr ordered_;  ///< once read-only
  std::atomic<size_t> bytes_{0};
};

}  // namespace

std::shared_ptr<const rocksdb::SliceTransform> journal_prefix_transform() {
  return std::shared_ptr<const rocksdb::SliceTransform>(
    rocksdb::NewFixedPrefixTransform(journal_keys::key_size / 2));
}

rocksdb::MemTableRep*
tree_memtable_factory::CreateMemTableRep(const rocksdb::MemTableRep::KeyComparator& cmp,
                                         rocksdb::Allocator* allocator,
                                         const rocksdb::SliceTransform*, rocksdb::Logger*) {
  return new tree_rep(cmp, allocator);
}

}  // namespace proctor
