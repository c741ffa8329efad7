// Hibernation: a root that only waits for an event gives up its actor; the executor keeps its
// status and its place among the event's waiters, and restarts it from the journal when the
// event, its deadline or an abort comes (executor_config::hibernate_after). Recovery starts
// trees that only wait for an event this way.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/executor_state.hpp"
#include "actors/procedure_actor_state.hpp"

namespace proctor::exec_detail {

/// The root stops being dormant (it runs again, or it cannot be read); what waited for
/// its actor runs now.
void end_sleep(executor_actor* self, uint64_t root_id) {
  auto& st = self->state;
  auto r = st.roots.find(root_id);
  if (r == st.roots.end() || !r->second.dormant)
    return;
  r->second.dormant = r->second.waking = false;
  --st.dormant;
  auto live = std::move(r->second.when_live);
  r->second.when_live.clear();
  for (auto& f : live)
    f();
}

/// Root `root_id` has no actor from now on; its deadline (0: none) will wake it.
void sleep_root(executor_actor* self, root_entry& re, uint64_t root_id, int64_t deadline_ms) {
  re.dormant = true;
  ++self->state.dormant;
  if (deadline_ms > 0)
    self->delayed_send(self,
                       std::chrono::milliseconds{std::max<int64_t>(0, deadline_ms - now_ms())},
                       wake_root_atom::value, root_id, ++re.sleep_token);
}

/// A root that waits for an event gives up its actor (see executor_config::hibernate_after).
/// Refused when anything is on its way to the actor: a wake (it is no longer among the
/// event's waiters) or a request such as an abort.
bool hibernate_root(executor_actor* self, uint64_t root_id, int64_t deadline_ms) {
  auto& st = self->state;
  auto r = st.roots.find(root_id);
  auto k = st.waiting_key.find(root_id);
  if (r == st.roots.end() || r->second.dormant || r->second.requests_in_flight > 0
      || k == st.waiting_key.end())
    return false;
  for (auto& [id, h] : st.event_waiters[k->second])
    if (id == root_id)
      h = nullptr;  // its place among the waiters stays, without an actor
  sleep_root(self, r->second, root_id, deadline_ms);
  spdlog::debug("[proc {} root {}] hibernated, waiting for event '{}'", root_id, root_id,
                k->second);
  return true;
}

void deliver_event(executor_actor* self, uint64_t id, const caf::actor& h,
                   const std::string& payload) {
  if (h) {
    self->send(h, wake_atom::value, payload, false, uint64_t{0});
    return;
  }
  // A hibernated root: the payload goes to its actor once it is back (the event itself may
  // expire before the actor asks for it).
  wake_root(self, id, [self, id, payload] {
    auto r = self->state.roots.find(id);
    if (r != self->state.roots.end() && r->second.handle)
      deliver_event(self, id, r->second.handle, payload);
  });
}

void wake_root(executor_actor* self, uint64_t root_id, std::function<void()> then) {
  auto& st = self->state;
  auto r = st.roots.find(root_id);
  if (r == st.roots.end())
    return;
  auto& re = r->second;
  if (!re.dormant) {
    if (then)
      then();
    return;
  }
  if (then)
    re.when_live.push_back(std::move(then));
  if (re.waking)
    return;
  re.waking = true;
  spdlog::debug("[proc {} root {}] waking from hibernation", root_id, root_id);
  reload_root(self, root_id);
}

/// True if the tree only waits for an event: its root waits (no call pending) and every
/// other procedure has ended. Such a tree starts hibernated.
bool only_waits_for_event(const tree_image& t) {
  const auto* r = t.root();
  if (t.failed || t.finished || r == nullptr || r->status != proc_state::waiting
      || r->event_key.empty() || !r->call_service.empty())
    return false;
  for (const auto& [id, p] : t.procs)
    if (id != t.root_id && !is_final(p.status))
      return false;
  return true;
}

/// Recovery of a tree that only waits for an event: no actor, just its place among the
/// event's waiters (and its deadline). An event that arrived meanwhile wakes it at once.
void recover_dormant(executor_actor* self, const tree_image& t) {
  sleep_root(self, enter_root(self, t), t.root_id, t.root()->deadline_ms);
  await_event(self, t.root()->event_key, t.root_id, caf::actor{});
}

} // namespace proctor::exec_detail
