#include "actors/scheduling/timeout_actor.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/base/incremental_map.hpp"
#include "actors/scheduling/deadline_queue.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/counted_actor.hpp"

namespace proctor {

namespace {

using tick_atom = caf::atom_constant<caf::atom("tmotick")>;

/// Deadlines sent per message handled: a million due at once go out in batches, the actor's
/// mailbox (arms, cancels) served between them.
constexpr size_t fire_batch = 4096;

/// One armed deadline: where it goes and what.
struct armed {
  deadline_handle handle;
  caf::strong_actor_ptr target;
  caf::message msg;
};

/// Lateness histogram: 1 ms buckets below 10 s, one above.
struct lateness {
  static constexpr size_t buckets = 10'000;
  std::vector<uint64_t> counts = std::vector<uint64_t>(buckets + 1, 0);
  uint64_t total = 0;
  int64_t max_ms = 0;

  void add(int64_t ms) {
    ms = std::max<int64_t>(0, ms);
    ++counts[std::min<size_t>(static_cast<size_t>(ms), buckets)];
    ++total;
    max_ms = std::max(max_ms, ms);
  }
  int64_t quantile(double q) const {
    if (total == 0)
      return 0;
    auto want = static_cast<uint64_t>(q * static_cast<double>(total - 1)) + 1;
    uint64_t seen = 0;
    for (size_t i = 0; i <= buckets; ++i)
      if ((seen += counts[i]) >= want)
        return i == buckets ? max_ms : static_cast<int64_t>(i);
    return max_ms;
  }
};

struct timeout_state {
  static inline const char* name = "proctor.timeout";
  deadline_queue queue;
  /// (owner << 4 | kind) -> the armed deadline. Owners (ids below 2^53, LSNs) leave room.
  incremental_map<uint64_t, armed> index;
  /// The one CAF timer: the deadline it is set for (INT64_MAX: none) and its token.
  int64_t timer_at = INT64_MAX;
  uint64_t timer_token = 0;
  bool draining = false;  ///< a tick to send more due deadlines is queued
  uint64_t fired = 0;
  lateness late;
  std::vector<fired_deadline> due;
};

using timeout_actor = caf::stateful_actor<timeout_state, counted_actor<actor_kind::timeout>>;

uint64_t key_of(uint64_t owner, uint8_t kind) {
  return (owner << 4) | (kind & 0xF);
}

/// Sets the one timer to the earliest deadline, if it is not set for it (or earlier) yet.
void rearm(timeout_actor* self) {
  auto& st = self->state;
  auto next = st.queue.next_deadline();
  if (!next || st.draining || *next >= st.timer_at)
    return;
  st.timer_at = *next;
  auto delay = std::max<int64_t>(0, *next - wall_ms());
  self->delayed_send(self, std::chrono::milliseconds{delay}, tick_atom::value, ++st.timer_token);
}

/// Sends what is due (a batch); queues itself again while more is due.
void fire(timeout_actor* self) {
  auto& st = self->state;
  auto now = wall_ms();
  st.due.clear();
  st.queue.pop_due(now, fire_batch, &st.due);
  for (auto& d : st.due) {
    auto k = key_of(d.entry.owner, static_cast<uint8_t>(d.entry.kind));
    auto i = st.index.find(k);
    if (i == st.index.end())
      continue;
    auto a = std::move(i->second);
    st.index.erase(i);
    st.late.add(now - d.deadline_ms);
    ++st.fired;
    if (a.target)
      a.target->enqueue(self->ctrl(), caf::make_message_id(), std::move(a.msg), self->context());
  }
  auto next = st.queue.next_deadline();
  if (next && *next <= now) {
    st.draining = true;
    self->send(self, tick_atom::value, uint64_t{0});
    return;
  }
  rearm(self);
}

caf::behavior timeout_fn(timeout_actor* self) {
  return {
    [self](timeout_arm_atom, uint64_t owner, uint8_t kind, int64_t deadline_ms, caf::message& msg) {
      auto& st = self->state;
      auto k = key_of(owner, kind);
      auto [i, fresh] = st.index.try_emplace(k);
      if (!fresh)
        st.queue.cancel(i->second.handle);
      i->second.handle = st.queue.arm(deadline_ms, deadline_entry{owner, 0, kind});
      i->second.target = self->current_sender();
      i->second.msg = std::move(msg);
      rearm(self);
    },
    [self](timeout_cancel_atom, uint64_t owner, uint8_t kind) {
      auto& st = self->state;
      auto i = st.index.find(key_of(owner, kind));
      if (i == st.index.end())
        return;
      st.queue.cancel(i->second.handle);
      st.index.erase(i);
      // The timer stays set: firing early finds nothing due and sets it again.
    },
    [self](tick_atom, uint64_t token) {
      auto& st = self->state;
      if (token == 0) {
        st.draining = false;
      } else {
        if (token != st.timer_token)
          return;  // a timer replaced by an earlier one
        st.timer_at = INT64_MAX;
      }
      fire(self);
    },
    [self](timeout_stats_atom) {
      auto& st = self->state;
      timeout_stats s;
      s.armed = st.queue.size();
      // The index's nodes: key, value and the node's own pointers and hash.
      s.bytes = st.queue.bytes_used() + st.index.size() * (sizeof(uint64_t) + sizeof(armed) + 24);
      s.fired = st.fired;
      s.late_p50_ms = st.late.quantile(0.50);
      s.late_p99_ms = st.late.quantile(0.99);
      s.late_max_ms = st.late.max_ms;
      return s;
    },
  };
}

}  // namespace

caf::actor spawn_timeout(caf::actor_system& sys) {
  return sys.spawn(timeout_fn);
}

}  // namespace proctor
