// How a node run as replicas takes part in the cluster group (docs/cluster-group.md, "A node
// run as replicas"): it has no Raft member of the group — its replicas come and go, lead in
// turn and may lose their disks, while a member of the group's Raft needs one stable log, so
// a member per replica would vote with a log a failover leaves behind — and follows the
// group's state instead by asking a member for it (the client protocol's ClusterRequest SHOW)
// every `period`: the group's leader when it is known (it applies each change first), else the
// members with a Raft member and the seeds in turn. Only the replica that leads runs it (the
// node exists there only; a deposed leader re-executes as a follower).
//
// A state is taken only from the cluster it knows (its id), only when it is newer than the one
// held (the group's log index it applied), and only from a member that applies the group's
// log; a state above this release's feature level stops it, as a member of the Raft would
// stop applying (cluster_state.hpp, "Feature levels"). What it proposes goes to the leader's
// node (cluster_member_commands.cpp).
//
// Threading: one thread of its own asks; state(), info(), leader_address() and cut_off() from
// any thread. `on_change` is called on that thread, with each newer state, and must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <proctor/wire.pb.h>

#include "replication/cluster_state.hpp"
#include "tls/tls_options.hpp"

namespace proctor {

struct cluster_follower_options {
  std::string node_name;  ///< this node's (for the log)
  /// Running nodes' client addresses (--seeds): asked when no member is known or answers.
  std::vector<std::string> seeds;
  tls_options tls;
  std::chrono::milliseconds period{250};
  /// How long without a state from the group before the node says it is cut off from it.
  std::chrono::milliseconds cut_off_after{3000};
  /// The feature level of this release (a test may pose as another).
  uint32_t release_level = release_feature_level;
};

class cluster_follower {
public:
  using on_change_fn = std::function<void(const cluster_state::state_ptr&)>;

  /// Starts asking at once.
  cluster_follower(cluster_follower_options options, on_change_fn on_change);
  ~cluster_follower();
  cluster_follower(const cluster_follower&) = delete;
  cluster_follower& operator=(const cluster_follower&) = delete;

  /// The newest state taken (never null; empty before the first answer).
  cluster_state::state_ptr state() const;
  /// The answer it was taken from: who answered, the group's leader and configuration as that
  /// member knew them.
  pb::ClusterInfo info() const;
  /// The client address of the group's leader's node as last heard ("" when none is known).
  std::string leader_address() const;
  /// "" while a state came within cut_off_after; else why not (for the operator).
  std::string cut_off() const;
  /// Why it stopped taking the group's states ("" while it takes them): a state above this
  /// release's feature level.
  std::string stopped() const;

  /// The member to ask after `last`: the next after it among the leader `known` names, the
  /// members with a Raft member (client addresses, in name order) and the seeds, in turn; the
  /// first of them when `last` is none. (After an answer it asks the leader named.) Exposed
  /// for the tests.
  static std::string next_target(const pb::ClusterInfo& known,
                                 const std::vector<std::string>& seeds, const std::string& last);

  /// Takes `answer` (from `target`) if it may, calling on_change when it is newer; "" when
  /// taken or not newer, else why not. The asking thread's; public for the tests.
  std::string take(const std::string& target, pb::ClusterInfo answer);

private:
  void run();

  const cluster_follower_options options_;
  const on_change_fn on_change_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;  // the period's wait; woken by the destructor
  bool stop_ = false;           // mtx_
  cluster_state::state_ptr state_ = std::make_shared<pb::ClusterState>();                // mtx_
  pb::ClusterInfo info_;                                                                 // mtx_
  std::string stopped_;                                                                  // mtx_
  std::string last_failure_;                                                             // mtx_
  std::chrono::steady_clock::time_point last_taken_ = std::chrono::steady_clock::now();  // mtx_
  std::atomic<bool> cancel_{false};  // ends a call under way
  std::thread thread_;
};

}  // namespace proctor
