// The node's task queues for external workers (docs/workers.md, tasks_part.hpp).
//
// A task is queued when its procedure waits for it, handed out to a worker's poll once the
// lease is journaled (a TaskState record, one per task, each new one written with a delete of
// the one before), and ended by an event under its key: its result, or why it failed,
// journaled before the worker is answered. That event wakes the procedure as any event does
// (executor_events.cpp), which journals the delivery and deletes the event in one batch: a
// crash leaves the task open, or its end kept for its procedure, never both nor neither.
//
// Nothing is accepted twice: a token names its task and attempt; a complete of an earlier
// attempt, of a lease that ran out, or of a task that ended otherwise is refused and changes
// nothing; the same complete sent again answers as the first did.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/base/task_spec.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/internal/task_ops.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

namespace {

constexpr uint32_t max_poll_tasks = 100;
constexpr uint32_t max_poll_wait_ms = 60'000;
constexpr size_t max_workers_listed = 64;

}  // namespace

/// "<key without call:>.<attempt>": what a worker sends back.
std::string token_of(const task_entry& t) {
  return t.key.substr(call_key_prefix.size()) + "." + std::to_string(t.attempt);
}

std::string proc_text(executor_actor* self, uint64_t id) {
  return "[proc " + std::to_string(id) + " root " + std::to_string(root_of(self, id)) + "]";
}

/// True while procedure `id` waits under `key` (an event handed to it ends that).
bool still_waits(executor_actor* self, const task_entry& t) {
  auto k = self->state.events.waiting_key.find(t.proc_id);
  return k != self->state.events.waiting_key.end() && k->second == t.key;
}

bool waits_for_undo_task(executor_actor* self, uint64_t id) {
  if (self->state.tasks.by_proc.empty())
    return false;
  auto k = self->state.events.waiting_key.find(id);
  return k != self->state.events.waiting_key.end() && is_undo_task_key(k->second);
}

void note_ended(tasks_part& tp, const std::string& key, ended_task e) {
  if (tp.ended.emplace(key, std::move(e)).second)
    tp.ended_order.push_back(key);
  while (tp.ended_order.size() > max_ended_tasks) {
    tp.ended.erase(tp.ended_order.front());
    tp.ended_order.pop_front();
  }
}

void unready(tasks_part& tp, const task_entry& t) {
  auto q = tp.ready.find(t.spec.queue());
  if (q == tp.ready.end())
    return;
  q->second.erase(t.seq);
  if (q->second.empty())
    tp.ready.erase(q);
}

void make_ready(tasks_part& tp, task_entry& t) {
  t.seq = ++tp.next_seq;
  tp.ready[t.spec.queue()].emplace(t.seq, t.key);
}

void arm_task_timer(executor_actor* self, task_entry& t, int64_t at_ms) {
  t.timer = ++self->state.tasks.timer_token;
  arm_timeout(self, self->state.env->timeout, t.proc_id, timeout_kind::task, at_ms,
              task_timer_atom::value, t.key, t.timer);
}

void disarm_task_timer(executor_actor* self, task_entry& t) {
  if (t.timer == 0)
    return;
  t.timer = 0;
  cancel_timeout(self, self->state.env->timeout, t.proc_id, timeout_kind::task);
}

/// The lease's end: its start-to-close from the poll, or its heartbeat's bound, the earlier.
int64_t lease_end(const task_entry& t) {
  auto end = t.leased_at_ms + t.spec.start_to_close_ms();
  if (t.spec.heartbeat_ms() > 0)
    end = std::min(end, t.beat_at_ms + t.spec.heartbeat_ms());
  return end;
}

/// Erases task `key` (its timer disarmed, out of its queue).
void drop_task(executor_actor* self, const std::string& key) {
  auto& tp = self->state.tasks;
  auto i = tp.tasks.find(key);
  if (i == tp.tasks.end())
    return;
  disarm_task_timer(self, i->second);
  unready(tp, i->second);
  if (auto b = tp.by_proc.find(i->second.proc_id); b != tp.by_proc.end() && b->second == key)
    tp.by_proc.erase(b);
  tp.tasks.erase(i);
}

/// Deletes a record of the meta range (none: nothing).
void delete_meta(journal_batch& b, uint64_t lsn) {
  if (lsn != 0)
    b.deletes.push_back({journal_keys::meta_root, lsn, lsn + 1});
}

pb::JournalRecord state_record(const task_entry& t, uint32_t attempt, const std::string& worker,
                               const std::string& details) {
  pb::JournalRecord rec;
  auto* s = rec.mutable_task();
  s->set_task_key(t.key);
  s->set_proc_id(t.proc_id);
  s->set_attempt(attempt);
  s->set_worker(worker);
  s->set_at_ms(wall_ms());
  s->set_details_json(details);
  return rec;
}

void fill_info(executor_actor* self, const task_entry& t, pb::TaskInfo* out) {
  out->set_token(token_of(t));
  out->set_queue(t.spec.queue());
  out->set_input_json(t.spec.input_json());
  out->set_attempt(t.attempt);
  out->set_max_attempts(t.spec.max_attempts());
  out->set_proc_id(t.proc_id);
  if (auto p = self->state.procs.find(t.proc_id); p != self->state.procs.end())
    out->set_type(p->second.type());
  out->set_lease_until_ms(t.lease_until_ms);
  out->set_start_to_close_ms(t.spec.start_to_close_ms());
  out->set_heartbeat_ms(t.spec.heartbeat_ms());
  out->set_details_json(t.details);
}

namespace {

/// Leases `keys` to `worker` (their records first), then answers `rp` with them.
void lease(executor_actor* self, std::vector<std::string> keys, const std::string& worker,
           promise_t rp) {
  auto& tp = self->state.tasks;
  journal_batch b;
  for (const auto& key : keys) {
    auto& t = tp.tasks.at(key);
    t.busy = true;
    t.leasing = true;
    unready(tp, t);
    delete_meta(b, t.state_lsn);
    auto rec = state_record(t, t.attempt, worker, t.details);
    b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  }
  append(self, std::move(b), [self, keys, worker, rp](uint64_t last) mutable {
    auto& tp = self->state.tasks;
    pb::Response r;
    auto* out = r.mutable_task();
    const auto now = wall_ms();
    std::vector<std::pair<pb::TaskRequest, promise_t>> reports;
    auto lsn = last + 1 - keys.size();  // the batch's records, in order
    for (const auto& key : keys) {
      auto this_lsn = lsn++;
      auto i = tp.tasks.find(key);
      if (i == tp.tasks.end())
        continue;
      auto& t = i->second;
      t.busy = false;
      t.leasing = false;
      t.state_lsn = this_lsn;
      for (auto& d : std::exchange(t.deferred, {}))  // (none: its token was not out yet)
        reports.push_back(std::move(d));
      if (t.stopped || !still_waits(self, t)) {
        task_stopped(self, t.proc_id);
        continue;
      }
      t.worker = worker;
      t.leased_at_ms = t.beat_at_ms = now;
      t.lease_until_ms = lease_end(t);
      arm_task_timer(self, t, t.lease_until_ms);
      fill_info(self, t, out->add_tasks());
      spdlog::debug("{} task {} of queue '{}' leased to '{}' (attempt {})",
                    proc_text(self, t.proc_id), key, t.spec.queue(), worker, t.attempt);
    }
    reply(rp, encode(r));
    replay(self, std::move(reports));
  });
}

/// Up to `max` tasks of `queues` ready now, oldest first (dropping those whose procedure no
/// longer waits).
std::vector<std::string> take_ready(executor_actor* self, const std::vector<std::string>& queues,
                                    uint32_t max) {
  auto& tp = self->state.tasks;
  std::vector<std::string> out;
  // What each queue's limits let this poll take (executor_task_limits.cpp); none: no limits.
  std::map<std::string, uint32_t> allow;
  if (!tp.limits.empty())
    for (const auto& q : queues)
      if (tp.limits.count(q) != 0 && tp.ready.count(q) != 0)
        allow[q] = queue_allowance(self, q, max);
  std::map<std::string, uint32_t> took;
  while (out.size() < max) {
    std::map<uint64_t, std::string>* best = nullptr;
    const std::string* best_q = nullptr;
    for (const auto& q : queues) {
      auto r = tp.ready.find(q);
      if (r == tp.ready.end() || r->second.empty())
        continue;
      if (auto a = allow.find(q); a != allow.end() && a->second == 0)
        continue;
      if (best == nullptr || r->second.begin()->first < best->begin()->first) {
        best = &r->second;
        best_q = &q;
      }
    }
    if (best == nullptr)
      break;
    auto key = best->begin()->second;
    auto i = tp.tasks.find(key);
    if (i == tp.tasks.end() || i->second.busy || !i->second.worker.empty()) {
      best->erase(best->begin());
      continue;
    }
    if (!still_waits(self, i->second)) {
      task_stopped(self, i->second.proc_id);
      continue;
    }
    best->erase(best->begin());
    out.push_back(std::move(key));
    if (auto a = allow.find(*best_q); a != allow.end()) {
      --a->second;
      ++took[*best_q];
    }
  }
  for (auto r = tp.ready.begin(); r != tp.ready.end();)
    r = r->second.empty() ? tp.ready.erase(r) : std::next(r);
  for (const auto& [q, n] : allow) {
    if (auto t = took.find(q); t != took.end())
      taken_from(self, q, t->second);
    if (n == 0 && tp.ready.count(q) != 0)
      held_back(self, q);  // a ready task its limits hold back
  }
  return out;
}

void handle_poll(executor_actor* self, const pb::TaskRequest& req, promise_t rp) {
  auto& tp = self->state.tasks;
  if (req.queues().empty())
    return reply(rp, error_reply(pb::Response::BAD_REQUEST, "a poll names at least one queue"));
  std::vector<std::string> queues;
  for (const auto& q : req.queues()) {
    if (auto why = task_queue_refusal(q); !why.empty())
      return reply(rp, error_reply(pb::Response::BAD_REQUEST, why));
    queues.push_back(q);
  }
  if (req.worker().empty() || req.worker().size() > 200)
    return reply(
      rp, error_reply(pb::Response::BAD_REQUEST, "a poll names its worker (1 to 200 characters)"));
  if (req.max() > max_poll_tasks)
    return reply(rp,
                 error_reply(pb::Response::BAD_REQUEST,
                             "a poll takes at most " + std::to_string(max_poll_tasks) + " tasks"));
  if (req.wait_ms() > max_poll_wait_ms)
    return reply(
      rp, error_reply(pb::Response::BAD_REQUEST,
                      "a poll waits at most " + std::to_string(max_poll_wait_ms / 1000) + " s"));
  const auto now = wall_ms();
  for (const auto& q : queues) {
    auto& seen = tp.figures[q].last_poll;
    seen[req.worker()] = now;
    if (seen.size() > max_workers_listed)
      seen.erase(std::min_element(seen.begin(), seen.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      }));
  }
  auto keys = take_ready(self, queues, std::max<uint32_t>(1, req.max()));
  if (!keys.empty())
    return lease(self, std::move(keys), req.worker(), std::move(rp));
  if (req.wait_ms() == 0) {
    pb::Response r;
    r.mutable_task();
    return reply(rp, encode(r));
  }
  task_poll p{std::move(queues), req.worker(), std::max<uint32_t>(1, req.max()), std::move(rp),
              ++tp.poll_token};
  self->delayed_send(self, std::chrono::milliseconds{req.wait_ms()}, task_poll_expire_atom::value,
                     p.token);
  tp.polls.push_back(std::move(p));
}

void handle_queues(executor_actor* self, promise_t rp) {
  pb::Response r;
  fill_queues(self, r.mutable_task()->mutable_queues());
  reply(rp, encode(r));
}

}  // namespace

void serve_polls(executor_actor* self) {
  auto& tp = self->state.tasks;
  for (auto p = tp.polls.begin(); p != tp.polls.end() && !tp.ready.empty();) {
    auto keys = take_ready(self, p->queues, p->max);
    if (keys.empty()) {
      ++p;
      continue;
    }
    auto poll = std::move(*p);
    p = tp.polls.erase(p);
    lease(self, std::move(keys), poll.worker, std::move(poll.rp));
  }
}

void task_awaited(executor_actor* self, const std::string& key, uint64_t id,
                  const std::string& service, const std::string& request) {
  auto& tp = self->state.tasks;
  if (tp.tasks.count(key) != 0)
    return;  // queued already (its actor came back, or registered again)
  task_entry t;
  t.key = key;
  t.proc_id = id;
  if (!t.spec.ParseFromString(request) || t.spec.queue() != task_queue_of(service)) {
    spdlog::error("{} task {} has a damaged spec in its journal: it is not queued",
                  proc_text(self, id), key);
    return;
  }
  t.queued_at_ms = wall_ms();
  auto& fig = tp.figures[t.spec.queue()];
  if (auto r = tp.recovered.find(key); r != tp.recovered.end()) {
    // Read back: where it stood before the restart. A lease goes on from now.
    const auto& s = r->second.rec;
    t.attempt = std::max<uint32_t>(1, s.attempt());
    t.state_lsn = r->second.lsn;
    t.details = s.details_json();
    t.worker = s.worker();
    tp.recovered.erase(r);
  } else {
    ++fig.dispatched;
  }
  auto& e = tp.tasks.emplace(key, std::move(t)).first->second;
  tp.by_proc[id] = key;
  if (!e.worker.empty()) {
    e.leased_at_ms = e.beat_at_ms = wall_ms();
    e.lease_until_ms = lease_end(e);
    arm_task_timer(self, e, e.lease_until_ms);
    spdlog::info("{} task {} of queue '{}' still leased to '{}' (attempt {}), its lease "
                 "restarted with the node",
                 proc_text(self, id), key, e.spec.queue(), e.worker, e.attempt);
    return;
  }
  make_ready(tp, e);
  spdlog::debug("{} task {} queued on '{}' (attempt {})", proc_text(self, id), key, e.spec.queue(),
                e.attempt);
  serve_polls(self);
}

void task_stopped(executor_actor* self, uint64_t id) {
  auto& tp = self->state.tasks;
  auto b = tp.by_proc.find(id);
  if (b == tp.by_proc.end())
    return;
  auto i = tp.tasks.find(b->second);
  if (i == tp.tasks.end()) {
    tp.by_proc.erase(b);
    return;
  }
  auto& t = i->second;
  if (t.busy) {
    t.stopped = true;  // its write's end drops it
    return;
  }
  spdlog::info("{} task {} of queue '{}' withdrawn: its procedure no longer waits for it{}",
               proc_text(self, id), t.key, t.spec.queue(),
               t.worker.empty() ? "" : " (worker '" + t.worker + "' is told at its heartbeat)");
  note_ended(tp, t.key,
             ended_task{t.attempt,
                        {},
                        "its procedure no longer waits for it (aborted, "
                        "timed out or quarantined)",
                        true});
  if (t.state_lsn != 0) {
    journal_batch b;
    delete_meta(b, t.state_lsn);
    append(self, std::move(b));
  }
  auto queue = t.spec.queue();
  const bool held = !t.worker.empty();
  drop_task(self, t.key);
  if (held)
    slot_freed(self, queue);
}

void handle_task_request(executor_actor* self, const pb::TaskRequest& req, promise_t rp) {
  switch (req.op()) {
    case pb::TaskRequest::POLL:
      return handle_poll(self, req, std::move(rp));
    case pb::TaskRequest::QUEUES:
      return handle_queues(self, std::move(rp));
    case pb::TaskRequest::HEARTBEAT:
    case pb::TaskRequest::COMPLETE:
    case pb::TaskRequest::FAIL:
      return handle_report(self, req, std::move(rp));
    default:
      return reply(rp, error_reply(pb::Response::BAD_REQUEST, "unknown task operation"));
  }
}

void on_task_timer(executor_actor* self, const std::string& key, uint64_t token) {
  auto& tp = self->state.tasks;
  auto i = tp.tasks.find(key);
  if (i == tp.tasks.end() || i->second.timer != token || i->second.busy)
    return;
  auto& t = i->second;
  t.timer = 0;
  if (t.worker.empty()) {  // its retry delay passed
    make_ready(tp, t);
    return serve_polls(self);
  }
  if (wall_ms() < t.lease_until_ms)
    return arm_task_timer(self, t, t.lease_until_ms);
  ++tp.figures[t.spec.queue()].timed_out;
  const bool beat =
    t.spec.heartbeat_ms() > 0
    && t.beat_at_ms + t.spec.heartbeat_ms() < t.leased_at_ms + t.spec.start_to_close_ms();
  auto why = "worker '" + t.worker + "' "
             + (beat ? "sent no heartbeat for " + std::to_string(t.spec.heartbeat_ms()) + " ms"
                     : "did not complete it within its start-to-close of "
                         + std::to_string(t.spec.start_to_close_ms()) + " ms");
  spdlog::info("{} task {} of queue '{}': attempt {}'s lease ran out: {}",
               proc_text(self, t.proc_id), key, t.spec.queue(), t.attempt, why);
  attempt_failed(self, t, "its lease ran out: " + why, true, nullptr);
}

void on_task_poll_expired(executor_actor* self, uint64_t token) {
  auto& polls = self->state.tasks.polls;
  auto p = std::find_if(polls.begin(), polls.end(),
                        [token](const task_poll& x) { return x.token == token; });
  if (p == polls.end())
    return;
  pb::Response r;
  r.mutable_task();
  reply(p->rp, encode(r));
  polls.erase(p);
}

}  // namespace proctor::exec_detail
