// The executor's event waiters: procedures waiting for an event by key (with their actor, or
// none for a passivated tree, or their parent for a dormant child), and the events kept for
// those that wait later, until their TTL.
#include <algorithm>

#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/wire/wall_clock.hpp"
#include "actors/scheduling/timeout_actor.hpp"

namespace proctor::exec_detail {

/// A procedure that no longer waits for an event is no longer woken by it (nor counted).
void forget_event_wait(executor_actor* self, uint64_t id) {
  auto& st = self->state;
  auto k = st.waiting_key.find(id);
  if (k == st.waiting_key.end())
    return;
  auto w = st.event_waiters.find(k->second);
  if (w != st.event_waiters.end()) {
    auto& v = w->second;
    v.erase(std::remove_if(v.begin(), v.end(), [id](const auto& x) { return x.first == id; }),
            v.end());
    if (v.empty())
      st.event_waiters.erase(w);
  }
  st.waiting_key.erase(k);
  if (!st.via_parent.empty())
    st.via_parent.erase(id);
}

void await_event(executor_actor* self, const std::string& key, uint64_t id, caf::actor h,
                 bool via) {
  auto& st = self->state;
  forget_event_wait(self, id);  // an earlier registration (another actor, or its parent)
  if (auto held = st.held_events.find(id); held != st.held_events.end() && h) {
    // It was woken while its tree was passivated (a dormant child's is held again).
    auto d = std::move(held->second);
    st.held_events.erase(held);
    return deliver_event(self, id, h, key, std::move(d), via);
  }
  if (auto e = st.events.find(key); e != st.events.end() && !e->second.empty())
    return deliver_event(self, id, h, key, event_delivery{e->second.back().payload, {}}, via);
  st.event_waiters[key].emplace_back(id, std::move(h));
  st.waiting_key[id] = key;
  if (via)
    st.via_parent.insert(id);
}

void wake_waiters(executor_actor* self, const std::string& key, const event_delivery& d,
                  size_t* woke) {
  auto& st = self->state;
  auto i = st.event_waiters.find(key);
  if (i == st.event_waiters.end())
    return;
  auto waiting = std::move(i->second);
  st.event_waiters.erase(i);
  for (auto& [id, h] : waiting) {
    st.waiting_key.erase(id);
    deliver_event(self, id, h, key, d);
    ++*woke;
  }
}

caf::actor* event_waiter(executor_actor* self, uint64_t id) {
  auto& st = self->state;
  auto k = st.waiting_key.find(id);
  if (k == st.waiting_key.end())
    return nullptr;
  auto w = st.event_waiters.find(k->second);
  if (w == st.event_waiters.end())
    return nullptr;
  for (auto& [wid, h] : w->second)
    if (wid == id)
      return &h;
  return nullptr;
}

bool wait_through_parent(executor_actor* self, const std::string& key, uint64_t id,
                         const caf::actor& child, caf::actor parent) {
  auto k = self->state.waiting_key.find(id);
  if (k == self->state.waiting_key.end() || k->second != key)
    return false;
  auto* h = event_waiter(self, id);
  if (h == nullptr || !*h || *h != child)
    return false;
  *h = std::move(parent);
  self->state.via_parent.insert(id);
  return true;
}

void arm_event_ttl(executor_actor* self, const std::string& key, const pending_event& ev) {
  auto& st = self->state;
  auto left = st.cfg.event_ttl - std::chrono::milliseconds{wall_ms() - ev.arrived_at_ms};
  if (left.count() < 0)
    left = std::chrono::milliseconds{0};
  arm_timeout(self, st.env->timeout, ev.lsn, timeout_kind::event_ttl, wall_ms() + left.count(),
              event_expire_atom::value, key, ev.lsn);
}

void keep_event(executor_actor* self, const std::string& key, pending_event ev) {
  arm_event_ttl(self, key, ev);
  self->state.events[key].push_back(std::move(ev));
}

}  // namespace proctor::exec_detail
