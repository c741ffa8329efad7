// The task queues' API for external workers (docs/workers.md): poll (a bounded long-poll),
// heartbeat, complete, fail, and the queues' figures. Each is one request to the node (wire
// TaskRequest), answered once what it did is durable. A refused report (an earlier attempt's
// token, a lease that ran out, a task that ended) is a 409 saying why; it changes nothing.
#include <algorithm>

#include "actors/console/api_internal.hpp"
#include "actors/wire/json/views_json.hpp"

namespace proctor::api_detail {

namespace {

/// `text` as JSON if it is JSON (it is: the node checked results, steps gave inputs), else
/// as a string.
json as_json(const std::string& text) {
  if (text.empty())
    return nullptr;
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded())
    return text;
  return j;
}

json task_to_json(const pb::TaskInfo& t) {
  json j;
  j["task_token"] = t.token();
  j["queue"] = t.queue();
  j["input"] = as_json(t.input_json());
  j["attempt"] = t.attempt();
  j["max_attempts"] = t.max_attempts();
  j["proc_id"] = t.proc_id();
  j["type"] = t.type();
  j["lease_until_ms"] = t.lease_until_ms();
  j["start_to_close_ms"] = t.start_to_close_ms();
  j["heartbeat_ms"] = t.heartbeat_ms();
  j["details"] = as_json(t.details_json());
  return j;
}

/// The report of `op` on the path's token, its body's fields read by `fill`.
template <class Fill, class Render>
console_reply report(const api_call& c, pb::TaskRequest::Op op,
                     std::initializer_list<const char*> known, Fill fill, Render render) {
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad = unknown_field(o, known))
    return std::move(*bad);
  pb::Request r;
  auto* t = r.mutable_task();
  t->set_op(op);
  t->set_token(c.token);
  if (auto bad = fill(o, *t))
    return std::move(*bad);
  if (t->json().size() > c.opts.max_args_bytes)
    return console_error(413, "PAYLOAD_TOO_LARGE",
                         "more than the " + std::to_string(c.opts.max_args_bytes)
                           + " bytes the node takes (--max-args-bytes)");
  return rendered(c, r, render);
}

}  // namespace

console_reply poll_tasks(const api_call& c) {
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad = unknown_field(o, {"queues", "worker", "max", "wait"}))
    return std::move(*bad);
  pb::Request r;
  auto* t = r.mutable_task();
  t->set_op(pb::TaskRequest::POLL);
  if (!o.contains("queues") || !o["queues"].is_array() || o["queues"].empty())
    return bad_field("queues", "a non-empty array of queue names is wanted");
  for (const auto& q : o["queues"]) {
    if (!q.is_string())
      return bad_field("queues", "queue names are strings");
    t->add_queues(q.get<std::string>());
  }
  if (!o.contains("worker") || !o["worker"].is_string() || o["worker"].get<std::string>().empty())
    return bad_field("worker", "the worker's name, a non-empty string, is wanted");
  t->set_worker(o["worker"].get<std::string>());
  t->set_max(1);
  if (o.contains("max")) {
    if (!o["max"].is_number_integer() || o["max"].get<int64_t>() < 1
        || o["max"].get<int64_t>() > 100)
      return bad_field("max", "an integer from 1 to 100 is wanted");
    t->set_max(o["max"].get<uint32_t>());
  }
  std::chrono::milliseconds wait{0};
  if (o.contains("wait")) {
    std::optional<std::chrono::milliseconds> d;
    if (o["wait"].is_string())
      d = parse_duration(o["wait"].get<std::string>());
    if (!d)
      return bad_field("wait", "a duration is wanted, e.g. 30s, 500ms or 1m");
    wait = std::min(*d, c.opts.max_wait);
  }
  t->set_wait_ms(static_cast<uint32_t>(wait.count()));
  std::optional<wait_slot> slot;
  if (wait.count() > 0) {
    slot.emplace(c.opts.waits);
    if (auto busy = too_many_waits(*slot, c.opts))
      return std::move(*busy);
  }
  return rendered(c, r, [](const pb::Response& answer) {
    json tasks = json::array();
    for (const auto& task : answer.task().tasks())
      tasks.push_back(task_to_json(task));
    json j;
    j["tasks"] = std::move(tasks);
    return ok_json(dump(j));
  });
}

console_reply heartbeat_task(const api_call& c) {
  return report(
    c, pb::TaskRequest::HEARTBEAT, {"details"},
    [](const json& o, pb::TaskRequest& t) -> std::optional<console_reply> {
      if (o.contains("details"))
        t.set_json(dump(o["details"]));
      return std::nullopt;
    },
    [](const pb::Response& r) {
      json j;
      j["cancel_requested"] = r.task().cancel_requested();
      return ok_json(dump(j));
    });
}

console_reply complete_task(const api_call& c) {
  return report(
    c, pb::TaskRequest::COMPLETE, {"result"},
    [](const json& o, pb::TaskRequest& t) -> std::optional<console_reply> {
      t.set_json(o.contains("result") ? dump(o["result"]) : "null");
      return std::nullopt;
    },
    [](const pb::Response& r) {
      json j;
      j["completed"] = true;
      j["text"] = first_line(r.text());
      return ok_json(dump(j));
    });
}

console_reply fail_task(const api_call& c) {
  return report(
    c, pb::TaskRequest::FAIL, {"error", "retryable"},
    [](const json& o, pb::TaskRequest& t) -> std::optional<console_reply> {
      if (!o.contains("error") || !o["error"].is_string())
        return bad_field("error", "why the attempt failed, a string, is wanted");
      t.set_error(o["error"].get<std::string>());
      t.set_retryable(true);
      if (o.contains("retryable")) {
        if (!o["retryable"].is_boolean())
          return bad_field("retryable", "true or false is wanted");
        t.set_retryable(o["retryable"].get<bool>());
      }
      return std::nullopt;
    },
    [](const pb::Response& r) {
      json j;
      j["failed"] = true;
      j["text"] = first_line(r.text());
      return ok_json(dump(j));
    });
}

console_reply list_queues(const api_call& c) {
  pb::Request r;
  r.mutable_task()->set_op(pb::TaskRequest::QUEUES);
  return rendered(c, r, [](const pb::Response& answer) {
    return ok_json(queues_to_json(answer.task().queues()));
  });
}

}  // namespace proctor::api_detail
