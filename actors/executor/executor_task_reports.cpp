// A task's reports (docs/workers.md, tasks_part.hpp): a worker's heartbeat, complete and fail,
// and what ends an attempt: its result or failure journaled as the event that ends the task, or
// its next attempt queued. Each is answered once durable; a report that may not act (an earlier
// attempt's token, a lease that ran out, a task that ended) is refused and changes nothing; one
// that comes while another write of its task is under way waits for it (task_entry::deferred).
#include <charconv>
#include <optional>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include "actors/base/task_spec.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/internal/task_ops.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

bool parse_token(const std::string& token, std::string* key, uint32_t* attempt) {
  auto dot = token.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == token.size() || token.size() > 200)
    return false;
  auto [end, ec] = std::from_chars(token.data() + dot + 1, token.data() + token.size(), *attempt);
  if (ec != std::errc{} || end != token.data() + token.size() || *attempt == 0)
    return false;
  *key = call_key_prefix + token.substr(0, dot);
  return true;
}

namespace {

/// A complete's result as journaled: its JSON, "null" for none.
std::string result_of(const std::string& json) {
  return json.empty() ? "null" : json;
}

/// {"error":TEXT}.
std::string error_json(const std::string& text) {
  google::protobuf::Struct s;
  (*s.mutable_fields())["error"].set_string_value(text);
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(s, &out).ok())
    return R"x({"error":"(not valid UTF-8)"})x";
  return out;
}

/// Why `token` may not act on its task now ("" if it may), and `*t` the task.
std::string check_lease(executor_actor* self, const std::string& key, uint32_t attempt,
                        task_entry** t) {
  auto& tp = self->state.tasks;
  auto i = tp.tasks.find(key);
  if (i == tp.tasks.end())
    return "no open task";
  *t = &i->second;
  auto& e = i->second;
  if (e.attempt != attempt)
    return "the token is attempt " + std::to_string(attempt) + "'s; the task is at attempt "
           + std::to_string(e.attempt) + " (attempt " + std::to_string(attempt)
           + " failed or its lease ran out)";
  if (e.worker.empty())
    return "attempt " + std::to_string(attempt) + " is not leased (its lease ran out)";
  if (wall_ms() >= e.lease_until_ms)
    return "attempt " + std::to_string(attempt) + "'s lease ran out";
  return {};
}

/// Ends task `t` with `result` (or, `failure` set, fails its wait): journals the event that
/// carries it, then answers `rp` (if any) and wakes its procedure.
void end_task(executor_actor* self, task_entry& t, std::string result, std::string failure,
              promise_t* rp) {
  t.busy = true;
  t.ending = failure.empty() ? result : failure;
  if (rp != nullptr)
    t.end_waiters.push_back(std::move(*rp));
  disarm_task_timer(self, t);
  unready(self->state.tasks, t);
  pb::JournalRecord rec;
  auto* e = rec.mutable_event();
  e->set_event_key(t.key);
  // A failure's payload says why, for the wait's on_timeout state (ctx.task_result()).
  e->set_payload_json(failure.empty() ? result_of(result) : error_json(failure));
  e->set_failure(failure);
  e->set_arrived_at_ms(wall_ms());
  journal_batch b;
  delete_meta(b, t.state_lsn);
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  append(self, std::move(b),
         [self, key = t.key, payload = e->payload_json(), failure, at = e->arrived_at_ms(),
          attempt = t.attempt](uint64_t lsn) mutable {
           auto& tp = self->state.tasks;
           auto i = tp.tasks.find(key);
           std::vector<promise_t> waiters;
           std::vector<std::pair<pb::TaskRequest, promise_t>> deferred;
           uint64_t id = 0;
           std::string queue;
           if (i != tp.tasks.end()) {
             waiters = std::move(i->second.end_waiters);
             deferred = std::move(i->second.deferred);
             id = i->second.proc_id;
             queue = i->second.spec.queue();
             drop_task(self, key);
             slot_freed(self, queue);
           }
           auto& fig = tp.figures[queue];
           ++(failure.empty() ? fig.completed : fig.failed);
           note_ended(
             tp, key,
             ended_task{attempt, failure.empty() ? payload : std::string{}, failure, false});
           pending_event ev{lsn, payload, at, failure};
           auto woke = wake_event_waiters(self, key, ev);
           if (woke.empty())
             keep_event(self, key, std::move(ev));  // its procedure waits again soon
           if (failure.empty())
             spdlog::info("{} task {} of queue '{}' completed (attempt {})", proc_text(self, id),
                          key, queue, attempt);
           else
             spdlog::info("{} task {} of queue '{}' failed: {}", proc_text(self, id), key, queue,
                          failure);
           pb::Response r;
           r.set_text(failure.empty() ? "completed" : "failed: " + failure);
           auto bytes = encode(r);
           for (auto& w : waiters)
             reply(w, bytes);
           replay(self, std::move(deferred));  // answered as the task's end says
         });
}

/// Queues task `t` again for attempt `attempt`, after its retry delay (answers `rp`, if any).
void requeue(executor_actor* self, task_entry& t, const std::string& why, promise_t* rp) {
  t.busy = true;
  disarm_task_timer(self, t);
  const auto next = t.attempt + 1;
  journal_batch b;
  delete_meta(b, t.state_lsn);
  auto rec = state_record(t, next, "", t.details);
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  std::optional<promise_t> answer;
  if (rp != nullptr)
    answer = std::move(*rp);
  append(self, std::move(b), [self, key = t.key, next, why, answer](uint64_t lsn) mutable {
    auto& tp = self->state.tasks;
    auto i = tp.tasks.find(key);
    if (i == tp.tasks.end())
      return;
    auto& t = i->second;
    t.busy = false;
    t.state_lsn = lsn;
    auto reports = std::move(t.deferred);
    if (t.stopped) {
      task_stopped(self, t.proc_id);
      return replay(self, std::move(reports));
    }
    t.attempt = next;
    const bool held = !t.worker.empty();
    t.worker.clear();
    t.leased_at_ms = t.lease_until_ms = 0;
    t.not_before_ms = wall_ms() + t.spec.retry_delay_ms();
    spdlog::info("{} task {} of queue '{}' queued again as attempt {} of {} in {} ms: {}",
                 proc_text(self, t.proc_id), key, t.spec.queue(), next, t.spec.max_attempts(),
                 t.spec.retry_delay_ms(), why);
    arm_task_timer(self, t, t.not_before_ms);
    auto queue = t.spec.queue();
    if (answer) {
      pb::Response r;
      r.set_text("queued again as attempt " + std::to_string(next) + " of "
                 + std::to_string(t.spec.max_attempts()));
      reply(*answer, encode(r));
    }
    replay(self, std::move(reports));  // an earlier attempt's token: refused now
    if (held)
      slot_freed(self, queue);  // a poll may take its place
  });
}

}  // namespace

/// The reports that waited for a write of task `key` to end, answered now.
void replay(executor_actor* self, std::vector<std::pair<pb::TaskRequest, promise_t>> reports) {
  for (auto& [req, rp] : reports)
    handle_report(self, req, std::move(rp));
}

/// Attempt `t.attempt` is over without a result (`why`): the next one, or the task fails.
void attempt_failed(executor_actor* self, task_entry& t, const std::string& why, bool retryable,
                    promise_t* rp) {
  if (retryable && t.attempt < t.spec.max_attempts())
    return requeue(self, t, why, rp);
  auto text = "task on queue '" + t.spec.queue() + "' failed on attempt "
              + std::to_string(t.attempt) + " of " + std::to_string(t.spec.max_attempts())
              + (retryable ? "" : " (not retryable)") + ": " + why;
  end_task(self, t, {}, std::move(text), rp);
}

void handle_report(executor_actor* self, const pb::TaskRequest& req, promise_t rp) {
  auto& tp = self->state.tasks;
  std::string key;
  uint32_t attempt = 0;
  if (!parse_token(req.token(), &key, &attempt))
    return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                 "malformed task token '" + req.token().substr(0, 60) + "'"));
  const bool beat = req.op() == pb::TaskRequest::HEARTBEAT;
  if (auto e = tp.ended.find(key); e != tp.ended.end()) {
    const auto& end = e->second;
    if (beat && end.cancelled) {
      pb::Response r;
      r.mutable_task()->set_cancel_requested(true);
      return reply(rp, encode(r));
    }
    // The same complete again answers as the first did; anything else changes nothing.
    if (req.op() == pb::TaskRequest::COMPLETE && end.why.empty() && end.attempt == attempt
        && end.result == result_of(req.json())) {
      pb::Response r;
      r.set_text("completed (already)");
      return reply(rp, encode(r));
    }
    return reply(rp, error_reply(pb::Response::REFUSED,
                                 "task " + req.token() + " has ended"
                                   + (end.why.empty() ? " (completed on attempt "
                                                          + std::to_string(end.attempt) + ")"
                                                      : ": " + end.why)
                                   + "; nothing was changed"));
  }
  task_entry* t = nullptr;
  auto why = check_lease(self, key, attempt, &t);
  if (t != nullptr && why.empty() && !still_waits(self, *t) && !t->busy) {
    task_stopped(self, t->proc_id);
    return handle_report(self, req, std::move(rp));  // now ended: cancelled
  }
  if (t != nullptr && t->busy && why.empty()) {
    if (req.op() == pb::TaskRequest::COMPLETE && !t->ending.empty()
        && t->ending == result_of(req.json())) {
      t->end_waiters.push_back(std::move(rp));  // answered as the first
      return;
    }
    t->deferred.emplace_back(req, std::move(rp));  // answered once its write ended
    return;
  }
  if (!why.empty())
    return reply(rp, error_reply(pb::Response::REFUSED,
                                 "task " + req.token() + ": " + why + "; nothing was changed"));
  switch (req.op()) {
    case pb::TaskRequest::HEARTBEAT: {
      t->busy = true;
      journal_batch b;
      delete_meta(b, t->state_lsn);
      // A heartbeat without details keeps the last ones.
      auto details = req.json().empty() ? t->details : req.json();
      auto rec = state_record(*t, t->attempt, t->worker, details);
      b.entries.push_back(make_entry(journal_keys::meta_root, rec));
      return append(self, std::move(b), [self, key, details, rp](uint64_t lsn) mutable {
        auto& tp = self->state.tasks;
        auto i = tp.tasks.find(key);
        pb::Response r;
        if (i == tp.tasks.end()) {
          r.mutable_task()->set_cancel_requested(true);
          return reply(rp, encode(r));
        }
        auto& t = i->second;
        t.busy = false;
        t.state_lsn = lsn;
        t.details = details;
        auto reports = std::move(t.deferred);
        if (t.stopped) {
          task_stopped(self, t.proc_id);
          r.mutable_task()->set_cancel_requested(true);
        } else {
          t.beat_at_ms = wall_ms();
          t.lease_until_ms = lease_end(t);
          arm_task_timer(self, t, t.lease_until_ms);
          r.mutable_task()->set_cancel_requested(false);
        }
        reply(rp, encode(r));
        replay(self, std::move(reports));
      });
    }
    case pb::TaskRequest::COMPLETE:
      if (!req.json().empty()) {
        // A result the procedure can parse: JSON, checked here rather than at its delivery.
        google::protobuf::Value v;
        if (!google::protobuf::util::JsonStringToMessage(req.json(), &v).ok())
          return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                       "the result is not valid JSON; nothing was changed"));
      }
      return end_task(self, *t, req.json(), {}, &rp);
    case pb::TaskRequest::FAIL:
      return attempt_failed(self, *t,
                            "worker '" + t->worker
                              + "': " + (req.error().empty() ? "(no reason given)" : req.error()),
                            req.retryable(), &rp);
    default:
      return reply(rp, error_reply(pb::Response::BAD_REQUEST, "not a task report"));
  }
}

}  // namespace proctor::exec_detail
