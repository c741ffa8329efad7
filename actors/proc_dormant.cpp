// Dormant children (issue 15, "woken in parts"). A parent started from its tree's image
// (a tree woken from passivation, recovered, or a subtree restarted) does not spawn the
// children that only wait for a timer: it arms each one's wake-up with the timeout actor
// under the child's own name, and spawns the child when it is due. The timeout actor sends
// due wake-ups in deadline order, so a wide tree comes back a procedure at a time, in that
// order, instead of all its actors at once (a million procedures due within one second
// were a million actors rebuilt before the first of them could run: proctor-bench (j)).
//
// A spawned child arms its own wake-up under the same name, which replaces the parent's.
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
  if (p == nullptr || p->remote() || p->status != proc_state::waiting_timeout
      || p->wake_at_ms <= 0)
    return false;
  for (auto gc : p->children)
    if (const auto* g = image.find(gc); g == nullptr || !is_final(g->status))
      return false;  // something of its subtree may run
  return true;
}

void put_to_sleep(proc_actor* self, child_slot& c, const std::shared_ptr<const tree_image>& image,
                  int64_t wake_at_ms) {
  auto& st = self->state;
  if (!st.dormant_image)
    st.dormant_image = image;
  c.dormant = true;
  c.wake_at_ms = wake_at_ms;
  ++st.dormant_children;
  arm_timeout(self, st.env->timeout, c.id, timeout_kind::wait, wake_at_ms,
              wake_child_atom::value, c.id);
}

namespace {

void forget(proc_actor* self, child_slot& c) {
  auto& st = self->state;
  c.dormant = false;
  if (--st.dormant_children == 0)
    st.dormant_image.reset();
}

} // namespace

void wake_dormant(proc_actor* self, child_slot& c) {
  if (!c.dormant)
    return;
  // Its own arm replaces the parent's, which may still be pending (a bypass woke it).
  auto image = self->state.dormant_image;
  forget(self, c);
  spawn_child(self, image, c.id);
}

void stop_dormant(proc_actor* self, child_slot& c) {
  if (!c.dormant)
    return;
  cancel_timeout(self, self->state.env->timeout, c.id, timeout_kind::wait);
  forget(self, c);
  // As a stopped waiting child reports: its current state never started.
  c.stopped_clean = {c.id};
}

void release_dormant(proc_actor* self) {
  for (auto& c : self->state.children)
    if (c.dormant) {
      cancel_timeout(self, self->state.env->timeout, c.id, timeout_kind::wait);
      forget(self, c);
    }
}

} // namespace proctor
