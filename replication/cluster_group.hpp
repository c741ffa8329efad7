// The cluster group (docs/cluster.md, "The cluster group"): a raft_group (raft_group.hpp)
// replicating the cluster's own state (cluster_state.hpp) among a few of its nodes. This is
// what a node holds of it: propose a command and learn its outcome, read the state as this
// member applied it, and be told of each change.
//
// Threading: any thread; propose() blocks until its command applied here or failed (at most
// the group's write timeout, 5 s unless set).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <proctor/cluster.pb.h>

#include "replication/cluster_state.hpp"
#include "replication/raft_group.hpp"

namespace proctor {

class cluster_group {
public:
  /// Opens (creating) this node's member of the group in options.dir (libraft's files in
  /// dir/raft) and starts it. null with `error` set on failure (raft_group's reasons).
  /// `release_level`: the feature level its release knows (a test may pose as another
  /// release: cluster_state.hpp, "Feature levels").
  static std::unique_ptr<cluster_group> open(raft_store_options options, std::string* error,
                                             uint32_t release_level = release_feature_level);

  struct result {
    /// Not OK when the command was not committed (raft_group::propose: Busy names the
    /// leader; Incomplete and TimedOut: it may still commit, and proposing it again is safe,
    /// every rule being idempotent).
    rocksdb::Status status;
    cluster_outcome outcome;  ///< with status OK: what the command did, or why it was refused
    cluster_state::state_ptr state;  ///< with status OK: the state as of then (it, or later)
  };

  /// Proposes `command` (a random request id and this clock's time are filled in when 0) and
  /// waits until it applied here. Only the leader can: elsewhere, Busy.
  result propose(pb::ClusterCommand command);

  /// The state as this member applied it (never null).
  cluster_state::state_ptr state() const { return state_->current(); }

  /// Why this member stopped applying the group's log ("" while it applies:
  /// cluster_state::stopped).
  std::string stopped_applying() const { return state_->stopped(); }

  /// Calls `fn` on the group's loop thread with each new state (it must not block).
  void subscribe(std::function<void(const cluster_state::state_ptr&)> fn) {
    state_->subscribe(std::move(fn));
  }

  raft_group& raft() { return *raft_; }

private:
  cluster_group() = default;
  cluster_state* state_ = nullptr;  // owned by raft_
  std::unique_ptr<raft_group> raft_;
};

}  // namespace proctor
