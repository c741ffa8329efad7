// A dispatch's task (outcome::dispatch, docs/workers.md) as a procedure's Suspended record
// holds it: a call whose service names a queue ("queue:" + its name) and whose request is the
// TaskSpec. The executor queues it for external workers instead of calling a service.
#pragma once

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <proctor/journal.pb.h>
#include <proctor/outcome.hpp>

namespace proctor {

inline const std::string task_service_prefix = "queue:";

inline bool is_task_service(const std::string& service) {
  return service.compare(0, task_service_prefix.size(), task_service_prefix) == 0;
}

/// In the key of an undo's task (context::dispatch_undo): "call:<proc>:undo:<ms>:<n>".
inline const std::string undo_task_infix = ":undo:";

/// True for the key of an undo's task: its procedure does not wait itself (the actor running
/// the rollback waits for it on its behalf), so the procedure's status does not end the wait.
inline bool is_undo_task_key(const std::string& key) {
  return key.find(undo_task_infix) != std::string::npos;
}

/// The queue of a task service ("" for another service).
inline std::string task_queue_of(const std::string& service) {
  return is_task_service(service) ? service.substr(task_service_prefix.size()) : std::string{};
}

/// What a procedure waiting for a call to `service` waits for, for its status.
inline std::string call_wait_reason(const std::string& service) {
  return is_task_service(service) ? "task on queue " + task_queue_of(service)
                                  : "reply from " + service;
}

inline std::string task_service_refusal(const std::string& service) {
  return "service name '" + service + "' is reserved: names beginning with '" + task_service_prefix
         + "' are task queues, which a step reaches with dispatch(...)";
}

constexpr size_t max_task_queue_name = 200;

/// Why `queue` cannot name a task queue ("" if it can): 1 to 200 characters of letters,
/// digits and . _ - / (what a worker names in its poll and a metric label carries).
inline std::string task_queue_refusal(const std::string& queue) {
  if (queue.empty())
    return "a task queue's name is empty";
  if (queue.size() > max_task_queue_name)
    return "task queue name '" + queue.substr(0, 40) + "...' is longer than "
           + std::to_string(max_task_queue_name) + " characters";
  auto bad = std::find_if(queue.begin(), queue.end(), [](char c) {
    return !(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-'
             || c == '/');
  });
  if (bad != queue.end())
    return "task queue name '" + queue + "' has the character '" + std::string(1, *bad)
           + "': use letters, digits and . _ - /";
  return {};
}

/// Why a dispatch's input is not JSON a worker can read ("" if it is).
inline std::string task_input_refusal(const std::string& input) {
  if (input.empty())
    return {};
  google::protobuf::Value v;
  auto st = google::protobuf::util::JsonStringToMessage(input, &v);
  return st.ok() ? std::string{}
                 : "a dispatch's input is not valid JSON: " + std::string(st.message());
}

/// The defaults of a dispatch that does not set its options.
constexpr std::chrono::milliseconds default_task_start_to_close{std::chrono::minutes{5}};
constexpr uint32_t default_task_max_attempts = 3;
constexpr std::chrono::milliseconds default_task_retry_delay{std::chrono::seconds{1}};

/// The TaskSpec a dispatch journals, its defaults resolved (so a restart under other defaults
/// keeps the task as it was dispatched).
inline pb::TaskSpec task_spec_of(const outcome& out) {
  const auto& o = out.task();
  pb::TaskSpec t;
  t.set_queue(out.service());
  t.set_input_json(out.request().empty() ? "null" : out.request());
  t.set_start_to_close_ms(o.start_to_close.count() > 0 ? o.start_to_close.count()
                                                       : default_task_start_to_close.count());
  t.set_heartbeat_ms(std::max<int64_t>(0, o.heartbeat.count()));
  t.set_max_attempts(o.max_attempts > 0 ? o.max_attempts : default_task_max_attempts);
  t.set_retry_delay_ms(o.retry_delay.count() > 0 ? o.retry_delay.count()
                                                 : default_task_retry_delay.count());
  return t;
}

}  // namespace proctor
