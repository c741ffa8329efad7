// Dormant children (issue 15, "woken in parts"). A parent started from its tree's image
// (a tree woken from passivation, recovered, or a subtree restarted) does not spawn the
// children that only wait for a timer or an event: it arms each one's wake-up (the timer, or
// the event's deadline) with the timeout actor under the child's own name, registers it
// with the executor as waiting for its event through its parent, and spawns the child when
// either comes (the executor holds the event for the child's actor, as it does for a
// passivated tree). The timeout actor sends due wake-ups in deadline order, so a wide tree
// comes back a procedure at a time, in that order, instead of all its actors at once (a
// million procedures due within one second were a million actors rebuilt before the first
// of them could run: proctor-bench (j)).
//
// A spawned child arms its own wake-up under the same name, which replaces the parent's,
// and registers for its event itself, which replaces the parent's registration.
// A dormant child is stopped, asked, and counted as the live ones are (proc_supervision.cpp,
// proc_passivation.cpp), and woken early for a bypass (proc_bypass.cpp).
#include "actors/procedure_actor_state.hpp"
#include "actors/timeout_actor.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

bool may_sleep_unspawned(proc_actor* self, const tree_image& image, uint64_t cid) {
  if (self->state.env->hibernate_after.count() < 0)
    return false;  // passivation is off: every procedure keeps its actor
  const auto* p = image.find(cid);
  if (p == nullptr || p->remote())
    return false;
  bool timer = p->status == proc_state::waiting_timeout && p->wake_at_ms > 0;
  bool event = p->status == proc_state::waiting && !p->event_key.empty()
               && !p->event_delivered;  // an event, or a call's reply
  if (!timer && !event)
    return false;
  for (auto gc : p->children)
    if (const auto* g = image.find(gc); g == nullptr || !is_final(g->status))
      return false;  // something of its subtree may run
  return true;
}

void put_to_sleep(proc_actor* self, child_slot& c,
                  const std::shared_ptr<const tree_image>& image, bool own) {
  auto& st = self->state;
  const auto& p = *image->find(c.id);
  if (own)
    st.slept_images[c.id] = image;
  else if (!st.dormant_image)
    st.dormant_image = image;
  st.env->dormant_procedures.fetch_add(1, std::memory_order_relaxed);
  c.dormant = true;
  c.dormant_entry = &p;
  c.dormant_event = p.status == proc_state::waiting;
  c.wake_at_ms = c.dormant_event ? p.deadline_ms : p.wake_at_ms;
  ++st.dormant_children;
  // Its event (or its call's reply) comes through the executor, which holds it for the
  // child's actor. A call is made again only if it is not under way (after a restart).
  if (c.dormant_event)
    register_wait(self, c.id, true, p.event_key, p.call_service, p.call_request);
  if (c.wake_at_ms > 0)
    arm_timeout(self, st.env->timeout, c.id, timeout_kind::wait, c.wake_at_ms,
                wake_child_atom::value, c.id);
}

namespace {

void forget(proc_actor* self, child_slot& c) {
  auto& st = self->state;
  c.dormant = false;
  c.dormant_entry = nullptr;
  st.env->dormant_procedures.fetch_sub(1, std::memory_order_relaxed);
  if (!st.slept_images.empty())
    st.slept_images.erase(c.id);
  if (--st.dormant_children == 0)
    st.dormant_image.reset();
}

/// Dormant child `c` will not be spawned by its wake-up: the parent's arm goes too.
void disarm(proc_actor* self, child_slot& c) {
  if (c.wake_at_ms > 0)
    cancel_timeout(self, self->state.env->timeout, c.id, timeout_kind::wait);
  forget(self, c);
}

} // namespace

void wake_dormant(proc_actor* self, child_slot& c, bool by_wake_up) {
  if (!c.dormant)
    return;
  // Woken by its own timer, in deadline order: it runs at once. Otherwise (an event, its
  // deadline, a bypass) it waits as it did, and its own arm replaces the parent's, which may
  // still be pending.
  bool timer_due = by_wake_up && !c.dormant_event && c.wake_at_ms <= now_ms();
  auto& st = self->state;
  auto own = st.slept_images.find(c.id);
  auto image = own != st.slept_images.end() ? own->second : st.dormant_image;
  const auto* entry = c.dormant_entry;
  forget(self, c);
  spawn_child(self, image, c.id, false, timer_due, entry);
}

void on_wake_child(proc_actor* self, uint64_t cid) {
  auto& st = self->state;
  auto* c = st.child(cid);
  if (c == nullptr || !c->dormant)
    return;  // stopped, or spawned meanwhile (its own wake-up replaced this one)
  if (st.frozen)  // its tree is being passivated: see proc_passivation.cpp
    return hold(self, [self, cid] {
      if (auto* c = self->state.child(cid))
        wake_dormant(self, *c, true);
    });
  wake_dormant(self, *c, true);
}

void stop_dormant(proc_actor* self, child_slot& c) {
  if (!c.dormant)
    return;
  disarm(self, c);
  // As a stopped waiting child reports: its current state never started.
  c.stopped_clean = {c.id};
}

void release_dormant(proc_actor* self) {
  for (auto& c : self->state.children)
    if (c.dormant)
      disarm(self, c);
}

} // namespace proctor
