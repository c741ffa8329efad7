// Passivation, the executor's side: a tree that only waits gives up its actors (the protocol
// is in proc_passivate_tree.cpp); the executor keeps its statuses, its event waiters' places and
// its earliest deadline (under the timeout actor), and restarts it from the journal when an
// event, that deadline, a child's end on another node, an abort or a bypass comes
// (executor_config::passivate_after). Recovery starts trees that only wait this way.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/base/task_spec.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "persistence/tree_join.hpp"

namespace proctor::exec_detail {

uint64_t root_of(executor_actor* self, uint64_t id) {
  auto p = self->state.procs.find(id);
  return p == self->state.procs.end() ? 0 : p->second.root_id;
}

namespace {

/// How long before `deadline_ms` a passivated tree of `procs` procedures is read back:
/// passivation_wake_lead_ms, plus the reading of every passivated tree due in the two
/// seconds up to that deadline (this one included), which the journal does one after the
/// other. At most a minute.
int64_t wake_lead_ms(const executor_state& st, int64_t deadline_ms, uint64_t procs) {
  auto second = deadline_ms / 1000;
  auto ahead = procs;
  for (auto i = st.passivation.wake_volume.lower_bound(second - 2);
       i != st.passivation.wake_volume.end() && i->first <= second; ++i)
    ahead += i->second;
  auto us = static_cast<double>(ahead) * static_cast<double>(st.cfg.wake_read_per_proc.count());
  return passivation_wake_lead_ms + std::min<int64_t>(60'000, static_cast<int64_t>(us / 1000));
}

}  // namespace

void forget_wake_volume(executor_state& st, root_entry& re) {
  if (re.wake_procs == 0)
    return;
  auto i = st.passivation.wake_volume.find(re.wake_deadline_ms / 1000);
  if (i != st.passivation.wake_volume.end()) {
    i->second -= std::min(i->second, re.wake_procs);
    if (i->second == 0)
      st.passivation.wake_volume.erase(i);
  }
  re.wake_procs = 0;
}

/// The root stops being passivated (it runs again, or it cannot be read); what waited for
/// its actor runs now.
void end_sleep(executor_actor* self, uint64_t root_id) {
  auto& st = self->state;
  auto r = st.roots.find(root_id);
  if (r == st.roots.end() || !r->second.passivated)
    return;
  auto& re = r->second;
  re.passivated = re.waking = false;
  --st.passivation.roots;
  forget_wake_volume(st, re);
  cancel_timeout(self, st.env->timeout, root_id, timeout_kind::tree_wake);
  for (const auto& n : re.remote_nodes)
    if (auto d = st.passivation.by_node.find(n); d != st.passivation.by_node.end())
      d->second.erase(root_id);
  re.remote_nodes.clear();
  auto live = std::move(re.when_live);
  re.when_live.clear();
  for (auto& f : live)
    f();
}

/// Root `root_id`, of `procs` procedures, has no actor from now on; its deadline (0: none)
/// will wake it, ahead by wake_lead_ms, and so will a change of `remote_nodes` (where its
/// children on other nodes run).
void mark_passivated(executor_actor* self, root_entry& re, uint64_t root_id, int64_t deadline_ms,
                     std::vector<std::string> remote_nodes, uint64_t procs) {
  auto& st = self->state;
  re.passivated = true;
  ++st.passivation.roots;
  std::sort(remote_nodes.begin(), remote_nodes.end());
  remote_nodes.erase(std::unique(remote_nodes.begin(), remote_nodes.end()), remote_nodes.end());
  for (const auto& n : remote_nodes)
    st.passivation.by_node[n].insert(root_id);
  re.remote_nodes = std::move(remote_nodes);
  if (deadline_ms <= 0)
    return;
  forget_wake_volume(st, re);
  auto lead = wake_lead_ms(st, deadline_ms, procs);
  re.wake_deadline_ms = deadline_ms;
  re.wake_procs = std::max<uint64_t>(1, procs);
  st.passivation.wake_volume[deadline_ms / 1000] += re.wake_procs;
  deadline_ms -= lead;
  if (st.recovery.active)  // armed at the end of the take-over: it would wake the tree
    st.recovery.to_arm.push_back({root_id, deadline_ms, ++re.passivation_token});
  else
    arm_timeout(self, st.env->timeout, root_id, timeout_kind::tree_wake, deadline_ms,
                wake_root_atom::value, root_id, ++re.passivation_token);
}

void note_wake(executor_actor* self, uint64_t root_id) {
  auto r = self->state.roots.find(root_id);
  if (r != self->state.roots.end())
    ++r->second.wake_epoch;
}

uint64_t passivation_epoch(executor_actor* self, uint64_t root_id) {
  auto r = self->state.roots.find(root_id);
  return r == self->state.roots.end() ? 0 : r->second.wake_epoch;
}

/// A tree that only waits gives up its actors (proc_passivate_tree.cpp). Refused when the
/// executor routed a wake-up into it since `epoch` (an event, a child's end on another node)
/// or has a request on its way to it (an abort, a bypass), or when one of its event
/// waiters' registrations has not arrived yet.
bool passivate_root(executor_actor* self, uint64_t root_id, uint64_t epoch,
                    const passivation_answer& a) {
  auto& st = self->state;
  auto r = st.roots.find(root_id);
  if (r == st.roots.end() || r->second.passivated || r->second.requests_in_flight > 0
      || r->second.wake_epoch != epoch || r->second.finished)
    return false;
  for (auto id : a.event_waiters)
    if (st.events.waiting_key.find(id) == st.events.waiting_key.end())
      return false;
  // Read back ahead of this very deadline, or due to be read back at once with the trees
  // due around the same time: not worth passivating (it would come back, try again, and so
  // on until its deadline). It tries again later.
  if (a.deadline_ms > 0
      && (a.deadline_ms == r->second.woken_for_ms
          || a.deadline_ms - wake_lead_ms(st, a.deadline_ms, a.procs)
               < wall_ms() + passivation_wake_lead_ms))
    return false;
  for (auto id : a.event_waiters) {
    if (auto* h = event_waiter(self, id))
      *h = nullptr;  // its place among the waiters stays, without an actor
    st.events.via_parent.erase(id);
  }
  mark_passivated(self, r->second, root_id, a.deadline_ms, a.remote_nodes, a.procs);
  spdlog::debug("[proc {} root {}] tree passivated ({} waiting for events, deadline {})", root_id,
                root_id, a.event_waiters.size(), a.deadline_ms);
  return true;
}

void deliver_event(executor_actor* self, uint64_t id, const caf::actor& h, const std::string& key,
                   event_delivery d, bool via) {
  auto& st = self->state;
  auto root_id = root_of(self, id);
  via = h && (via || (!st.events.via_parent.empty() && st.events.via_parent.erase(id) > 0));
  if (via) {
    // A passivated child: its parent spawns it, and its actor gets the event when it waits.
    st.events.held[id] = held_event{key, std::move(d)};
    note_wake(self, root_id);
    self->send(h, wake_child_atom::value, id);
    return;
  }
  if (h) {
    note_wake(self, root_id);
    self->send(h, delivered_atom::value, key, std::move(d.payload), std::move(d.failure),
               d.event_lsn, d.consume);
    return;
  }
  // A passivated tree: the payload waits here for the procedure's actor, which asks for it
  // when it waits again (await_event). The event is handed to it meanwhile (in flight): it
  // neither expires nor goes to another procedure.
  self->state.events.held[id] = held_event{key, std::move(d)};
  wake_root(self, root_id);
}

void wake_root(executor_actor* self, uint64_t root_id, std::function<void()> then) {
  auto& st = self->state;
  auto r = st.roots.find(root_id);
  if (r == st.roots.end())
    return;
  auto& re = r->second;
  if (!re.passivated) {
    if (then)
      then();
    return;
  }
  if (then)
    re.when_live.push_back(std::move(then));
  if (re.waking)
    return;
  if (st.recovery.active) {  // woken at the end of the take-over, once the journal is there
    st.recovery.to_wake.push_back(root_id);
    return;
  }
  re.waking = true;
  spdlog::debug("[proc {} root {}] waking from passivation", root_id, root_id);
  reload_root(self, root_id);
}

void wake_passivated_on(executor_actor* self, const std::string& node) {
  auto& st = self->state;
  auto d = st.passivation.by_node.find(node);
  if (d == st.passivation.by_node.end())
    return;
  auto roots = std::vector<uint64_t>(d->second.begin(), d->second.end());
  spdlog::info("node {} changed: waking {} passivated tree(s) with children there", node,
               roots.size());
  for (auto id : roots)
    wake_root(self, id);
}

namespace {

/// True if procedure `p` only waits (for an event, a call's reply, a timer, or children).
bool proc_only_waits(const proc_image& p) {
  if (p.status == proc_state::waiting_timeout)
    return true;
  if (p.status != proc_state::waiting)
    return false;
  return !p.event_key.empty() || !p.last_spawned.empty();
}

}  // namespace

namespace {

/// True if `p`'s parent waits for its children (its last spawn), `p` among them.
bool parent_awaits(const tree_image& t, const proc_image& p) {
  const auto* parent = t.find(p.parent_id);
  return parent != nullptr && parent->status == proc_state::waiting && parent->event_key.empty()
         && std::find(parent->last_spawned.begin(), parent->last_spawned.end(), p.id)
              != parent->last_spawned.end();
}

}  // namespace

bool only_waits(const tree_image& t, const cluster_view& cluster) {
  const auto* r = t.root();
  if (t.failed || t.finished || r == nullptr || !proc_only_waits(*r))
    return false;
  for (const auto& [id, p] : t.procs) {
    // A child on another node whose end is here already, its parent waiting for it: the
    // parent runs on (the end may have been the last one it waited for, and no other will
    // wake the tree). One placed on a node an operator forgot: its end is to be journaled.
    if (p.remote()
        && (p.remote_end_lsn != 0 ? parent_awaits(t, p)
                                  : !is_final(p.status) && cluster.lost(p.node, p.submitted_lsn)))
      return false;
    if (is_final(p.status) || p.remote())
      continue;
    // Its join policy has it act now: cancel children, or fail the join (proc_cancel.cpp).
    if (p.cancel_pending
        || (p.status == proc_state::waiting && p.event_key.empty() && join_acts(t, p)))
      return false;
    // Waiting for children that all ended: it runs on (nothing else would wake it).
    if (p.status == proc_state::waiting && p.event_key.empty() && !p.last_spawned.empty()
        && std::all_of(p.last_spawned.begin(), p.last_spawned.end(), [&t](uint64_t c) {
             const auto* cp = t.find(c);
             return cp != nullptr && is_final(cp->status);
           }))
      return false;
    if (!proc_only_waits(p))
      return false;
  }
  return true;
}

std::string waiting_reason(const proc_image& p) {
  if (p.remote())
    return "node " + p.node;
  if (p.status == proc_state::waiting_timeout)
    return "timer";
  if (!p.call_service.empty())
    return call_wait_reason(p.call_service);
  if (!p.event_key.empty())
    return event_wait_reason(p.event_key);
  return "children";
}

/// Recovery of a tree that only waits: no actors, just its event waiters' places, its
/// earliest deadline and where its children on other nodes run. An event that arrived
/// meanwhile, or a deadline that passed, wakes it at once.
void recover_passivated(executor_actor* self, const tree_image& t) {
  int64_t deadline = 0;
  std::vector<std::string> nodes;
  auto earliest = [&deadline](int64_t d) {
    if (d > 0 && (deadline == 0 || d < deadline))
      deadline = d;
  };
  std::vector<const proc_image*> event_waiters;
  for (const auto& [id, p] : t.procs) {
    if (is_final(p.status))
      continue;
    if (p.remote()) {
      nodes.push_back(p.node);
    } else if (p.status == proc_state::waiting_timeout) {
      earliest(p.wake_at_ms);
    } else if (!p.event_key.empty()) {
      earliest(p.deadline_ms);
      if (p.status == proc_state::waiting)
        event_waiters.push_back(&p);
    }
  }
  mark_passivated(self, enter_root(self, t), t.root_id, deadline, std::move(nodes), t.procs.size());
  for (const auto* p : event_waiters)  // a call is made again (callees deduplicate)
    await_call(self, p->event_key, p->id, caf::actor{}, false, p->call_service, p->call_request);
}

}  // namespace proctor::exec_detail
