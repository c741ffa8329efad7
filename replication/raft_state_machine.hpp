// What a Raft group replicates: a state machine that applies committed entries in index order
// and takes and restores snapshots. The group (raft_store, its loop, transports and
// membership; raft_fsm.hpp binds libraft's callbacks to this interface) knows nothing else of
// it. The journal's is raft_replica_db (journal_replica_db.hpp); another group (the cluster's
// own state) brings its own.
//
// Threading: apply(), begin_snapshot(), end_snapshot() and restore() run on the Raft loop
// thread; serialize_snapshot() on a libuv worker thread while the loop goes on applying (so it
// must read the state pinned by begin_snapshot); applied_index() from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <rocksdb/status.h>

namespace proctor {

class raft_state_machine {
public:
  virtual ~raft_state_machine() = default;

  /// The highest Raft index whose entry the state reflects (0: none).
  virtual uint64_t applied_index() const = 0;

  /// Applies the entry at Raft `index`; a no-op if index <= applied_index() (libraft replays
  /// the entries after its last snapshot at a restart).
  virtual rocksdb::Status apply(uint64_t index, std::string_view entry) = 0;

  /// Pins the current state as the snapshot at Raft `index`.
  virtual void begin_snapshot(uint64_t index) = 0;

  /// Serializes the pinned state into `chunks` (any sizes; libraft writes them as given).
  virtual rocksdb::Status serialize_snapshot(std::vector<std::string>* chunks) = 0;

  /// Releases the pinned state.
  virtual void end_snapshot() = 0;

  /// Replaces the state with a snapshot, unless it is already at or past the snapshot's
  /// index; `replaced` tells which.
  virtual rocksdb::Status restore(std::string_view data, bool* replaced) = 0;
};

}  // namespace proctor
