// A node's member of the cluster group, what it tells the group of itself (cluster_member.hpp):
// its join through the seeds, how far its ids went (RaiseIdFloor), its addresses when its
// replicas change, and, for a node that follows the group, its own activation.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/node/cluster_member_core.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wire_client.hpp"

namespace proctor {

using cluster_detail::member_of_incarnation;

void cluster_member::core::report_loop() {
  auto last = std::chrono::steady_clock::now() - report_every;
  auto warned = std::chrono::steady_clock::now() - std::chrono::minutes{1};
  while (!stop) {
    {
      std::unique_lock<std::mutex> l(mtx);
      cv.wait_for(l, std::chrono::seconds{1}, [this] { return stop.load() || poked.load(); });
      poked = false;
    }
    const auto st = state_now();
    if (stop || !st || !setup.next_id)
      continue;
    // A member that stopped applying (its release is below the cluster's level) says so
    // every minute, not once: the node runs on, but learns no change of the cluster.
    if (auto why = stopped_now();
        !why.empty() && std::chrono::steady_clock::now() - warned >= std::chrono::minutes{1}) {
      warned = std::chrono::steady_clock::now();
      spdlog::error("node {}: its member of the cluster group stopped applying the group's log "
                    "at index {}: {}. It runs what it holds and learns no change of the "
                    "cluster (members, placement, limits, schedules) until it runs such a "
                    "release; `proctor cluster nodes` on it says so",
                    setup.node_name, st->applied_index(), why);
    }
    const auto* me = member_of_incarnation(*st, setup.incarnation);
    if (me == nullptr || !member_takes_part(*me))
      continue;
    if (setup.follow && me->state() == pb::JOINING && me->group_address().empty())
      activate_self(*me);
    // Its replicas changed (`proctor replicas add`, `remove`): the group learns the addresses.
    if (auto want = setup.peer_address ? setup.peer_address() : std::string{};
        !want.empty() && want != me->peer_address()) {
      pb::Request join;
      join.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
      *join.mutable_cluster()->mutable_command()->mutable_join()->mutable_member() = self_member();
      pb::Response r;
      if (r.ParseFromString(propose_or_forward(std::move(join))) && r.code() == pb::Response::OK)
        spdlog::info("node {}: {}", setup.node_name, r.text());
    }
    const uint64_t id = setup.next_id();
    const uint64_t lsn = setup.durable_lsn ? setup.durable_lsn() : 0;
    const auto now = std::chrono::steady_clock::now();
    const bool moved = id > me->id_floor() || lsn > me->journal_lsn();
    // A release of another level than the group recorded for it (upgraded, or a member
    // recorded before levels existed) says so at once: the cluster's level waits for it.
    const bool level_told = me->feature_level() == release_feature_level;
    if (level_told && (!moved || (id < me->id_floor() + report_ids && now - last < report_every)))
      continue;
    pb::Request req;
    req.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
    auto* f = req.mutable_cluster()->mutable_command()->mutable_raise_floor();
    f->set_name(setup.node_name);
    f->set_incarnation(setup.incarnation);
    f->set_id_floor(id);
    f->set_journal_lsn(lsn);
    if (!level_told)
      f->set_feature_level(release_feature_level);
    pb::Response r;
    if (r.ParseFromString(propose_or_forward(std::move(req))) && r.code() == pb::Response::OK)
      last = now;
    else
      spdlog::debug("node {}: its id floor {} not reported to the cluster group yet: {}",
                    setup.node_name, id, r.error());
  }
}

void cluster_member::core::activate_self(const pb::ClusterMember& me) {
  pb::Request req;
  req.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  auto* a = req.mutable_cluster()->mutable_command()->mutable_activate();
  a->set_name(me.name());
  a->set_incarnation(me.incarnation());
  pb::Response r;
  if (r.ParseFromString(propose_or_forward(std::move(req))) && r.code() == pb::Response::OK)
    spdlog::info("node {}: holds the cluster group's state: {}", setup.node_name, r.text());
  else
    spdlog::debug("node {}: not made active yet: {}", setup.node_name, r.error());
}

void cluster_member::core::refuse(const std::string& why) {
  if (!refused.exchange(true) && setup.on_refused)
    setup.on_refused(why);
}

void cluster_member::core::join_loop() {
  pb::Request req;
  req.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  *req.mutable_cluster()->mutable_command()->mutable_join()->mutable_member() = self_member();
  const auto bytes = req.SerializeAsString();
  wire_call_options wo;
  wo.connect_timeout = std::chrono::milliseconds{2000};
  wo.reply_timeout = std::chrono::milliseconds{20'000};  // a seed may hand it on
  wo.cancel = &stop;
  wo.tls = setup.tls;
  size_t next = 0;
  std::string hint, why;
  auto backoff = std::chrono::milliseconds{100};
  auto last_warn = std::chrono::steady_clock::now();
  const auto started = last_warn;
  while (!stop) {
    std::string target =
      hint.empty() ? setup.seeds[next++ % setup.seeds.size()] : std::exchange(hint, std::string{});
    auto ep = parse_endpoint(target);
    auto w = wire_call(ep->host, ep->port, bytes, wo);
    pb::Response r;
    if (!w.ok())
      why = target + ": " + w.reason;
    else if (!r.ParseFromString(w.reply))
      why = target + ": an answer that does not parse";
    else if (r.code() == pb::Response::OK) {
      spdlog::info("node {}: joined the cluster through {} in {} ms: {}", setup.node_name, target,
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count(),
                   r.text());
      return;
    } else if (r.code() == pb::Response::REFUSED || r.code() == pb::Response::BAD_REQUEST) {
      refuse("the cluster refused node " + setup.node_name + " (asked through " + target
             + "): " + r.error());
      return;
    } else {
      why = target + ": " + r.error();
      if (r.code() == pb::Response::NOT_LEADER && !r.leader().empty() && r.leader() != target)
        hint = r.leader();
    }
    if (auto now = std::chrono::steady_clock::now(); now - last_warn > std::chrono::seconds{10}) {
      spdlog::warn("node {}: not joined to the cluster yet, trying again ({})", setup.node_name,
                   why);
      last_warn = now;
    }
    if (!hint.empty())
      continue;  // the leader named: at once
    std::unique_lock<std::mutex> l(mtx);
    cv.wait_for(l, backoff, [this] { return stop.load(); });
    backoff = std::min(backoff * 2, std::chrono::milliseconds{2000});
  }
}

}  // namespace proctor
