// Internal: the state of a node's member of the cluster group (cluster_member.hpp), shared by
// cluster_member.cpp (its life: opening, the members published), cluster_member_reports.cpp
// (the join, the id floor reported, its own activation when it follows the group) and
// cluster_member_commands.cpp (the ClusterRequest it serves: founding, the operators'
// commands, proposals handed on to the leader). Only those three files include it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <proctor/wire.pb.h>

#include "actors/node/cluster_follower.hpp"
#include "actors/node/cluster_member.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wire_client.hpp"
#include "replication/cluster_group.hpp"
#include "replication/cluster_keeper.hpp"

namespace proctor {

namespace cluster_detail {

/// A serialized Response: OK with `text`, or `code` with the error `text`.
std::string answer(pb::Response::Code code, const std::string& text);

const pb::ClusterMember* member_of_incarnation(const pb::ClusterState& st, uint64_t incarnation);

/// Where peers reach member `m`: its peer addresses (a node run as replicas lists every
/// replica's), else its client address.
std::string peer_address_of(const pb::ClusterMember& m);

}  // namespace cluster_detail

struct cluster_member::core {
  cluster_member_setup setup;  // written once by start(), before `ready`
  std::atomic<bool> ready{false};
  std::mutex mtx;
  std::condition_variable cv;            // the joiner's back-off; woken by close()
  std::shared_ptr<cluster_group> group;  // mtx; copies are used outside it
  /// A node run as replicas follows the group instead (setup.follow; mtx, as `group`).
  std::shared_ptr<cluster_follower> follower;
  std::unique_ptr<cluster_keeper> keeper;
  std::mutex init_mtx;  // one founding at a time
  std::thread joiner;
  std::thread reporter;
  std::atomic<bool> stop{false};
  std::atomic<bool> refused{false};
  std::atomic<bool> poked{false};  // mtx for the wait: the reporter looks at once
  std::mutex published_mtx;
  std::string published;            // published_mtx: the members last told, as text
  uint64_t published_version = 0;   // published_mtx: ... and their state's version
  std::string published_limits;     // published_mtx: the type limits last told, as text
  std::string published_schedules;  // published_mtx: the schedules last told, as bytes

  std::shared_ptr<cluster_group> current() {
    std::lock_guard<std::mutex> g(mtx);
    return group;
  }
  std::shared_ptr<cluster_follower> current_follower() {
    std::lock_guard<std::mutex> g(mtx);
    return follower;
  }
  /// The state as this node holds it: its member's, or its follower's; null before either
  /// opened.
  cluster_state::state_ptr state_now();
  /// Why this node no longer takes the group's changes ("" while it does).
  std::string stopped_now();

  // -- its life (cluster_member.cpp; the reports and the join: cluster_member_reports.cpp) ----

  /// This node as a member of the cluster, for a founding or a join.
  pb::ClusterMember self_member() const;
  /// Opens the member (mtx held). `join`: a fresh directory waits to be added rather than
  /// bootstrapping a group of one.
  bool open(bool join, std::string* error);
  /// Starts following the group (setup.follow; mtx held).
  void open_follower();
  /// A node that follows the group and is joining asks to be made active once it holds the
  /// group's state: no keeper can see it caught up, as it has no Raft member.
  void activate_self(const pb::ClusterMember& me);
  void close();
  /// Stops the node when the group forgot its incarnation (an operator declared it lost:
  /// its trees were given up elsewhere), or gave its name another number than its ids carry
  /// (the ids it handed out could repeat another node's; a node with a new journal could
  /// take the group's number instead: not built yet, docs/cluster-group.md).
  void check_self(const pb::ClusterState& st);
  /// Tells the executor of the members that take part, and keeps them in DIR/peers, when
  /// they changed; and of the type limits and the schedules the group holds, when they
  /// changed.
  void publish_members(const pb::ClusterState& st);

  static constexpr uint64_t report_ids = uint64_t{1} << 16;
  static constexpr std::chrono::seconds report_every{10};
  /// Every second: how far this node's ids and journal went, proposed to the group (handed to
  /// its leader) when the ids moved 2^16 past the group's floor for this name, or anything
  /// moved and the last report is 10 s old. Only while this incarnation takes part.
  void report_loop();
  void refuse(const std::string& why);
  /// Sends the join to the seeds in turn (or to the leader one named) until the group
  /// decides; backs off up to 2 s between rounds and warns at most every 10 s.
  void join_loop();

  // -- what it serves (cluster_member_commands.cpp) ----------------------------------------------

  /// Founds the cluster on this node. OK with the outcome; REFUSED when this node belongs to
  /// a cluster, or is joining one.
  pb::Response::Code found(std::string* text);
  /// Proposes `req`'s command if this member leads; otherwise hands it on to the leader's
  /// node once, or answers NOT_LEADER naming it.
  std::string propose_or_forward(pb::Request req);
  /// `proctor node drain NAME --cancel`: a draining member is made active again (the
  /// keeper's activation, for a member that drains; refused for any other).
  std::string cancel_drain(pb::Request req);
  /// `proctor node remove NAME`: only the member itself can say it holds nothing
  /// unfinished, so the request goes to it; there, a draining member that holds no
  /// procedure that has not ended proposes its removal under its incarnation.
  std::string remove(pb::Request req);
  /// `proctor node forget NAME --confirm-lost` on a node of the cluster group (the node's
  /// executor journaled the forgetting first): recorded in the group under the incarnation
  /// it holds, so that every node forgets it and it never takes work again.
  std::string forget(pb::Request req);
  wire_result call(const endpoint& ep, const pb::Request& req);
  std::string show();
  std::string serve(const std::string& bytes);

  /// Proposes through the group's leader's node, for a node that follows the group.
  std::string forward_to_leader(pb::Request req, const cluster_follower& f);

  /// The member an operator's command names, with the state it was found in: `m` is null
  /// and `refusal` the answer to give when there is none (or no group).
  struct target {
    cluster_state::state_ptr state;
    const pb::ClusterMember* m = nullptr;
    std::string refusal;
  };
  target lookup(const std::string& name);
};

}  // namespace proctor
