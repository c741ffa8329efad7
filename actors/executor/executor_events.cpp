// The executor's event waiters: procedures waiting for an event by key (with their actor, or
// none for a passivated tree, or their parent for a passivated child), and the events kept for
// those that wait later, until their TTL.
//
// An event is consumed once (docs/concepts.md, "Events"): one that woke the procedures
// waiting for its key when it became durable is not kept; one that woke none is kept for
// the first procedure that suspends on its key later, which consumes it (oldest first).
// Its journal record (journal_keys::meta_root, its LSN) goes in the batch of the
// EventDelivered of its only taker (event_delivery::consume), else once each procedure it
// woke took it. Until each procedure an event was handed to said whether it took it
// (event_taken_atom, event_declined_atom, or its end), the event is in flight: neither kept
// nor deleted. One taken by none is kept again: a procedure declines only a delivery it
// never journaled, so the event is never consumed twice.
#include <algorithm>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

std::string human_duration(std::chrono::milliseconds ms) {
  auto n = ms.count();
  char buf[48];
  if (n >= 3'600'000 && n % 3'600'000 == 0)
    std::snprintf(buf, sizeof buf, "%lld h", static_cast<long long>(n / 3'600'000));
  else if (n >= 60'000 && n % 60'000 == 0)
    std::snprintf(buf, sizeof buf, "%lld min", static_cast<long long>(n / 60'000));
  else if (n >= 1000 && n % 1000 == 0)
    std::snprintf(buf, sizeof buf, "%lld s", static_cast<long long>(n / 1000));
  else
    std::snprintf(buf, sizeof buf, "%lld ms", static_cast<long long>(n));
  return buf;
}

std::string proc_list(const std::vector<uint64_t>& ids) {
  std::string s = "[proc ";
  for (size_t i = 0; i < ids.size() && i < 20; ++i)
    s += (i == 0 ? "" : ", ") + std::to_string(ids[i]);
  if (ids.size() > 20)
    s += " and " + std::to_string(ids.size() - 20) + " more";
  return s + "]";
}

namespace {

void delete_event_record(executor_actor* self, uint64_t lsn) {
  journal_batch b;
  b.deletes.push_back({journal_keys::meta_root, lsn, lsn + 1});
  append(self, std::move(b));
}

/// Event `ev` of `key` is handed to procedure `id` (actor `h`, `via` its parent).
void hand_event(executor_actor* self, uint64_t id, const caf::actor& h, const std::string& key,
                event_in_flight& f, bool via) {
  auto& st = self->state;
  f.takers.push_back(id);
  st.events.handed.emplace(id, f.ev.lsn);
  if (h && !via && (st.events.via_parent.empty() || st.events.via_parent.count(id) == 0))
    f.handed_to[id] = h;
  deliver_event(self, id, h, key, event_delivery{f.ev.payload, f.ev.failure, f.ev.lsn, f.consume},
                via);
}

/// A new actor `h` of procedure `id` waits under `key`, while an event of `key` handed to its
/// old actor is in flight: the old one went down without answering (stopped for a supervision
/// restart, the delivery dropped with its mailbox), so the event goes to the new one. Returns
/// false if there is none such.
bool hand_again(executor_actor* self, const std::string& key, uint64_t id, const caf::actor& h) {
  auto& st = self->state;
  for (auto [hd, end] = st.events.handed.equal_range(id); hd != end; ++hd) {
    auto i = st.events.in_flight.find(hd->second);
    if (i == st.events.in_flight.end() || i->second.key != key)
      continue;
    auto& f = i->second;
    auto to = f.handed_to.find(id);
    if (to == f.handed_to.end() || to->second == h)
      continue;
    spdlog::info("[proc {} root {}] event '{}' (lsn {}) handed again to its new actor (the one "
                 "it was handed to went down)",
                 id, root_of(self, id), key, f.ev.lsn);
    to->second = h;
    deliver_event(self, id, h, key,
                  event_delivery{f.ev.payload, f.ev.failure, f.ev.lsn, f.consume});
    return true;
  }
  return false;
}

/// Kept event `ev` goes to the first procedure waiting under `key`, if any (it was being
/// handed to another one, which declined it).
void offer_kept(executor_actor* self, const std::string& key) {
  auto& st = self->state;
  auto w = st.events.waiters.find(key);
  auto e = st.events.kept.find(key);
  if (w == st.events.waiters.end() || e == st.events.kept.end() || e->second.empty())
    return;
  auto [id, h] = std::move(w->second.front());
  w->second.erase(w->second.begin());
  if (w->second.empty())
    st.events.waiters.erase(w);
  st.events.waiting_key.erase(id);
  bool via = !st.events.via_parent.empty() && st.events.via_parent.erase(id) > 0;
  await_event(self, key, id, std::move(h), via);
}

/// Keeps `ev` again (oldest first among the kept events of `key`), or deletes it if its TTL
/// passed meanwhile.
void keep_again(executor_actor* self, const std::string& key, pending_event ev, uint64_t by) {
  auto& st = self->state;
  if (wall_ms() - ev.arrived_at_ms >= st.cfg.event_ttl.count()) {
    spdlog::info("event '{}' (lsn {}) expired unconsumed after {} ([proc {}] did not take it)", key,
                 ev.lsn, human_duration(st.cfg.event_ttl), by);
    return delete_event_record(self, ev.lsn);
  }
  spdlog::info("[proc {} root {}] did not take event '{}' (lsn {}): kept again for the first "
               "procedure that suspends on it",
               by, root_of(self, by), key, ev.lsn);
  arm_event_ttl(self, key, ev);
  auto& v = st.events.kept[key];
  auto at = std::lower_bound(v.begin(), v.end(), ev.lsn,
                             [](const pending_event& x, uint64_t lsn) { return x.lsn < lsn; });
  v.insert(at, std::move(ev));
  offer_kept(self, key);
}

}  // namespace

/// A procedure that no longer waits for an event is no longer woken by it (nor counted).
void forget_event_wait(executor_actor* self, uint64_t id) {
  auto& st = self->state;
  auto k = st.events.waiting_key.find(id);
  if (k == st.events.waiting_key.end())
    return;
  auto w = st.events.waiters.find(k->second);
  if (w != st.events.waiters.end()) {
    auto& v = w->second;
    v.erase(std::remove_if(v.begin(), v.end(), [id](const auto& x) { return x.first == id; }),
            v.end());
    if (v.empty())
      st.events.waiters.erase(w);
  }
  st.events.waiting_key.erase(k);
  if (!st.events.via_parent.empty())
    st.events.via_parent.erase(id);
}

void await_event(executor_actor* self, const std::string& key, uint64_t id, caf::actor h,
                 bool via) {
  auto& st = self->state;
  forget_event_wait(self, id);  // an earlier registration (another actor, or its parent)
  if (auto held = st.events.held.find(id); held != st.events.held.end() && h) {
    // It was woken while its tree was passivated (a passivated child's is held again).
    auto hd = std::move(held->second);
    st.events.held.erase(held);
    if (hd.key == key)
      return deliver_event(self, id, h, key, std::move(hd.d), via);
    // It waits for something else now: that delivery is stale, and not taken.
    if (hd.d.event_lsn != 0)
      settle_event(self, hd.d.event_lsn, id, false);
  }
  if (h && !via && !st.events.handed.empty() && hand_again(self, key, id, h))
    return;
  if (auto e = st.events.kept.find(key);
      !st.recovery.active && e != st.events.kept.end() && !e->second.empty()) {
    // The oldest kept event is this procedure's; no other waiter gets it.
    auto ev = std::move(e->second.front());
    e->second.erase(e->second.begin());
    if (e->second.empty())
      st.events.kept.erase(e);
    auto lsn = ev.lsn;
    auto& f = st.events.in_flight[lsn];
    f.key = key;
    f.ev = std::move(ev);
    f.consume = true;
    f.was_kept = true;
    return hand_event(self, id, h, key, f, via);
  }
  st.events.waiters[key].emplace_back(id, std::move(h));
  st.events.waiting_key[id] = key;
  if (via)
    st.events.via_parent.insert(id);
}

void wake_waiters(executor_actor* self, const std::string& key, const event_delivery& d,
                  size_t* woke) {
  auto& st = self->state;
  auto i = st.events.waiters.find(key);
  if (i == st.events.waiters.end())
    return;
  auto waiting = std::move(i->second);
  st.events.waiters.erase(i);
  for (auto& [id, h] : waiting) {
    st.events.waiting_key.erase(id);
    deliver_event(self, id, h, key, d);
    ++*woke;
  }
}

std::vector<uint64_t> wake_event_waiters(executor_actor* self, const std::string& key,
                                         const pending_event& ev) {
  auto& st = self->state;
  std::vector<uint64_t> ids;
  auto i = st.events.waiters.find(key);
  if (i == st.events.waiters.end())
    return ids;
  auto waiting = std::move(i->second);
  st.events.waiters.erase(i);
  auto& f = st.events.in_flight[ev.lsn];
  f.key = key;
  f.ev = ev;
  f.consume = waiting.size() == 1;
  ids.reserve(waiting.size());
  for (auto& [id, h] : waiting) {
    st.events.waiting_key.erase(id);
    ids.push_back(id);
    hand_event(self, id, h, key, f, false);
  }
  return ids;
}

void settle_event(executor_actor* self, uint64_t lsn, uint64_t id, bool took) {
  auto& st = self->state;
  auto i = st.events.in_flight.find(lsn);
  if (i == st.events.in_flight.end())
    return;
  auto& f = i->second;
  auto t = std::find(f.takers.begin(), f.takers.end(), id);
  if (t == f.takers.end())
    return;
  f.takers.erase(t);
  f.handed_to.erase(id);
  for (auto [hd, end] = st.events.handed.equal_range(id); hd != end; ++hd)
    if (hd->second == lsn) {
      st.events.handed.erase(hd);
      break;
    }
  if (took) {
    f.took.push_back(id);
    if (f.was_kept) {
      spdlog::info("[proc {} root {}] consumed event '{}' (lsn {}), kept {} until then", id,
                   root_of(self, id), f.key, lsn,
                   human_duration(std::chrono::milliseconds{wall_ms() - f.ev.arrived_at_ms}));
      cancel_timeout(self, st.env->timeout, lsn, timeout_kind::event_ttl);
    }
  }
  if (!f.takers.empty())
    return;
  auto done = std::move(f);
  st.events.in_flight.erase(i);
  if (done.took.empty())
    return keep_again(self, done.key, std::move(done.ev), id);
  if (!done.consume)  // woke several: its record goes once each of them took it or not
    delete_event_record(self, lsn);
}

void release_handed_event(executor_actor* self, uint64_t id) {
  auto& st = self->state;
  std::vector<uint64_t> lsns;
  for (auto [hd, end] = st.events.handed.equal_range(id); hd != end; ++hd)
    lsns.push_back(hd->second);
  for (auto lsn : lsns)
    settle_event(self, lsn, id, false);
}

void expire_event(executor_actor* self, const std::string& key, uint64_t lsn) {
  auto& st = self->state;
  auto e = st.events.kept.find(key);
  if (e == st.events.kept.end())
    return;  // consumed (or being handed to a procedure: settle_event decides)
  auto& v = e->second;
  auto at =
    std::find_if(v.begin(), v.end(), [lsn](const pending_event& x) { return x.lsn == lsn; });
  if (at == v.end())
    return;
  v.erase(at);
  if (v.empty())
    st.events.kept.erase(e);
  spdlog::info("event '{}' (lsn {}) expired unconsumed after {}", key, lsn,
               human_duration(st.cfg.event_ttl));
  delete_event_record(self, lsn);
}

void match_recovered_events(executor_actor* self) {
  auto& st = self->state;
  std::vector<uint64_t> drop;
  for (auto e = st.events.kept.begin(); e != st.events.kept.end();) {
    const auto& key = e->first;
    auto evs = std::move(e->second);
    auto ws = std::move(st.recovery.waiters[key]);
    std::sort(ws.begin(), ws.end());
    // As the node handed them out before it went down: by LSN, a wait takes the oldest kept
    // event, an event wakes the waits before it that no event took (a delivery the crash
    // interrupted), or, woken none, is kept unless a journaled delivery consumed it.
    std::vector<pending_event> kept;
    size_t next_kept = 0;
    std::vector<uint64_t> waiting;
    struct hand_out {
      pending_event ev;
      std::vector<uint64_t> ids;
      bool was_kept = false;  ///< taken by a wait after it, not woken by it
    };
    std::vector<hand_out> handed;
    size_t i = 0, j = 0;
    while (i < evs.size() || j < ws.size()) {
      if (j < ws.size() && (i == evs.size() || ws[j].first < evs[i].lsn)) {
        auto id = ws[j++].second;
        if (next_kept < kept.size())
          handed.push_back({std::move(kept[next_kept++]), {id}, true});
        else
          waiting.push_back(id);
        continue;
      }
      auto& ev = evs[i++];
      if (!waiting.empty())
        handed.push_back({std::move(ev), std::exchange(waiting, {}), false});
      else if (st.recovery.consumed.count(ev.lsn) > 0)
        drop.push_back(ev.lsn);
      else
        kept.push_back(std::move(ev));
    }
    kept.erase(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(next_kept));
    for (auto& h : handed) {
      spdlog::info("recovery: event '{}' (lsn {}) handed again to {}", key, h.ev.lsn,
                   proc_list(h.ids));
      auto& f = st.events.in_flight[h.ev.lsn];
      f.key = key;
      f.ev = std::move(h.ev);
      f.consume = h.ids.size() == 1;
      f.was_kept = h.was_kept;
      for (auto id : h.ids) {
        forget_event_wait(self, id);  // a passivated tree's waiter: woken at the end
        hand_event(self, id, caf::actor{}, key, f, false);
      }
    }
    if (kept.empty()) {
      e = st.events.kept.erase(e);
    } else {
      e->second = std::move(kept);
      ++e;
    }
  }
  st.recovery.waiters.clear();
  st.recovery.consumed.clear();
  if (drop.empty())
    return;
  spdlog::info("recovery: {} event(s) consumed before the restart deleted", drop.size());
  journal_batch b;
  for (auto lsn : drop)
    b.deletes.push_back({journal_keys::meta_root, lsn, lsn + 1});
  append(self, std::move(b));
}

caf::actor* event_waiter(executor_actor* self, uint64_t id) {
  auto& st = self->state;
  auto k = st.events.waiting_key.find(id);
  if (k == st.events.waiting_key.end())
    return nullptr;
  auto w = st.events.waiters.find(k->second);
  if (w == st.events.waiters.end())
    return nullptr;
  for (auto& [wid, h] : w->second)
    if (wid == id)
      return &h;
  return nullptr;
}

bool wait_through_parent(executor_actor* self, const std::string& key, uint64_t id,
                         const caf::actor& child, caf::actor parent) {
  auto k = self->state.events.waiting_key.find(id);
  if (k == self->state.events.waiting_key.end() || k->second != key)
    return false;
  auto* h = event_waiter(self, id);
  if (h == nullptr || !*h || *h != child)
    return false;
  *h = std::move(parent);
  self->state.events.via_parent.insert(id);
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
  self->state.events.kept[key].push_back(std::move(ev));
}

}  // namespace proctor::exec_detail
