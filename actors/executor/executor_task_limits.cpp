// Per-queue limits (docs/workers.md, "Limits"): `proctor limits set queue:NAME --max-running N
// --rate R [--per D]` bounds how many tasks of a queue are leased at once and how fast they
// are handed out, as a type's limits bound its steps. Journaled as a type's are (a TypeLimits
// record named "queue:NAME", executor_limits.cpp; in a cluster group, the group's), enforced
// here when a poll takes tasks (take_ready, executor_tasks.cpp). A queue at its bound is
// served again when a lease ends; one held back by its rate, when its next token is due.
#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>

#include "actors/base/task_spec.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/internal/task_ops.hpp"

namespace proctor::exec_detail {

namespace {

/// Tasks of `queue` leased now, or being leased.
uint32_t leased_in(const tasks_part& tp, const std::string& queue) {
  // A scan of the node's open tasks, done only for a queue with a bound on its leases; a
  // count kept per queue would have to follow every path that ends a lease.
  uint32_t n = 0;
  for (const auto& [key, t] : tp.tasks)
    if ((!t.worker.empty() || t.leasing) && t.spec.queue() == queue)
      ++n;
  return n;
}

void refill(queue_limit& q) {
  const auto now = wall_ms();
  const auto per = std::max<int64_t>(1, q.limits.per.count());
  q.tokens = std::min(static_cast<double>(q.limits.rate),
                      q.tokens + static_cast<double>(now - q.refilled_ms) * q.limits.rate / per);
  q.refilled_ms = now;
}

}  // namespace

bool is_queue_limit_name(const std::string& name) {
  return is_task_service(name);
}

void set_queue_limit(executor_actor* self, const std::string& queue,
                     const std::optional<type_limits>& limits, int64_t at_ms) {
  auto& tp = self->state.tasks;
  if (!limits || !limits->any()) {
    if (tp.limits.erase(queue) > 0)
      serve_polls(self);
    return;
  }
  auto [i, fresh] = tp.limits.try_emplace(queue);
  auto& q = i->second;
  // A rate that was not there starts with a full bucket; a changed one keeps its tokens.
  if (fresh || q.limits.rate == 0) {
    q.tokens = limits->rate;
    q.refilled_ms = wall_ms();
  }
  q.limits = *limits;
  q.tokens = std::min(q.tokens, static_cast<double>(limits->rate));
  q.set_at_ms = at_ms;
  serve_polls(self);
}

uint32_t queue_allowance(executor_actor* self, const std::string& queue, uint32_t want) {
  auto& tp = self->state.tasks;
  auto i = tp.limits.find(queue);
  if (i == tp.limits.end())
    return want;
  auto& q = i->second;
  if (q.limits.max_running > 0) {
    auto held = leased_in(tp, queue);
    want = held >= q.limits.max_running ? 0 : std::min(want, q.limits.max_running - held);
  }
  if (q.limits.rate > 0 && want > 0) {
    refill(q);
    want = std::min(want, static_cast<uint32_t>(std::max(0.0, std::floor(q.tokens))));
  }
  return want;
}

void taken_from(executor_actor* self, const std::string& queue, uint32_t n) {
  auto i = self->state.tasks.limits.find(queue);
  if (i != self->state.tasks.limits.end() && i->second.limits.rate > 0)
    i->second.tokens -= n;
}

void held_back(executor_actor* self, const std::string& queue) {
  auto i = self->state.tasks.limits.find(queue);
  if (i == self->state.tasks.limits.end())
    return;
  auto& q = i->second;
  ++q.throttled;
  if (q.limits.rate == 0 || q.tokens >= 1 || q.wake_armed)
    return;  // at its bound of leases: a lease's end serves it again (slot_freed)
  const auto per = std::max<int64_t>(1, q.limits.per.count());
  auto wait = static_cast<int64_t>(std::ceil((1 - q.tokens) * per / q.limits.rate));
  q.wake_armed = true;
  self->delayed_send(self, std::chrono::milliseconds{std::max<int64_t>(1, wait)},
                     task_limit_wake_atom::value, queue);
}

void on_queue_limit_wake(executor_actor* self, const std::string& queue) {
  if (auto i = self->state.tasks.limits.find(queue); i != self->state.tasks.limits.end())
    i->second.wake_armed = false;
  serve_polls(self);
}

void slot_freed(executor_actor* self, const std::string& queue) {
  auto i = self->state.tasks.limits.find(queue);
  if (i != self->state.tasks.limits.end() && i->second.limits.max_running > 0)
    serve_polls(self);
}

void fill_queue_limits(executor_actor* self, pb::Response& r) {
  auto& tp = self->state.tasks;
  for (auto& [queue, q] : tp.limits) {
    auto* x = r.add_limits();
    x->set_type(task_service_prefix + queue);
    x->set_max_running(q.limits.max_running);
    x->set_rate(q.limits.rate);
    x->set_per_ms(static_cast<uint64_t>(q.limits.per.count()));
    x->set_operator_set(true);
    x->set_set_at_ms(q.set_at_ms);
    x->set_running(leased_in(tp, queue));
    uint32_t depth = 0;
    if (auto d = tp.ready.find(queue); d != tp.ready.end())
      depth = static_cast<uint32_t>(d->second.size());
    x->set_waiting(depth);
    x->set_throttled(q.throttled);
  }
}

}  // namespace proctor::exec_detail
