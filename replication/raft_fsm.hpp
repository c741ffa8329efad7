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
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <rocksdb/status.h>

#include "replication/raft_c.hpp"
#include "persistence/rocksdb_store.hpp"

namespace proctor {

class raft_replica_db {
public:
  /// Opens (creating) the database under `dir`. With `sync_applies` false, applies are
  /// written to RocksDB's WAL without fsync (docs/replication.md explains why that is safe:
  /// the Raft log and snapshots are synced and replayed past the watermark).
  static std::unique_ptr<raft_replica_db> open(const std::string& dir, bool sync_applies,
                                               std::string* error);

  /// The journal's records as this replica applied them (scan, read_tree).
  rocksdb_store& store() { return *store_; }

  /// The highest Raft index whose entry this database reflects (0: none).
  uint64_t applied_index() const { return applied_.load(std::memory_order_acquire); }

  /// Applies the entry at Raft `index` (a no-op if index <= applied_index()).
  rocksdb::Status apply(uint64_t index, std::string_view entry);

  /// Pins the current state as the snapshot at Raft `index` (loop thread).
  void begin_snapshot(uint64_t index);

  /// Serializes the pinned state (raft_codec's snapshot format) into `chunks`.
  rocksdb::Status serialize_snapshot(std::vector<std::string>* chunks);

  /// Releases the pinned state.
  void end_snapshot();

  /// Replaces the state with a snapshot, unless this database is already at or past the
  /// snapshot's index (then it keeps what it has: a restart restores libraft's last
  /// snapshot although the database went on applying after it). `replaced` tells which.
  rocksdb::Status restore(std::string_view data, bool* replaced);

private:
  raft_replica_db(std::unique_ptr<rocksdb_store> store, bool sync_applies, uint64_t applied);

  rocksdb::ColumnFamilyHandle* raft_family() const { return store_->extra_family(0); }

  std::unique_ptr<rocksdb_store> store_;
  bool sync_applies_;
  std::atomic<uint64_t> applied_;
  const rocksdb::Snapshot* snapshot_ = nullptr;  // pinned by begin_snapshot
  uint64_t snapshot_index_ = 0;
};

/// Binds a raft_fsm (version 3: asynchronous snapshots) to a raft_replica_db. Lives as long
/// as the struct raft that uses it; `raft` is set once raft_init has run.
struct raft_fsm_binding {
  struct raft* raft = nullptr;
  raft_replica_db* db = nullptr;
  /// Called (on the loop thread, once) when an apply fails: the replica cannot go on
  /// applying; libraft retries the entry on its next commit.
  std::function<void(const rocksdb::Status&)> on_fatal;
  /// Called on the loop thread after each applied command entry, with its index.
  std::function<void(uint64_t)> on_applied;
  /// The snapshot threshold (libraft's, in applied entries) adapts to the state's size:
  /// after each snapshot it becomes the number of entries, of the average size seen since
  /// the previous one, that hold as many bytes as the snapshot did, capped at
  /// `max_log_bytes` of them, and never below `min_threshold`. So writing snapshots costs
  /// at most about one byte serialized per byte appended to the log, while the log kept
  /// (and held in memory) since the last snapshot stays below max(the state's size,
  /// max_log_bytes, min_threshold entries). 0: the threshold stays min_threshold.
  unsigned min_threshold = 1024;
  uint64_t max_log_bytes = 0;

  // -- internal ---------------------------------------------------------------------------
  std::vector<std::string> chunks;  // the snapshot being written, until finalize
  bool failed = false;
  uint64_t entries_since = 0, bytes_since = 0;    // applied since the last snapshot began
  uint64_t snap_entries = 0, snap_bytes = 0;      // the same, before the one being written
  unsigned threshold = 0;                         // as last set (0: min_threshold)
};

/// The threshold `b` sets after a snapshot of `state_bytes` (raft_fsm_binding::max_log_bytes).
unsigned adapted_threshold(const raft_fsm_binding& b, uint64_t state_bytes);

/// Fills `fsm` with callbacks driving `binding`.
void init_raft_fsm(struct raft_fsm* fsm, raft_fsm_binding* binding);

}  // namespace proctor
