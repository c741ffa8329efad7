// The API's routes (console_api.hpp): one table, from which the router finds a request's
// handler, says 404 or 405, asks for the token, and reads the {id}; the OpenAPI document
// (docs/openapi.json) is checked against the same table (openapi_test.cpp).
#include "actors/console/console_api.hpp"

#include <charconv>
#include <string_view>

#include "actors/console/api_internal.hpp"

namespace proctor {

namespace {

using namespace api_detail;

using handler = console_reply (*)(const api_call&);

struct route {
  console_route doc;
  handler answer;
};

const std::vector<route>& routes() {
  static const std::vector<route> table = {
    {{"GET", "/api/console", false}, console_info},
    {{"GET", "/api/procs", false}, list_procs},
    {{"POST", "/api/procs", true}, submit},
    {{"GET", "/api/procs/{id}", false}, proc_status},
    {{"GET", "/api/procs/{id}/history", false}, proc_history},
    {{"POST", "/api/procs/{id}/abort", true}, abort_proc},
    {{"POST", "/api/procs/{id}/bypass", true}, bypass_proc},
    {{"POST", "/api/procs/{id}/retry", true}, retry_proc},
    {{"POST", "/api/procs/{id}/resubmit", true}, resubmit_proc},
    {{"POST", "/api/procs/{id}/release", true}, release_proc},
    {{"GET", "/api/trees/{id}", false}, proc_tree},
    {{"POST", "/api/events", true}, send_event},
    {{"POST", "/api/tasks/poll", true}, poll_tasks},
    {{"POST", "/api/tasks/{token}/heartbeat", true}, heartbeat_task},
    {{"POST", "/api/tasks/{token}/complete", true}, complete_task},
    {{"POST", "/api/tasks/{token}/fail", true}, fail_task},
    {{"GET", "/api/queues", false}, list_queues},
    {{"GET", "/api/locks", false}, locks},
    {{"GET", "/api/audit", false}, audit},
    {{"GET", "/api/limits", false}, limits},
    {{"POST", "/api/limits", true}, set_limits},
    {{"GET", "/api/nodes", false}, nodes},
    {{"GET", "/api/cluster", false}, cluster},
    {{"POST", "/api/nodes/forget", true}, forget_node},
    {{"GET", "/api/schedules", false}, list_schedules},
    {{"POST", "/api/schedules", true}, add_schedule},
    {{"POST", "/api/schedules/pause", true}, pause_schedule},
    {{"POST", "/api/schedules/resume", true}, resume_schedule},
    {{"POST", "/api/schedules/delete", true}, delete_schedule},
    {{"POST", "/api/schedules/trigger", true}, trigger_schedule},
    {{"GET", "/api/metrics", false}, metrics_summary},
    {{"GET", "/api/quarantine", false}, quarantine},
    {{"GET", "/api/openapi.json", false}, openapi_document},
    {{"GET", "/metrics", false}, metrics_text},
  };
  return table;
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    auto slash = path.find('/');
    auto seg = path.substr(0, slash);
    if (!seg.empty())
      out.push_back(seg);
    if (slash == std::string_view::npos)
      break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

/// True if `path` fits the route's `pattern`; `*id` is the text standing for {id} or
/// {token}.
bool matches(std::string_view pattern, const std::vector<std::string_view>& path,
             std::string_view* id) {
  auto want = segments(pattern);
  if (want.size() != path.size())
    return false;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == "{id}" || want[i] == "{token}")
      *id = path[i];
    else if (want[i] != path[i])
      return false;
  }
  return true;
}

/// A procedure id from a path segment: a positive decimal number.
std::optional<uint64_t> parse_id(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v == 0)
    return std::nullopt;
  return v;
}

console_reply not_allowed(const console_request& req, const std::string& allow) {
  auto r = console_error(405, "METHOD_NOT_ALLOWED",
                         req.method + " is not allowed on " + req.path + " (" + allow + ")");
  r.headers.emplace_back("Allow", allow);
  return r;
}

}  // namespace

const std::vector<console_route>& console_routes() {
  static const std::vector<console_route> docs = [] {
    std::vector<console_route> out;
    for (const auto& r : routes())
      out.push_back(r.doc);
    return out;
  }();
  return docs;
}

bool is_api_path(const std::string& path) {
  return path == "/api" || path.rfind("/api/", 0) == 0 || path == "/metrics";
}

console_reply handle_console_api(const console_request& req, const node_caller& ask, int64_t now_ms,
                                 const console_api_options& opts) {
  auto path = segments(req.path);
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  const route* found = nullptr;
  std::string_view id_text;
  std::string allow;
  for (const auto& r : routes()) {
    std::string_view id;
    if (!matches(r.doc.path, path, &id))
      continue;
    if (r.doc.method == method) {
      found = &r;
      id_text = id;
      break;
    }
    allow += (allow.empty() ? "" : ", ") + r.doc.method;
  }
  if (found == nullptr) {
    if (!allow.empty())
      return not_allowed(req, allow);
    return console_error(404, "NO_ROUTE", "no such API: " + req.method + " " + req.path);
  }
  // A change without the token is refused before anything of it is looked at.
  if (found->doc.changes)
    if (auto refused = check_change_allowed(req))
      return std::move(*refused);
  uint64_t id = 0;
  std::string token;
  if (found->doc.path.find("{token}") != std::string::npos) {
    if (id_text.empty() || id_text.size() > 200)
      return console_error(400, "BAD_REQUEST", "bad task token in the path");
    token = std::string(id_text);
  }
  if (found->doc.path.find("{id}") != std::string::npos) {
    auto parsed = parse_id(id_text);
    if (!parsed)
      return console_error(400, "BAD_REQUEST",
                           "bad procedure id '" + std::string(id_text.substr(0, 40))
                             + "': a positive integer is wanted");
    id = *parsed;
  }
  return found->answer(api_call{req, ask, opts, now_ms, id, std::move(token)});
}

}  // namespace proctor
