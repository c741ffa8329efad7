// What the node's task queues show (`proctor queues`, the HTTP API's GET /api/queues, the
// node's metrics: docs/workers.md): each queue's depth, leases, pollers and oldest waiting
// task, its limits and its counts, and the workers that polled it last.
#include <algorithm>
#include <map>

#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/internal/tasks_part.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor::exec_detail {

void fill_queues(executor_actor* self, google::protobuf::RepeatedPtrField<pb::QueueInfo>* out) {
  auto& tp = self->state.tasks;
  struct counts {
    uint64_t depth = 0, leased = 0, pollers = 0;
    int64_t oldest = 0;
  };
  std::map<std::string, counts> by;
  for (const auto& [name, f] : tp.figures)
    by[name];
  for (const auto& [name, l] : tp.limits)
    by[name];
  const auto now = wall_ms();
  for (const auto& [key, t] : tp.tasks) {
    auto& c = by[t.spec.queue()];
    if (!t.worker.empty()) {
      ++c.leased;
    } else {
      ++c.depth;
      c.oldest = std::max(c.oldest, now - t.queued_at_ms);
    }
  }
  for (const auto& p : tp.polls)
    for (const auto& q : p.queues)
      ++by[q].pollers;
  for (const auto& [name, c] : by) {
    auto* q = out->Add();
    q->set_name(name);
    q->set_depth(c.depth);
    q->set_leased(c.leased);
    q->set_pollers(c.pollers);
    q->set_oldest_age_ms(c.oldest);
    // A queue limited before any task or poll came has limits and no figures yet.
    if (auto l = tp.limits.find(name); l != tp.limits.end()) {
      q->set_max_leased(l->second.limits.max_running);
      q->set_rate(l->second.limits.rate);
      q->set_per_ms(static_cast<uint64_t>(l->second.limits.per.count()));
      q->set_throttled(l->second.throttled);
    }
    auto f = tp.figures.find(name);
    if (f == tp.figures.end())
      continue;
    q->set_dispatched(f->second.dispatched);
    q->set_completed(f->second.completed);
    q->set_failed(f->second.failed);
    q->set_timed_out(f->second.timed_out);
    for (const auto& [worker, at] : f->second.last_poll) {
      auto* w = q->add_workers();
      w->set_worker(worker);
      w->set_at_ms(at);
    }
  }
}

}  // namespace proctor::exec_detail
