// Internal to the console's API (console_api.cpp routes, api_reads.cpp and api_mutations.cpp
// answer): what every route does alike: ask the node, map its codes to HTTP statuses, read
// the query and a JSON body, name the field that is wrong.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "actors/console/console_api.hpp"

namespace proctor::api_detail {

using json = nlohmann::ordered_json;

/// One request as a route's handler sees it: `id` is the path's {id} (0 when it has none),
/// `token` its {token} (a task's, api_tasks.cpp; "" when it has none).
struct api_call {
  const console_request& req;
  const node_caller& ask;
  const console_api_options& opts;
  int64_t now_ms;
  uint64_t id;
  std::string token{};
};

/// Counts a long-poll while it is held.
class wait_slot {
public:
  explicit wait_slot(std::atomic<int>* n) : n_(n) {
    if (n_)
      ++*n_;
  }
  ~wait_slot() {
    if (n_)
      --*n_;
  }
  wait_slot(const wait_slot&) = delete;
  wait_slot& operator=(const wait_slot&) = delete;
  int held() const { return n_ ? n_->load() : 0; }

private:
  std::atomic<int>* n_;
};

/// A duration: a number with a unit (ms, s, m; none: seconds), e.g. "30s", "500ms", "2m".
std::optional<std::chrono::milliseconds> parse_duration(std::string_view s);

/// A 429 when more long-polls than the node allows are held (`slot` counts this one).
std::optional<console_reply> too_many_waits(const wait_slot& slot, const console_api_options& opts);

/// JSON text of `j`; author text that is not valid UTF-8 becomes U+FFFD, as in status_json.
std::string dump(const json& j);

/// `body` (JSON) with `status`.
console_reply ok_json(std::string body, int status = 200);

std::string first_line(const std::string& text);

/// The HTTP status and {"error","code"} of a node's answer that is not OK.
console_reply node_error(const pb::Response& r);

/// The node's OK answer to `req`, or the reply that says why there is none.
std::variant<pb::Response, console_reply> ask_node(const node_caller& ask, const pb::Request& req);

/// The node's answer to `r`, rendered by `render` when it said OK; else the reply that says why.
template <class Render>
console_reply rendered(const api_call& c, const pb::Request& r, Render render) {
  auto got = ask_node(c.ask, r);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  return render(std::get<pb::Response>(got));
}

/// The last value of query parameter `key`, "" when absent.
std::string param(const console_request& req, const std::string& key);

/// A boolean parameter: absent, "" or "false"/"0" is false, "true"/"1" true, else nullopt.
std::optional<bool> flag(const console_request& req, const std::string& key);

/// 400 {"error":"FIELD: WHY","code":"BAD_REQUEST","field":FIELD}.
console_reply bad_field(const std::string& field, const std::string& why);

/// The body as a JSON object ({} when it is empty), or a 400 saying it is not one.
std::variant<json, console_reply> body_object(const console_request& req);

/// A 400 naming the first field of `o` not among `known`.
std::optional<console_reply> unknown_field(const json& o, std::initializer_list<const char*> known);

/// A JSON text from `o[value_key]` (any JSON) or `o[text_key]` (a string holding JSON), at
/// most one of them; "" when neither. `object`: it must be a JSON object.
std::variant<std::string, console_reply> json_field(const json& o, const char* value_key,
                                                    const char* text_key, bool object);

/// Sets `*out` from `o["priority"]` when present; a 400 unless it is a 32-bit integer.
std::optional<console_reply> priority_field(const json& o, int32_t* out);

/// Refuses a change unless the request carries the node's token (401, 403).
std::optional<console_reply> check_change_allowed(const console_request& req);

// -- the routes' handlers ---------------------------------------------------------------------

console_reply console_info(const api_call& c);
console_reply list_procs(const api_call& c);
console_reply proc_status(const api_call& c);  ///< with ?wait=: a bounded long-poll
console_reply proc_history(const api_call& c);
console_reply proc_tree(const api_call& c);
console_reply locks(const api_call& c);
console_reply audit(const api_call& c);
console_reply limits(const api_call& c);
console_reply nodes(const api_call& c);
/// `proctor cluster nodes --json` (docs/cluster-group.md).
console_reply cluster(const api_call& c);
console_reply metrics_summary(const api_call& c);
console_reply metrics_text(const api_call& c);
console_reply quarantine(const api_call& c);
console_reply openapi_document(const api_call& c);

console_reply submit(const api_call& c);
console_reply send_event(const api_call& c);
console_reply abort_proc(const api_call& c);
console_reply bypass_proc(const api_call& c);
console_reply retry_proc(const api_call& c);
console_reply resubmit_proc(const api_call& c);
console_reply release_proc(const api_call& c);
console_reply set_limits(const api_call& c);
console_reply forget_node(const api_call& c);

// Task queues for external workers (api_tasks.cpp, docs/workers.md).
console_reply poll_tasks(const api_call& c);  ///< a bounded long-poll
console_reply heartbeat_task(const api_call& c);
console_reply complete_task(const api_call& c);
console_reply fail_task(const api_call& c);
console_reply list_queues(const api_call& c);

// Recurring schedules (api_schedules.cpp).
console_reply list_schedules(const api_call& c);  ///< ?name=: that one only
console_reply add_schedule(const api_call& c);
console_reply pause_schedule(const api_call& c);
console_reply resume_schedule(const api_call& c);
console_reply delete_schedule(const api_call& c);
console_reply trigger_schedule(const api_call& c);

}  // namespace proctor::api_detail
