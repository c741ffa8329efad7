// The node's HTTP/JSON API (docs/http-api.md, docs/openapi.json): the whole client contract
// of the `proctor` CLI (submit, status, wait, list, tree, history, abort, release, bypass,
// event, nodes, metrics), and the web console's reads. An HTTP request's method, path,
// query, body and credentials in, a status and a body out. Each route is one request to the
// node, the same one the CLI sends, answered only once the node answered (a change only once
// it is durable); answers are rendered by the CLI's own JSON functions
// (actors/wire/json/status_json.hpp, actors/wire/json/views_json.hpp), so `GET /api/trees/5`
// and `proctor tree 5 --json` print the same object. The routes are console_routes().
//
// Errors are {"error":"one line","code":"NOT_FOUND"} (and "field" when one field of the
// request is wrong): 400 a malformed id, parameter or body, 401 no or a wrong token, 403 a
// read-only console, 404 an unknown id or route, 405 a method a route does not take, 409
// refused by the node, 413 args larger than the node takes, 429 too many waits at once, 502
// the procedure's node did not answer, 503 this node did not answer in time or does not
// lead its replica group (X-Proctor-Leader names the one that does).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <proctor/wire.pb.h>

#include "actors/console/console_auth.hpp"
#include "actors/http/ask_executor.hpp"

namespace proctor {

/// What the API needs of an HTTP request.
struct console_request {
  std::string method;                              ///< "GET", "POST", ...
  std::string path;                                ///< "/api/procs/5/abort"
  std::multimap<std::string, std::string> params;  ///< the query, decoded
  std::string body;
  /// The request's credentials (checked for POSTs only).
  console_auth auth = console_auth::not_configured;
};

/// What goes back.
struct console_reply {
  int status = 200;
  std::string body;  ///< JSON
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type = "application/json; charset=utf-8";
};

/// What the API takes of the node's settings.
struct console_api_options {
  /// The largest args JSON a submit may carry (the node's --max-args-bytes); more is a 413.
  size_t max_args_bytes = size_t{1} << 20;
  /// The longest a `?wait=` long-poll is held; a longer one is served as this long.
  std::chrono::milliseconds max_wait{60'000};
  /// Long-polls being held now (nullptr: not counted), and how many may be at once; one
  /// more is answered 429 (each holds one of the server's threads).
  std::atomic<int>* waits = nullptr;
  int max_waits = 16;
};

/// One route: a method and a path, "{id}" standing for a procedure id.
struct console_route {
  std::string method;  ///< "GET" (HEAD too) or "POST"
  std::string path;    ///< "/api/procs/{id}/abort"
  bool changes;        ///< needs the token
};

/// Every route the API answers (docs/openapi.json documents exactly these).
const std::vector<console_route>& console_routes();

/// One request to the node (ask_executor with a bound, or a test's fake).
using node_caller = std::function<executor_answer(const pb::Request&)>;

/// True if `path` is one the API answers (under /api/, or /metrics), not a page's.
bool is_api_path(const std::string& path);

/// Answers `req`, asking the node through `ask`; `now_ms` is the wall clock (a running
/// procedure's duration in a tree).
console_reply handle_console_api(const console_request& req, const node_caller& ask, int64_t now_ms,
                                 const console_api_options& opts = {});

/// {"error":message,"code":code} with `status`.
console_reply console_error(int status, const std::string& code, const std::string& message);

}  // namespace proctor
