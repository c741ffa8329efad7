// Who belongs to the cluster group, and who of them votes (docs/cluster.md, "The cluster
// group"). Every member of the cluster that takes part (joining, active or draining) and has a
// group address is a member of the Raft group, under its incarnation as Raft id and its name as
// label: so every node receives the group's log (the leader pushes each entry to all) and
// learns each change within a heartbeat or two, without polling. Of them, a few vote, as many
// as the settled members (active or draining) want:
//
//   settled members   1-2   3-4   5+
//   voters             1     3     5
//
// (odd: a fourth voter would add a vote to the majority and no tolerance; 2 nodes keep one
// voter, so that losing the other stops nothing). The others are standbys: they store and
// apply the log without counting for the majority. Voters are chosen among the members the
// leader heard recently, active ones before draining ones, by name; a joining member does not
// vote. A voter that is unheard is replaced by such a standby (the standby is promoted first,
// then the voter demoted, so the group never counts fewer good voters than it had). A member
// that left, was forgotten or was replaced by a new incarnation leaves the Raft group.
//
// A joining member becomes active once it caught up with the group's log (next_activation).
//
// next_group_change and next_activation are the pure decisions (one change at a time, as
// libraft allows); cluster_keeper runs them on the group's leader and carries them out.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <proctor/cluster.pb.h>

#include "replication/raft_group.hpp"

namespace proctor {

class cluster_group;

/// Voters wanted for `members` settled members (the table above).
size_t voters_wanted(size_t members);

/// The next change that brings the Raft group's configuration (`config`, as the leader of
/// id `self` sees it, with whom it heard recently) closer to what `state` wants, or none.
/// With `trust_liveness` false (a leader elected moments ago has not heard everyone yet),
/// every member counts as heard. Deterministic.
std::optional<membership_change>
next_group_change(const pb::ClusterState& state,
                  const std::vector<raft_group::member_status>& config, uint64_t self,
                  bool trust_liveness = true);

/// A joining member becomes active once it is in the Raft group and has stored the log to
/// within `caught_up_entries` of `last_index` (as the leader sees it): it holds the cluster's
/// state, and a node opens its member of the group only once it serves (so it can take
/// work). The activation of the first such member (by name), or none. Deterministic.
std::optional<pb::ClusterCommand>
next_activation(const pb::ClusterState& state, const std::vector<raft_group::member_status>& config,
                uint64_t last_index);
inline constexpr uint64_t caught_up_entries = 16;

/// Runs next_group_change, then next_activation, on the leader of `group` every `period` (and at once after a
/// change of the state), one change at a time, each waited for at most its catch-up timeout
/// and a few seconds. Stops when destroyed (before its group closes).
class cluster_keeper {
public:
  cluster_keeper(cluster_group& group, std::chrono::milliseconds period);
  ~cluster_keeper();
  cluster_keeper(const cluster_keeper&) = delete;
  cluster_keeper& operator=(const cluster_keeper&) = delete;

  /// Membership changes and activations carried out since it started (tests, metrics).
  uint64_t changes() const { return changes_.load(); }

  /// How long a new leader trusts nobody's silence: two election timeouts' worth.
  static constexpr std::chrono::milliseconds liveness_grace{3000};

private:
  /// Shared with the subscription to the group's state, which outlives the keeper.
  struct wake {
    std::mutex mtx;
    std::condition_variable cv;
    bool stop = false;
    bool poked = false;  // the state changed
  };

  void run();

  cluster_group& group_;
  std::chrono::milliseconds period_;
  std::shared_ptr<wake> wake_;
  std::atomic<uint64_t> changes_{0};
  std::thread thread_;
};

}  // namespace proctor
