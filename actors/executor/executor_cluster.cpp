// The executor as a member of a cluster (docs/cluster.md): it answers its peers'
// heartbeats, follows how its links see each peer (and tells the procedures that wait for a
// peer when it goes down or comes back), answers `nodes`, and makes `list` cluster-wide.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/log_rate.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/cluster/peer_link.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"
#include "persistence/active_lock.hpp"

namespace proctor::exec_detail {

void handle_ping(executor_actor* self, const pb::PingRequest& req, promise_t rp) {
  auto& st = self->state;
  auto not_peer = not_a_peer(self, req.from());
  auto misdirected = not_peer;
  if (misdirected.empty() && !req.to().empty() && req.to() != st.env->node_name)
    misdirected = "node '" + req.from() + "' expects node '" + req.to()
                  + "' at this address, but this is node '" + st.env->node_name
                  + "': its --peers names the wrong address for '" + req.to() + "'";
  if (!misdirected.empty()) {
    // The node contacted says so too (the asking one refuses the answer), at a falling rate:
    // heartbeats repeat it every half second until --peers is fixed.
    auto n = ++st.misdirected_pings;
    if (log_nth(n))
      spdlog::warn("heartbeat from node '{}': {} ({} so far; logged at a falling rate)", req.from(),
                   misdirected, n);
  }
  if (!not_peer.empty())
    return reply(rp, error_reply(pb::Response::BAD_REQUEST, not_peer));
  if (req.leaving() && misdirected.empty() && st.env->transport)
    caf::anon_send(st.env->transport, peer_left_atom::value, req.from());
  pb::Response r;
  auto* info = r.mutable_pong();
  info->set_name(st.env->node_name);
  info->set_number(st.env->node_number);
  info->set_live(st.live);
  info->set_started_at_ms(st.env->started_at_ms);
  info->set_incarnation(st.env->incarnation);
  for (const auto& m : *st.env->cluster->node_names())
    info->add_members(m);
  for (const auto& p : st.env->cluster->forgotten_peers()) {
    auto* f = info->add_forgotten();
    f->set_name(p.name);
    f->set_incarnation(p.incarnation);
    f->set_at_ms(p.at_ms);
  }
  fill_progress(self, req.from(), *info);
  fill_forgotten(self, req.from(), *info);
  if (req.want_types())
    for (const auto& t : st.env->types->names())
      info->add_types(t);
  reply(rp, encode(r));
}

void on_peer_status(executor_actor* self, const peer_status& s) {
  auto& st = self->state;
  auto before = st.env->cluster->get(s.name);
  st.env->cluster->set(s);
  progress_heard(self, s);
  adopt_forgotten(self, s);
  if (auto f = st.remote.group_forgotten.find(s.name);
      f != st.remote.group_forgotten.end() && !s.up)
    adopt_forgotten(self, "the cluster group", s.name, f->second.first, f->second.second);
  bool was_up = before && before->up;
  if (s.up == was_up && before && before->reason == s.reason)
    return;  // a heartbeat's figures only
  if (s.up) {
    // Whatever waits for it is delivered now, not at the end of a back-off.
    caf::anon_send(st.env->outbox, outbox_kick_atom::value, s.name);
  } else if (s.reason.rfind("left:", 0) == 0) {
    caf::anon_send(st.env->outbox, outbox_left_atom::value, s.name);
  }
  tell_waiting_for(self, s);
}

void on_cluster_peers(executor_actor* self, const std::vector<cluster_peer>& members) {
  auto& st = self->state;
  if (st.env->node_name.empty() || !st.env->transport)
    return;
  // Work is placed on the active members only; the others stay known (their trees run on).
  // A name the group does not list takes none either: a --peers entry, or this node itself
  // at a change replayed from before its join (counting itself in, it would own slots no
  // member gives up to it).
  std::set<std::string> placeable, gone;
  for (const auto& m : members) {
    if (m.state == pb::ACTIVE)
      placeable.insert(m.name);
    if (m.state == pb::LEFT && m.name != st.env->node_name)
      gone.insert(m.name);
  }
  if (!members.empty())  // (none: a group not yet founded has said nothing)
    st.env->cluster->set_placeable(std::move(placeable));
  st.env->cluster->set_gone(std::move(gone));
  for (const auto& m : members) {
    if (m.state == pb::FORGOTTEN && m.name != st.env->node_name) {
      st.remote.group_forgotten[m.name] = {m.incarnation, m.since_ms};
      adopt_forgotten(self, "the cluster group", m.name, m.incarnation, m.since_ms);
    }
  }
  for (const auto& m : members) {
    if ((m.state != pb::ACTIVE && m.state != pb::DRAINING) || m.name == st.env->node_name)
      continue;
    if (st.env->is_peer(m.name)) {
      // Known: the link moves to the addresses the group says, if they changed (a node that
      // joined again from another address; the transport compares).
      if (!m.address.empty())
        caf::anon_send(st.env->transport, peer_add_atom::value, m.name, m.address);
      continue;
    }
    if (auto why = st.env->cluster->add_peer(m.name, m.number); !why.empty()) {
      // The group gives every name its own number: this says a node whose ids carry another
      // one than the group gave it (it stops itself: cluster_member.cpp).
      spdlog::error("node {} joined the cluster, but is not taken as a peer: {}", m.name, why);
      continue;
    }
    spdlog::info("node {} (number {}, at {}) joined the cluster: a peer from now on", m.name,
                 m.number, m.address);
    caf::anon_send(st.env->transport, peer_add_atom::value, m.name, m.address);
  }
  // With the peers known: slots that moved here take their nonces over.
  handoff_members(self, members);
}

void tell_waiting_for(executor_actor* self, const peer_status& s) {
  auto& st = self->state;
  // The procedures that wait for that node show it (and may have a deadline for it); those
  // of passivated trees come back to do so.
  wake_passivated_on(self, s.name);
  size_t told = 0;
  for (const auto& [id, h] : st.remote.routes) {
    auto p = st.procs.find(id);
    if (p == st.procs.end() || p->second.node() != s.name || !h)
      continue;
    // A passivation of its tree under way would lose what it does now (a deadline armed,
    // a placeholder spawned): refused.
    note_wake(self, p->second.root_id);
    if (st.remote.via.count(id) == 0)
      self->send(h, peer_status_atom::value, s);
    else if (!s.up)
      self->send(h, wake_child_atom::value, id);  // its placeholder keeps the node-loss
                                                  // deadline, or finds its node forgotten
    else
      continue;
    ++told;
  }
  if (told > 0)  // the link logged the change itself: one line per event at info
    spdlog::debug("node {} is {}: told {} procedure(s) waiting for it", s.name,
                  s.up ? "up" : "down", told);
}

namespace {

/// The node number of peer `name` (0 when it is none).
uint16_t node_number_of_peer(executor_actor* self, const std::string& name) {
  for (const auto& [num, peer] : self->state.env->cluster->peer_numbers())
    if (peer == name)
      return num;
  return 0;
}

void fill_node(const peer_status& s, pb::NodeStatus* n) {
  n->set_name(s.name);
  n->set_address(s.address);
  n->set_number(s.number);
  n->set_up(s.up);
  n->set_since_ms(s.since_ms);
  n->set_reason(s.reason);
  n->set_rtt_us(static_cast<uint64_t>(std::max<int64_t>(0, s.rtt_us)));
  n->set_live(s.live);
  n->set_started_at_ms(s.started_at_ms);
  if (!s.group.empty())
    (void)n->mutable_group()->ParseFromString(s.group);
  n->set_incarnation(s.incarnation);
  n->set_forgotten_at_ms(s.forgotten_at_ms);
  n->set_forgotten_incarnation(s.forgotten_incarnation);
}

}  // namespace

void reply_metrics(executor_actor* self, promise_t rp, const step_scheduler_stats& s,
                   const journal_stats& j) {
  auto& st = self->state;
  auto g = std::make_shared<executor_gauges>();
  g->waiting = st.waiting;
  g->passivated = st.passivation.roots;
  g->procedures = st.procs.size();
  g->quarantined = st.quarantined.size();
  g->rolling_back = st.rolling_back.size();
  g->undos = st.undos;
  g->undo_failures = st.undo_failures;
  g->retries = st.retries;
  g->resubmits = st.resubmits;
  g->epoch = st.env->epoch;
  g->active_since_ms = st.env->started_at_ms;
  g->takeover_ms = st.env->takeover_ms.load();
  g->passivation_attempts = st.env->passivation_attempts.load();
  g->passivated_procedures = st.env->passivated_procedures.load();
  g->calls_in_flight = st.events.calls.size();
  g->queued_wakes = st.env->queued_wakes.load();
  g->compactions = st.env->compactions.load();
  g->refused_requests = st.env->refused_requests->load();
  g->actors_started = procedure_actors_started();
  g->compacted_records = st.env->compacted_records.load();
  g->cancelled_children = st.env->cancelled_children.load();
  g->contained_failures = st.env->contained_failures.load();
  g->misdirected_pings = st.misdirected_pings;
  g->peer_refusals = st.env->cluster->total(&peer_status::refusals);
  g->peer_stray_answers = st.env->cluster->total(&peer_status::stray_answers);
  g->incomplete_views = st.incomplete_views;
  google::protobuf::RepeatedPtrField<pb::QueueInfo> queues;
  fill_queues(self, &queues);
  for (const auto& q : queues)
    g->queues.push_back(queue_sample{q.name(), q.depth(), q.leased(), q.pollers(),
                                     q.oldest_age_ms(), q.dispatched(), q.completed(), q.failed(),
                                     q.timed_out()});
  for (const auto& [name, e] : st.schedules.by_name)
    if (!e.rec.deleted())
      g->schedules.push_back(schedule_sample{name, e.rec.fired(), e.rec.triggered(),
                                             e.rec.skipped(), e.rec.missed(), next_fire_ms(e),
                                             e.rec.paused()});
  auto render = [self, s, j, g](const std::map<std::string, size_t>& outbox) {
    for (const auto& p : self->state.env->cluster->all()) {
      if (p.forgotten_now())
        continue;  // forgotten: no longer a member whose link is watched
      auto pending = outbox.find(p.name);
      g->peers.push_back(peer_sample{p.name, p.up, p.rtt_us,
                                     pending == outbox.end() ? 0 : pending->second, p.downs});
    }
    pb::Response r;
    r.set_text(self->state.metrics.render(s, j, *g));
    return encode(r);
  };
  if (!st.env->transport)
    return reply(rp, render({}));
  self->request(st.env->outbox, std::chrono::seconds{5}, outbox_stats_atom::value)
    .then(
      [rp, render](outbox_stats& o) mutable {
        reply(rp, render({o.pending.begin(), o.pending.end()}));
      },
      [rp](caf::error&) mutable {
        reply(rp, error_reply(pb::Response::INTERNAL, "outbox stats unavailable"));
      });
}

void handle_nodes(executor_actor* self, promise_t rp) {
  auto& st = self->state;
  auto r = std::make_shared<pb::Response>();
  auto* me = r->add_nodes();
  me->set_name(st.env->node_name);
  me->set_number(st.env->node_number);
  me->set_self(true);
  me->set_up(true);
  me->set_since_ms(st.env->started_at_ms);
  me->set_live(st.live);
  me->set_started_at_ms(st.env->started_at_ms);
  me->set_incarnation(st.env->incarnation);
  auto* proc = me->mutable_process();
  proc->set_pid(::getpid());
  proc->set_host(host_name());
  proc->set_epoch(st.env->epoch);
  proc->set_active_since_ms(st.env->started_at_ms);
  proc->set_takeover_ms(st.env->takeover_ms.load());
  if (!st.env->transport)
    return reply(rp, encode(*r));
  self->request(st.env->outbox, std::chrono::seconds{5}, outbox_stats_atom::value)
    .then(
      [self, rp, r](outbox_stats& o) mutable {
        std::map<std::string, size_t> pending(o.pending.begin(), o.pending.end());
        for (const auto& s : self->state.env->cluster->all()) {
          auto* n = r->add_nodes();
          fill_node(s, n);
          if (n->number() == 0)
            n->set_number(node_number_of_peer(self, s.name));
          n->set_outbox(pending[s.name]);
        }
        reply(rp, encode(*r));
      },
      [rp](caf::error&) mutable {
        reply(rp, error_reply(pb::Response::INTERNAL, "outbox stats unavailable"));
      });
}

namespace {

/// What a cluster-wide list gathers: this node's part and each peer's.
struct list_gather {
  pb::Response local;
  std::map<std::string, pb::Response> parts;  ///< by peer
  std::vector<std::string> unreachable;
  size_t left = 0;
  promise_t rp;
};

void finish_list(const std::shared_ptr<list_gather>& g) {
  // By id. A child placed on another node appears on its parent's node as a placeholder
  // (with `node` set) and on its own node as itself: what its own node says wins; the
  // placeholder stands in when that node did not answer, or no longer holds it (a fragment
  // is released once its tree ended).
  std::map<uint64_t, pb::ProcStatus> merged;
  std::vector<pb::ProcStatus> placeholders;
  for (auto& s : *g->local.mutable_list())
    (s.node().empty() ? merged[s.id()] : placeholders.emplace_back()) = std::move(s);
  for (auto& [peer, part] : g->parts)
    for (auto& s : *part.mutable_list()) {
      if (!s.node().empty()) {
        placeholders.push_back(std::move(s));
        continue;
      }
      s.set_node(peer);
      merged[s.id()] = std::move(s);
    }
  for (auto& s : placeholders)
    merged.emplace(s.id(), std::move(s));
  pb::Response r;
  for (auto& [id, s] : merged)
    *r.add_list() = std::move(s);
  for (auto& u : g->unreachable)
    r.add_unreachable(u);
  reply(g->rp, encode(r));
}

}  // namespace

bool list_across_nodes(executor_actor* self, const pb::ListRequest& req, pb::Response local,
                       promise_t rp) {
  auto& st = self->state;
  const auto peers = st.env->cluster->peer_numbers();
  if (req.local() || !st.env->transport || peers.empty())
    return false;
  auto g = std::make_shared<list_gather>();
  g->local = std::move(local);
  g->rp = rp;
  pb::Request ask;
  *ask.mutable_list() = req;
  ask.mutable_list()->set_local(true);
  auto bytes = ask.SerializeAsString();
  // A node an operator forgot holds nothing of this cluster's any more: not asked (it would
  // answer nothing, or never, and every list would say it was unreachable).
  std::vector<std::string> ask_peers;
  for (const auto& [num, peer] : peers)
    if (auto s = st.env->cluster->get(peer); !s || !s->forgotten_now())
      ask_peers.push_back(peer);
  if (ask_peers.empty())
    return false;
  g->left = ask_peers.size();
  for (const auto& peer : ask_peers) {
    auto done = [g] {
      if (--g->left == 0)
        finish_list(g);
    };
    self
      ->request(st.env->transport, std::chrono::seconds{12}, peer_request_atom::value, peer, bytes,
                uint32_t{10'000})
      .then(
        [g, peer, done](std::string& answer) {
          pb::Response r;
          if (!r.ParseFromString(answer) || r.code() != pb::Response::OK)
            g->unreachable.push_back("node " + peer + ": "
                                     + (r.error().empty() ? "unreadable answer" : r.error()));
          else
            g->parts[peer] = std::move(r);
          done();
        },
        [self, g, peer, done](caf::error& e) {
          g->unreachable.push_back("node " + peer + ": " + error_text(self->system(), e));
          done();
        });
  }
  return true;
}

}  // namespace proctor::exec_detail
