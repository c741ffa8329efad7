// libraft's state machine callbacks (struct raft_fsm, version 3: asynchronous snapshots)
// driving a raft_state_machine (raft_state_machine.hpp), with the snapshot threshold adapted
// to the state's size. Generic: the group does not know what it replicates.
//
// Threading: the callbacks run on the Raft loop thread, but fsm_snapshot_async on a libuv
// worker thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <rocksdb/status.h>

#include "replication/raft_c.hpp"
#include "replication/raft_state_machine.hpp"

namespace proctor {

/// Binds a raft_fsm (version 3: asynchronous snapshots) to a raft_state_machine. Lives as long
/// as the struct raft that uses it; `raft` is set once raft_init has run.
struct raft_fsm_binding {
  struct raft* raft = nullptr;
  raft_state_machine* sm = nullptr;
  std::string name;  ///< the replica as logs name it ("b1 (#1)")
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
  uint64_t entries_since = 0, bytes_since = 0;  // applied since the last snapshot began
  uint64_t snap_entries = 0, snap_bytes = 0;    // the same, before the one being written
  unsigned threshold = 0;                       // as last set (0: min_threshold)
};

/// The threshold `b` sets after a snapshot of `state_bytes` (raft_fsm_binding::max_log_bytes).
unsigned adapted_threshold(const raft_fsm_binding& b, uint64_t state_bytes);

/// Fills `fsm` with callbacks driving `binding`.
void init_raft_fsm(struct raft_fsm* fsm, raft_fsm_binding* binding);

}  // namespace proctor
