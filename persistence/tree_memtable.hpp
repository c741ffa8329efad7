// The journal's RocksDB memtable: records kept per tree instead of in one skiplist.
//
// Journal keys are (root id, LSN). The journal appends to thousands of trees at once, so
// consecutive writes land far apart in key order, and RocksDB's default skiplist memtable
// paid a search from the top for every record: about 3 us per record here against 0.9 us
// for keys in order (the same synced batches of 1000, one writer, measured), which made the
// memtable the journal's bottleneck. A tree's own records, though, arrive in key order. So
// this memtable keeps one vector per tree (the key's first 8 bytes) and appends to it:
//   - insert: a hash lookup and an append (an out-of-order key, such as a rewrite of the
//     same key with a newer sequence number, is placed by binary search);
//   - a read of one tree (the journal's read_tree, RocksDB's Get): the memtable's prefix
//     iterator copies that tree's vector, nothing else;
//   - a total-order iterator (a flush, the start-up scan): all trees in key order, built
//     once and kept for a memtable that no longer changes.
// It needs the journal's prefix extractor (journal_prefix_transform()) and readers that
// cross trees to ask for total_order_seek. Reads are snapshots taken under a shared lock;
// the one writer takes it exclusively.
#pragma once

#include <memory>

#include <rocksdb/memtablerep.h>
#include <rocksdb/slice_transform.h>

namespace proctor {

/// The first 8 bytes of a key, its root id: the prefix a tree_memtable groups by.
std::shared_ptr<const rocksdb::SliceTransform> journal_prefix_transform();

/// Creates tree_memtable reps. Single writer only (allow_concurrent_memtable_write = false).
class tree_memtable_factory : public rocksdb::MemTableRepFactory {
public:
  rocksdb::MemTableRep* CreateMemTableRep(const rocksdb::MemTableRep::KeyComparator& cmp,
                                          rocksdb::Allocator* allocator,
                                          const rocksdb::SliceTransform* prefix,
                                          rocksdb::Logger* logger) override;
  const char* Name() const override { return "ProctorTreeMemTableFactory"; }
  bool IsInsertConcurrentlySupported() const override { return false; }
  bool CanHandleDuplicatedKey() const override { return false; }
};

}  // namespace proctor
