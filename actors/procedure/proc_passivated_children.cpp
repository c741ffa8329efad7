// Passivated children ("woken in parts"). A parent started from its tree's image
// (a tree woken from passivation, recovered, or a subtree restarted) does not spawn the
// children that only wait for a timer or an event: it keeps each one's wake-up (the timer, or
// the event's deadline) in its own queue, earliest first, with one deadline at the timeout
// actor for the earliest of them (timeout_kind::children_wake under the parent's id), registers
// each with the executor as waiting for its event through its parent, and spawns the child when
// either comes (the executor holds the event for the child's actor, as it does for a
// passivated tree). Due wake-ups are taken in deadline order, so a wide tree comes back a
// procedure at a time, in that order, instead of all its actors at once (a million procedures
// due within one second were a million actors rebuilt before the first of them could run:
// proctor-bench (j)).
//
// A spawned child arms its own wake-up (its parent's entry for it is then skipped when it
// comes up), and registers for its event itself, which replaces the parent's registration.
// A passivated child is stopped, asked, and counted as the live ones are (proc_supervision.cpp,
// proc_passivate_tree.cpp), and woken early for a bypass (proc_bypass.cpp).
//
// A passivated child may be a whole subtree: a parent waiting for children that all only wait
// (read back so, or gone to sleep after them: proc_passivate_waiter.cpp). Its parent then arms the
// subtree's earliest wake-up under the subtree's top, registers each waiter in it through
// itself, and maps them to the top (passivated_routes); any of their wake-ups spawns the top,
// which puts its children to sleep again from the same image, and the wake-up reaches it in
// turn (a past deadline fires at once; the executor sends a held event again when the
// waiter is registered anew). So only the parents on the way to what is due come back.
//
// A passivated child (or one in a passivated subtree) may be the placeholder of a child on another
// node whose node is up (remote_child.cpp): its parent registers itself with the executor as
// the child's route (remote_route_via_atom), and is told to spawn the placeholder when the
// child's end is journaled here or its node goes down; the placeholder then registers itself
// and is told the end. It has no deadline of its own while its node is up.
#include <algorithm>

#include "actors/base/cluster_view.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/tree_image.hpp"
#include "persistence/tree_join.hpp"

namespace proctor {

namespace {

/// Whether `p` and what of its subtree has not ended only wait: a leaf for its timer, its
/// event or a call's reply, a child on another node for its end (while that node is up: a
/// node that is down has a node-loss deadline its placeholder keeps), a parent for children
/// of its last spawn that so wait in turn.
bool waits_in_image(const cluster_view& cluster, const tree_image& image, const proc_image& p) {
  if (p.cancel_pending)
    return false;  // its parent undoes it (proc_cancel.cpp)
  if (p.remote())
    return !is_final(p.status) && cluster.is_up(p.node);
  bool timer = p.status == proc_state::waiting_timeout && p.wake_at_ms > 0;
  bool event = p.status == proc_state::waiting && !p.event_key.empty()
               && !p.event_delivered;  // an event, or a call's reply
  bool parent = p.status == proc_state::waiting && p.event_key.empty() && p.call_service.empty()
                && !p.event_delivered && !p.failed;
  if (!timer && !event && !parent)
    return false;
  for (auto gc : p.children) {
    const auto* g = image.find(gc);
    if (g == nullptr || g->cancel_pending
        || (g->remote() && is_final(g->status) && g->status != proc_state::success))
      return false;  // (failed on its node: the parent fails as it starts)
    if (!is_final(g->status) && (!parent || !waits_in_image(cluster, image, *g)))
      return false;  // something of its subtree may run
  }
  if (!parent)
    return true;
  if (join_acts(image, p))
    return false;  // its join policy has it act now (proc_cancel.cpp)
  // A parent whose awaited children all ended is about to run.
  return std::any_of(p.last_spawned.begin(), p.last_spawned.end(), [&](uint64_t gc) {
    const auto* g = image.find(gc);
    return g != nullptr && !is_final(g->status);
  });
}

/// Counts passivated child `c`'s subtree from `q` down, registers its waiters through this
/// parent and finds its earliest wake-up.
void take_in(proc_actor* self, child_slot& c, const tree_image& image, const proc_image& q) {
  auto& st = self->state;
  ++c.passivated_procs;
  int64_t at = 0;
  if (q.remote()) {
    // Its end (or the loss of its node) comes through the executor, which tells this parent
    // to spawn the placeholder, and the placeholder the end.
    if (q.id != c.id) {
      c.passivated_waiters.push_back(q.id);
      st.passivation.routes[q.id] = c.id;
    }
    self->send(st.env->executor, remote_route_via_atom::value, q.id,
               caf::actor_cast<caf::actor>(self));
    return;
  }
  if (q.status == proc_state::waiting_timeout) {
    at = q.wake_at_ms;
  } else if (!q.event_key.empty()) {
    at = q.deadline_ms;
    if (q.id != c.id) {
      c.passivated_waiters.push_back(q.id);
      st.passivation.routes[q.id] = c.id;
    }
    // Its event (or its call's reply) comes through the executor, which holds it for the
    // procedure's actor. A call is made again only if it is not under way (after a restart).
    register_wait(self, q.id, true, q.event_key, q.call_service, q.call_request);
  }
  if (at > 0 && (c.wake_at_ms == 0 || at < c.wake_at_ms))
    c.wake_at_ms = at;
  for (auto gc : q.children)
    if (const auto* g = image.find(gc); g != nullptr && !is_final(g->status))
      take_in(self, c, image, *g);
}

/// Child `c` is passivated no more (spawned, stopped, or its parent going away): its entry in
/// the parent's wake-ups, if any, is skipped when it comes up (on_wake_children).
void forget(proc_actor* self, child_slot& c) {
  auto& st = self->state;
  c.passivated = false;
  c.passivated_entry = nullptr;
  st.env->passivated_procedures.fetch_sub(static_cast<int64_t>(c.passivated_procs),
                                          std::memory_order_relaxed);
  c.passivated_procs = 0;
  for (auto w : c.passivated_waiters)
    st.passivation.routes.erase(w);
  std::vector<uint64_t>{}.swap(c.passivated_waiters);
  if (!st.passivation.images.empty())
    st.passivation.images.erase(c.id);
  if (--st.passivation.passivated_children == 0)
    st.passivation.image.reset();
}

/// The timeout actor's one deadline for the parent's children: armed at the earliest queued
/// wake-up when none is armed or that one is earlier (an armed deadline is never later than
/// an entry queued since: each new entry comes through here).
void arm_children_wake(proc_actor* self) {
  auto& st = self->state;
  auto& p = st.passivation;
  if (p.wakes.empty() || (p.wakes_armed_at != 0 && p.wakes_armed_at <= p.wakes.top().first))
    return;
  p.wakes_armed_at = p.wakes.top().first;
  arm_timeout(self, st.env->timeout, st.id, timeout_kind::children_wake, p.wakes_armed_at,
              wake_children_atom::value);
}

/// Child `cid` is to be woken at `at` (wall ms): the timeout actor's deadline for the
/// parent's children moves earlier if this is the earliest.
void schedule_wake(proc_actor* self, int64_t at, uint64_t cid) {
  self->state.passivation.wakes.emplace(at, cid);
  arm_children_wake(self);
}

/// The passivated child that wake-up `id` is for: the child `id` itself, or the top of the
/// passivated subtree that holds waiter `id` (`own`: false then).
child_slot* passivated_for(proc_actor* self, uint64_t id, bool* own) {
  auto& st = self->state;
  *own = true;
  auto* c = st.child(id);
  if (c == nullptr) {
    auto r = st.passivation.routes.find(id);
    if (r == st.passivation.routes.end())
      return nullptr;
    *own = false;
    c = st.child(r->second);
  }
  return c != nullptr && c->passivated ? c : nullptr;
}

}  // namespace

void unended_subtree(const tree_image& image, const proc_image& q, std::vector<uint64_t>* out) {
  if (q.remote())
    return;  // not to be counted clean: a rollback orders it undone on its node
  out->push_back(q.id);
  for (auto gc : q.children)
    if (const auto* g = image.find(gc); g != nullptr && !is_final(g->status))
      unended_subtree(image, *g, out);
}

const std::shared_ptr<const tree_image>& passivated_image_of(const proc_actor_state& st,
                                                             const child_slot& c) {
  auto own = st.passivation.images.find(c.id);
  return own != st.passivation.images.end() ? own->second : st.passivation.image;
}

bool may_passivate_unspawned(proc_actor* self, const tree_image& image, uint64_t cid) {
  if (self->state.env->passivate_after.count() < 0)
    return false;  // passivation is off: every procedure keeps its actor
  const auto* p = image.find(cid);
  return p != nullptr && waits_in_image(*self->state.env->cluster, image, *p);
}

void put_to_sleep(proc_actor* self, child_slot& c, const std::shared_ptr<const tree_image>& image,
                  bool own) {
  auto& st = self->state;
  const auto& p = *image->find(c.id);
  if (own)
    st.passivation.images[c.id] = image;
  else if (!st.passivation.image)
    st.passivation.image = image;
  c.passivated = true;
  c.passivated_entry = &p;
  c.passivated_event = p.status == proc_state::waiting && !p.event_key.empty();
  c.wake_at_ms = 0;
  c.passivated_procs = 0;
  c.passivated_waiters.clear();
  take_in(self, c, *image, p);
  st.env->passivated_procedures.fetch_add(static_cast<int64_t>(c.passivated_procs),
                                          std::memory_order_relaxed);
  ++st.passivation.passivated_children;
  // A leaf, once spawned, arms its own wake-up. A passivated subtree's earliest wake-up
  // spawns its top, which puts its children to sleep again with their own.
  if (c.wake_at_ms > 0)
    schedule_wake(self, c.wake_at_ms, c.id);
}

void wake_passivated(proc_actor* self, child_slot& c, bool by_wake_up) {
  if (!c.passivated)
    return;
  // Woken by its own timer, in deadline order: it runs at once. Otherwise (an event, its
  // deadline, a bypass) it waits as it did, with its own arm (the parent's entry for it, if
  // still queued, is skipped). A passivated subtree's top waits for its children: it puts them
  // to sleep again, and the wake-up that came is sent again to it (a past deadline fires at
  // once; the executor sends a held event again).
  bool subtree = c.passivated_procs > 1;
  bool timer_due = by_wake_up && !c.passivated_event && !subtree && !c.passivated_entry->remote()
                   && c.wake_at_ms <= wall_ms();
  auto& st = self->state;
  auto image = passivated_image_of(st, c);  // a copy: forget() drops the parent's
  const auto* entry = c.passivated_entry;
  forget(self, c);
  spawn_child(self, image, c.id, false, timer_due, entry);
}

void on_wake_child(proc_actor* self, uint64_t cid) {
  bool own = true;
  auto* c = passivated_for(self, cid, &own);
  if (c == nullptr)
    return;  // stopped, or spawned meanwhile (its own wake-up replaced this one)
  auto& st = self->state;
  if (st.child_addrs && st.child_addrs->size() >= max_live_children) {
    st.passivation.wakes_due.push_back(cid);  // still passivated then, or the wake-up is dropped
    st.env->queued_wakes.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Its tree is being passivated (proc_passivate_tree.cpp), or this parent offered to give up
  // its actor (proc_passivate_waiter.cpp): which it takes back, having a wake-up held.
  if (st.passivation.holding || st.passivation.offered)
    return hold(self, [self, cid] {
      bool own = true;
      if (auto* c = passivated_for(self, cid, &own))
        wake_passivated(self, *c, own);
    });
  wake_passivated(self, *c, own);
}

void on_wake_children(proc_actor* self) {
  auto& st = self->state;
  auto& p = st.passivation;
  p.wakes_armed_at = 0;
  const auto now = wall_ms();
  while (!p.wakes.empty() && p.wakes.top().first <= now && self->has_behavior()) {
    auto [at, cid] = p.wakes.top();
    p.wakes.pop();
    const auto* c = st.child(cid);
    if (c != nullptr && c->passivated && c->wake_at_ms == at)
      on_wake_child(self, cid);  // (queued beyond max_live_children, held while passivating)
  }
  // (A child put to sleep meanwhile may have armed one already: then only an earlier one.)
  if (self->has_behavior())
    arm_children_wake(self);
}

void wake_queued(proc_actor* self) {
  auto& st = self->state;
  while (st.passivation.wakes_head < st.passivation.wakes_due.size()
         && (!st.child_addrs || st.child_addrs->size() < max_live_children)
         && self->has_behavior())  // not once it quit (CAF 0.17.6 clears it then)
    on_wake_child(self, st.passivation.wakes_due[st.passivation.wakes_head++]);
  if (st.passivation.wakes_head == st.passivation.wakes_due.size()) {
    st.passivation.wakes_due.clear();
    st.passivation.wakes_head = 0;
  }
}

void stop_passivated(proc_actor* self, child_slot& c) {
  if (!c.passivated)
    return;
  // As a stopped waiting subtree reports: the current state of none of its procedures
  // started (each waits, for its wake-up or for its children).
  std::vector<uint64_t> clean;
  unended_subtree(*passivated_image_of(self->state, c), *c.passivated_entry, &clean);
  forget(self, c);
  c.stopped_clean = std::move(clean);
}

void release_passivated(proc_actor* self) {
  auto& st = self->state;
  for (auto& c : st.children)
    if (c.passivated)
      forget(self, c);
  if (st.passivation.wakes_armed_at != 0)
    cancel_timeout(self, st.env->timeout, st.id, timeout_kind::children_wake);
  st.passivation.wakes_armed_at = 0;
  decltype(st.passivation.wakes){}.swap(st.passivation.wakes);
}

}  // namespace proctor
