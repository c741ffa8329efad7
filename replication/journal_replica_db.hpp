// The replica's database (DIR/db, the journal's RocksDB layout reused through rocksdb_store)
// as libraft's state machine: applying committed entries, taking and restoring snapshots.
//
// Threading: apply(), begin_snapshot() and restore() run on the Raft loop thread (libraft
// calls them there); serialize_snapshot() runs on a libuv worker thread while the loop goes
// on applying; the store() reads and applied_index() may be called from any thread.
//
// Idempotence: each apply writes the entry's ops and the entry's Raft index (the "applied
// watermark", in the column family "raft") in one RocksDB WriteBatch. An entry at or below
// the watermark is skipped, so libraft's replay after a restart (it restores its last
// snapshot and re-applies every later entry) cannot apply anything twice, nor make the
// state go back in time while it catches up.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <rocksdb/status.h>

#include "persistence/rocksdb_store.hpp"
#include "replication/raft_state_machine.hpp"

namespace proctor {

class raft_replica_db final : public raft_state_machine {
public:
  /// Opens (creating) the database under `dir`. With `sync_applies` false, applies are
  /// written to RocksDB's WAL without fsync (docs/replication.md explains why that is safe:
  /// the Raft log and snapshots are synced and replayed past the watermark).
  static std::unique_ptr<raft_replica_db> open(const std::string& dir, bool sync_applies,
                                               std::string* error);

  /// The journal's records as this replica applied them (scan, read_tree).
  rocksdb_store& store() { return *store_; }

  /// The highest Raft index whose entry this database reflects (0: none).
  uint64_t applied_index() const override { return applied_.load(std::memory_order_acquire); }

  /// Applies the entry at Raft `index` (a no-op if index <= applied_index()).
  rocksdb::Status apply(uint64_t index, std::string_view entry) override;

  /// Pins the current state as the snapshot at Raft `index` (loop thread).
  void begin_snapshot(uint64_t index) override;

  /// Serializes the pinned state (raft_codec's snapshot format) into `chunks`.
  rocksdb::Status serialize_snapshot(std::vector<std::string>* chunks) override;

  /// Releases the pinned state.
  void end_snapshot() override;

  /// Replaces the state with a snapshot, unless this database is already at or past the
  /// snapshot's index (then it keeps what it has: a restart restores libraft's last
  /// snapshot although the database went on applying after it). `replaced` tells which.
  rocksdb::Status restore(std::string_view data, bool* replaced) override;

private:
  raft_replica_db(std::unique_ptr<rocksdb_store> store, bool sync_applies, uint64_t applied);

  rocksdb::ColumnFamilyHandle* raft_family() const { return store_->extra_family(0); }

  std::unique_ptr<rocksdb_store> store_;
  bool sync_applies_;
  std::atomic<uint64_t> applied_;
  const rocksdb::Snapshot* snapshot_ = nullptr;  // pinned by begin_snapshot
  uint64_t snapshot_index_ = 0;
};

}  // namespace proctor
