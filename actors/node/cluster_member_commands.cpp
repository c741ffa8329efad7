// What a node's member of the cluster group serves (cluster_member.hpp): the client
// protocol's ClusterRequest — the cluster as this member applied it, the founding, and the
// operators' commands (drain, cancel, remove, forget), proposed here when this member leads
// and handed on once to the leader's node otherwise.
#include <cstdio>
#include <random>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/base/placement.hpp"
#include "actors/node/cluster_member_core.hpp"

namespace proctor {

using cluster_detail::answer;
using cluster_detail::member_of_incarnation;

namespace {

std::string random_cluster_id() {
  std::random_device rd;
  std::mt19937_64 gen{(uint64_t{rd()} << 32) ^ rd()};
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(gen()),
                static_cast<unsigned long long>(gen()));
  return buf;
}

const char* role_name(raft_group::member_status::role_kind r) {
  switch (r) {
    case raft_group::member_status::role_kind::voter:
      return "voter";
    case raft_group::member_status::role_kind::standby:
      return "standby";
    case raft_group::member_status::role_kind::spare:
      return "spare";
  }
  return "?";
}

}  // namespace

pb::Response::Code cluster_member::core::found(std::string* text) {
  if (setup.follow) {
    *text = "node " + setup.node_name + " is run as replicas and has no member of the cluster "
            + "group's Raft: found the cluster on a node started with --group-port, and start "
            + "this one with --seeds to join it";
    return pb::Response::REFUSED;
  }
  std::lock_guard<std::mutex> one(init_mtx);
  std::shared_ptr<cluster_group> g;
  {
    std::lock_guard<std::mutex> l(mtx);
    if (!open(false, text))
      return pb::Response::INTERNAL;
    g = group;
  }
  if (auto st = g->state(); !st->cluster_id().empty()) {
    *text = "node " + setup.node_name + " is a member of the cluster " + st->cluster_id()
            + " already: there is nothing to found";
    return pb::Response::REFUSED;
  }
  auto members = g->raft().members();
  if (members.empty()) {
    *text =
      "node " + setup.node_name + " is joining a cluster (--seeds): it cannot found another one";
    return pb::Response::REFUSED;
  }
  if (members.size() != 1 || members[0].id != setup.incarnation) {
    // (Its state may not be applied yet after a restart: the group's log says more.)
    *text = "node " + setup.node_name + "'s member of the cluster group is in a group of "
            + std::to_string(members.size()) + ": it founded or joined a cluster already";
    return pb::Response::REFUSED;
  }
  // A group of one elects itself within one or two election timeouts.
  const auto bound = std::chrono::milliseconds{5 * setup.election_timeout_ms};
  const auto until = std::chrono::steady_clock::now() + bound;
  while (!g->raft().is_leader() && !stop && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  if (!g->raft().is_leader()) {
    *text = "node " + setup.node_name + "'s member of the cluster group did not become "
            + "leader of its group of one within " + std::to_string(bound.count()) + " ms";
    return pb::Response::INTERNAL;
  }
  pb::ClusterCommand c;
  auto* f = c.mutable_found();
  f->set_cluster_id(random_cluster_id());
  f->set_slot_count(placement::slot_count);
  *f->mutable_founder() = self_member();
  auto r = g->propose(std::move(c));
  if (!r.status.ok()) {
    *text = "the founding was not committed: " + r.status.ToString();
    return pb::Response::INTERNAL;
  }
  *text = r.outcome.text;
  return r.outcome.applied ? pb::Response::OK : pb::Response::REFUSED;
}

std::string cluster_member::core::forward_to_leader(pb::Request req, const cluster_follower& f) {
  if (f.state()->cluster_id().empty())
    return answer(pb::Response::NOT_LEADER,
                  "node " + setup.node_name + " has not heard from the cluster group yet");
  auto leader = f.leader_address();
  if (leader.empty() || req.cluster().forwarded())
    return answer(pb::Response::NOT_LEADER,
                  "node " + setup.node_name + " knows no leader of the cluster group now");
  req.mutable_cluster()->set_forwarded(true);
  // Once more at the leader its answer names, when the one it knew no longer leads.
  std::string why;
  for (int attempt = 0; attempt < 2 && !leader.empty(); ++attempt) {
    auto ep = parse_endpoint(leader);
    if (!ep)
      break;
    auto w = call(*ep, req);
    pb::Response r;
    if (!w.ok()) {
      why = leader + ": " + w.reason;
      break;
    }
    if (!r.ParseFromString(w.reply) || r.code() != pb::Response::NOT_LEADER || r.leader().empty()
        || r.leader() == leader)
      return std::move(w.reply);
    why = leader + ": " + r.error();
    leader = r.leader();
  }
  return answer(pb::Response::NOT_LEADER, "the cluster group's leader did not take it from node "
                                            + setup.node_name + " (" + why
                                            + "): proposing it again is safe");
}

std::string cluster_member::core::propose_or_forward(pb::Request req) {
  if (auto f = current_follower())
    return forward_to_leader(std::move(req), *f);
  auto g = current();
  if (!g)
    return answer(pb::Response::NOT_LEADER,
                  "node " + setup.node_name + " is not a member of a cluster group yet");
  auto st = g->state();
  if (st->cluster_id().empty())
    // Not final for a joiner: the founding may be under way, or not applied here yet.
    return answer(pb::Response::NOT_LEADER, "the cluster is not founded yet as node "
                                              + setup.node_name
                                              + " knows it (`proctor cluster init` on one node)");
  if (g->raft().is_leader()) {
    auto r = g->propose(req.cluster().command());
    if (r.status.ok())
      return answer(r.outcome.applied ? pb::Response::OK : pb::Response::REFUSED, r.outcome.text);
    if (!r.status.IsBusy())
      return answer(pb::Response::INTERNAL, "the cluster group did not decide ("
                                              + r.status.ToString()
                                              + "): proposing it again is safe");
    st = g->state();  // leadership moved: on to the new leader
  }
  const auto leader = g->raft().leader();
  const auto* lm = leader.id == 0 ? nullptr : member_of_incarnation(*st, leader.id);
  if (lm == nullptr || leader.id == setup.incarnation)
    return answer(pb::Response::NOT_LEADER,
                  "no leader of the cluster group is known to node " + setup.node_name);
  auto not_leader = [&](const std::string& why) {
    pb::Response r;
    r.set_code(pb::Response::NOT_LEADER);
    r.set_error(why);
    r.set_leader(lm->client_address());
    return r.SerializeAsString();
  };
  auto ep = parse_endpoint(lm->client_address());
  if (req.cluster().forwarded() || !ep)
    return not_leader("node " + setup.node_name + " does not lead the cluster group; " + lm->name()
                      + " does");
  req.mutable_cluster()->set_forwarded(true);
  auto w = call(*ep, req);
  if (!w.ok())
    return not_leader("the cluster group's leader " + lm->name() + " did not answer: " + w.reason);
  return std::move(w.reply);
}

cluster_member::core::target cluster_member::core::lookup(const std::string& name) {
  target t;
  t.state = state_now();
  if (!t.state) {
    t.refusal =
      answer(pb::Response::REFUSED, "node " + setup.node_name + " is in no cluster group");
    return t;
  }
  t.m = find_member(*t.state, name);
  if (t.m == nullptr)
    t.refusal = answer(pb::Response::REFUSED,
                       t.state->cluster_id().empty()
                         ? "node " + setup.node_name + " is a member of no founded cluster"
                         : "no member of the cluster is named '" + name + "'");
  return t;
}

std::string cluster_member::core::cancel_drain(pb::Request req) {
  auto* a = req.mutable_cluster()->mutable_command()->mutable_activate();
  const auto t = lookup(a->name());
  const auto* m = t.m;
  if (m == nullptr)
    return t.refusal;
  // A node run as replicas (no Raft member the keeper could see catch up) asks itself to be
  // made active once it holds the group's state, naming its incarnation; an operator's
  // `node drain --cancel` names none.
  if (m->state() == pb::JOINING && m->group_address().empty() && a->incarnation() != 0
      && a->incarnation() == m->incarnation())
    return propose_or_forward(std::move(req));
  if (m->state() != pb::DRAINING)
    return answer(pb::Response::REFUSED, "node " + m->name() + " is "
                                           + member_state_name(m->state())
                                           + ", not draining: there is no drain to cancel");
  a->set_incarnation(m->incarnation());
  return propose_or_forward(std::move(req));
}

std::string cluster_member::core::remove(pb::Request req) {
  auto* r = req.mutable_cluster()->mutable_command()->mutable_remove();
  if (req.cluster().forwarded() && r->incarnation() != 0 && state_now())
    return propose_or_forward(std::move(req));  // the member's own, handed to the leader
  const auto t = lookup(r->name());
  const auto* m = t.m;
  if (m == nullptr)
    return t.refusal;
  if (m->state() == pb::LEFT)
    return answer(pb::Response::OK, "node " + m->name() + " left the cluster already");
  if (m->state() != pb::DRAINING)
    return answer(pb::Response::REFUSED, "node " + m->name() + " is "
                                           + member_state_name(m->state())
                                           + ": drain it first (`proctor node drain " + m->name()
                                           + "`), then remove it once it holds nothing unfinished");
  if (m->name() != setup.node_name) {
    auto ep = parse_endpoint(m->client_address());
    if (req.cluster().forwarded() || !ep)
      return answer(pb::Response::REFUSED,
                    "node " + m->name() + " is not node " + setup.node_name + ": ask it");
    req.mutable_cluster()->set_forwarded(true);
    auto w = call(*ep, req);
    if (!w.ok())
      return answer(pb::Response::REFUSED,
                    "node " + m->name() + " could not be asked what it still holds (" + w.reason
                      + "); a node that is lost is forgotten (`proctor node forget " + m->name()
                      + " --confirm-lost`), not removed");
    return std::move(w.reply);
  }
  const uint64_t live = setup.live ? setup.live() : 0;
  if (live > 0)
    return answer(pb::Response::REFUSED,
                  "node " + m->name() + " still holds " + std::to_string(live)
                    + " procedure(s) that have not ended (`proctor list` on it): it can be "
                      "removed once they did; nothing new is placed on it meanwhile");
  if (setup.nonces_handed) {
    auto why = setup.nonces_handed();
    if (!why.empty())
      return answer(pb::Response::REFUSED,
                    why
                      + ": it can be removed once they did (within a second of the "
                        "drain while every member is up); retry");
  }
  r->set_incarnation(setup.incarnation);
  req.mutable_cluster()->set_forwarded(false);
  return propose_or_forward(std::move(req));
}

std::string cluster_member::core::forget(pb::Request req) {
  auto* f = req.mutable_cluster()->mutable_command()->mutable_forget();
  const auto t = lookup(f->name());
  const auto* m = t.m;
  if (m == nullptr)
    return t.refusal;
  if (f->incarnation() == 0)
    f->set_incarnation(m->incarnation());
  return propose_or_forward(std::move(req));
}

wire_result cluster_member::core::call(const endpoint& ep, const pb::Request& req) {
  wire_call_options wo;
  wo.connect_timeout = std::chrono::milliseconds{2000};
  wo.reply_timeout = std::chrono::milliseconds{15'000};  // above the group's write timeout
  wo.cancel = &stop;
  wo.tls = setup.tls;
  return wire_call(ep.host, ep.port, req.SerializeAsString(), wo);
}

std::string cluster_member::core::show() {
  pb::Response r;
  auto* ci = r.mutable_cluster();
  ci->set_node(setup.node_name);
  if (auto f = current_follower()) {
    // No Raft member: the state as the member it asked last answered it.
    auto info = f->info();
    const auto through = info.node();
    *ci = std::move(info);
    ci->set_node(setup.node_name);
    auto role = through.empty() ? std::string{"follows the group, not heard yet"}
                                : "follows the group through " + through;
    if (auto cut = f->cut_off(); !cut.empty())
      role += "; cut off: " + cut;
    ci->set_role(role);
    ci->set_applied_index(ci->state().applied_index());
    ci->set_stopped_applying(f->stopped());
    if (const auto* lm = find_member(ci->state(), ci->leader_node()))
      ci->set_leader_id(lm->incarnation());
    return r.SerializeAsString();
  }
  auto g = current();
  if (!g) {
    ci->set_role("none");
    return r.SerializeAsString();
  }
  auto st = g->state();
  *ci->mutable_state() = *st;
  ci->set_role(g->raft().role());
  const auto leader = g->raft().leader();
  ci->set_leader_id(leader.id);
  if (const auto* lm = member_of_incarnation(*st, leader.id))
    ci->set_leader_node(lm->name());
  ci->set_applied_index(g->raft().applied_index());
  ci->set_stopped_applying(g->stopped_applying());
  for (const auto& m : g->raft().members()) {
    auto* gm = ci->add_group();
    gm->set_id(m.id);
    gm->set_name(m.label);
    gm->set_address(m.address);
    gm->set_role(role_name(m.role));
    gm->set_heard(m.recently_heard);
    gm->set_match_index(m.match_index);
  }
  return r.SerializeAsString();
}

std::string cluster_member::core::serve(const std::string& bytes) {
  if (!ready.load(std::memory_order_acquire))
    return answer(pb::Response::NOT_LEADER, "the node is starting: try again");
  pb::Request req;
  if (!req.ParseFromString(bytes) || !req.has_cluster())
    return answer(pb::Response::BAD_REQUEST, "not a cluster request");
  switch (req.cluster().op()) {
    case pb::ClusterRequest::SHOW:
      return show();
    case pb::ClusterRequest::INIT: {
      std::string text;
      auto code = found(&text);
      spdlog::log(code == pb::Response::OK ? spdlog::level::info : spdlog::level::warn,
                  "node {}: proctor cluster init: {}", setup.node_name, text);
      return answer(code, text);
    }
    case pb::ClusterRequest::PROPOSE:
      switch (req.cluster().command().command_case()) {
        case pb::ClusterCommand::kJoin:
        case pb::ClusterCommand::kRaiseFloor:
        case pb::ClusterCommand::kDrain:
        case pb::ClusterCommand::kSetLimit:
        case pb::ClusterCommand::kSetSchedule:
        case pb::ClusterCommand::kScheduleProgress:
          return propose_or_forward(std::move(req));
        case pb::ClusterCommand::kActivate:
          return cancel_drain(std::move(req));
        case pb::ClusterCommand::kRemove:
          return remove(std::move(req));
        case pb::ClusterCommand::kForget:
          return forget(std::move(req));
        default:
          return answer(pb::Response::BAD_REQUEST,
                        "a cluster command that is not proposed over the client protocol "
                        "(found: `proctor cluster init`)");
      }
    default:
      return answer(pb::Response::BAD_REQUEST, "an unknown cluster request");
  }
}

}  // namespace proctor
