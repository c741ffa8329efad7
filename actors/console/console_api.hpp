// The web console's JSON API (docs/web-console.md): an HTTP request's method, path, query
// and credentials in, a status and a JSON body out. Each route is one request to the node,
// the same one the `proctor` CLI sends, and its answer is rendered by the CLI's own JSON
// functions (actors/wire/json/status_json.hpp, actors/wire/json/views_json.hpp), so `GET /api/trees/5` and
// `proctor tree 5 --json` print the same object.
//
//   GET  /api/console                 {"read_only":false,"why":"","states":["RUNNABLE",…]}
//   GET  /api/procs?state=&type=&all= list --json (roots only unless all=true)
//   GET  /api/procs/ID                status --json
//   GET  /api/procs/ID/history        history --json
//   GET  /api/trees/ID                tree --json
//   GET  /api/locks                   locks --json
//   GET  /api/nodes                   nodes --json
//   GET  /api/metrics                 console_metrics.hpp
//   POST /api/procs/ID/abort          {"id":ID,"accepted":true}; the tree rolls back
//   POST /api/procs/ID/bypass?force=  bypass --json
//
// Errors are {"error":"one line","code":"NOT_FOUND"}: 400 a malformed id or parameter,
// 401 no or a wrong token, 403 a read-only console, 404 an unknown id or route, 405 a
// method a route does not take, 409 refused by the node (an abort past the point of no
// return, a bypass of a procedure that is not stuck), 502 the procedure's node did not
// answer, 503 this node did not answer in time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actors/http/ask_executor.hpp"
#include "actors/console/console_auth.hpp"
#include <proctor/wire.pb.h>

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
};

/// One request to the node (ask_executor with a bound, or a test's fake).
using node_caller = std::function<executor_answer(const pb::Request&)>;

/// Answers `req` (its path under /api/), asking the node through `ask`; `now_ms` is the
/// wall clock (a running procedure's duration in a tree).
console_reply handle_console_api(const console_request& req, const node_caller& ask,
                                 int64_t now_ms);

/// {"error":message,"code":code} with `status`.
console_reply console_error(int status, const std::string& code, const std::string& message);

}  // namespace proctor
