#include "actors/console/console_api.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <iterator>
#include <optional>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "actors/console/console_metrics.hpp"
#include "actors/wire/json/status_json.hpp"
#include "actors/wire/json/views_json.hpp"

namespace proctor {

namespace {

using json = nlohmann::ordered_json;

/// JSON text of `j`; author text that is not valid UTF-8 becomes U+FFFD, as in status_json.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

console_reply ok_json(std::string body) {
  console_reply r;
  r.body = std::move(body);
  return r;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

/// The HTTP status of a node's answer that is not OK.
console_reply node_error(const pb::Response& r) {
  int status = 500;
  switch (r.code()) {
    case pb::Response::BAD_REQUEST:
    case pb::Response::UNKNOWN_TYPE:
      status = 400;
      break;
    case pb::Response::NOT_FOUND:
      status = 404;
      break;
    case pb::Response::REFUSED:
      status = 409;
      break;
    case pb::Response::TIMEOUT:
      status = 504;
      break;
    case pb::Response::UNREACHABLE:
      status = 502;
      break;
    default:
      status = 500;
      break;
  }
  auto text = r.error().empty() ? pb::Response::Code_Name(r.code()) : first_line(r.error());
  return console_error(status, pb::Response::Code_Name(r.code()), text);
}

/// The node's OK answer to `req`, or the reply that says why there is none.
std::variant<pb::Response, console_reply> ask_node(const node_caller& ask, const pb::Request& req) {
  auto a = ask(req);
  if (!a.response)
    return console_error(503, "UNAVAILABLE", a.failure);
  if (a.response->code() != pb::Response::OK)
    return node_error(*a.response);
  return std::move(*a.response);
}

/// A procedure id from a path segment: a positive decimal number.
std::optional<uint64_t> parse_id(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v == 0)
    return std::nullopt;
  return v;
}

console_reply bad_id(std::string_view s) {
  return console_error(400, "BAD_REQUEST",
                       "bad procedure id '" + std::string(s.substr(0, 40))
                         + "': a positive integer is wanted");
}

/// The last value of query parameter `key`, "" when absent.
std::string param(const console_request& req, const std::string& key) {
  auto range = req.params.equal_range(key);
  return range.first == range.second ? std::string{} : std::prev(range.second)->second;
}

/// A boolean parameter: absent, "" or "false"/"0" is false, "true"/"1" true.
std::optional<bool> flag(const console_request& req, const std::string& key) {
  auto v = param(req, key);
  if (v.empty() || v == "false" || v == "0")
    return false;
  if (v == "true" || v == "1")
    return true;
  return std::nullopt;
}

console_reply bad_flag(const std::string& key) {
  return console_error(400, "BAD_REQUEST", key + " wants true or false");
}

json state_names() {
  json names = json::array();
  for (int s = pb::ProcState_MIN + 1; s <= pb::ProcState_MAX; ++s)
    names.push_back(pb::ProcState_Name(static_cast<pb::ProcState>(s)));
  return names;
}

console_reply list_procs(const console_request& req, const node_caller& ask) {
  pb::Request r;
  auto* list = r.mutable_list();
  auto state_text = param(req, "state");
  if (!state_text.empty()) {
    std::transform(state_text.begin(), state_text.end(), state_text.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    pb::ProcState s = pb::STATE_UNSPECIFIED;
    if (!pb::ProcState_Parse(state_text, &s) || s == pb::STATE_UNSPECIFIED)
      return console_error(400, "BAD_REQUEST",
                           "unknown state '" + param(req, "state") + "' (one of "
                             + state_names().dump() + ")");
    list->set_state(s);
  }
  auto all = flag(req, "all");
  if (!all)
    return bad_flag("all");
  auto local = flag(req, "local");
  if (!local)
    return bad_flag("local");
  list->set_all(*all);
  list->set_local(*local);
  auto got = ask_node(ask, r);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  auto& resp = std::get<pb::Response>(got);
  auto type = param(req, "type");
  if (!type.empty()) {
    google::protobuf::RepeatedPtrField<pb::ProcStatus> kept;
    for (auto& s : *resp.mutable_list())
      if (s.type() == type)
        kept.Add(std::move(s));
    resp.mutable_list()->Swap(&kept);
  }
  auto out = ok_json(list_to_json(resp.list()));
  // A cluster-wide list that lacks some node's procedures says so (as the CLI's stderr does).
  std::string missing;
  for (const auto& u : resp.unreachable())
    missing += (missing.empty() ? "" : "; ") + first_line(u);
  if (!missing.empty())
    out.headers.emplace_back("X-Proctor-Unreachable", missing);
  return out;
}

console_reply console_info(const console_request& req) {
  json j;
  j["read_only"] = req.auth == console_auth::not_configured;
  j["why"] = req.auth == console_auth::not_configured
               ? "read-only: the node was started without --http-token or --http-token-file"
               : "";
  j["states"] = state_names();
  return ok_json(dump(j));
}

/// Refuses a change unless the request carries the node's token.
std::optional<console_reply> check_change_allowed(const console_request& req) {
  switch (req.auth) {
    case console_auth::granted:
      return std::nullopt;
    case console_auth::not_configured:
      return console_error(403, "READ_ONLY",
                           "read-only console: the node was started without --http-token "
                           "or --http-token-file");
    case console_auth::missing: {
      auto r = console_error(401, "UNAUTHORIZED",
                             "this needs the console's token (Authorization: Bearer TOKEN)");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
    case console_auth::wrong: {
      auto r = console_error(401, "UNAUTHORIZED", "wrong token");
      r.headers.emplace_back("WWW-Authenticate", "Bearer error=\"invalid_token\"");
      return r;
    }
  }
  return console_error(401, "UNAUTHORIZED", "not allowed");
}

/// `force` of a bypass: the query's, or a JSON body's {"force":true}.
std::variant<bool, console_reply> bypass_force(const console_request& req) {
  auto force = flag(req, "force");
  if (!force)
    return bad_flag("force");
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos)
    return *force;
  auto body = json::parse(req.body, nullptr, false);
  if (body.is_discarded() || !body.is_object())
    return console_error(400, "BAD_REQUEST",
                         "the body must be a JSON object, e.g. {\"force\":true}");
  if (body.contains("force")) {
    if (!body["force"].is_boolean())
      return bad_flag("force");
    *force = *force || body["force"].get<bool>();
  }
  return *force;
}

console_reply change(const console_request& req, const node_caller& ask, uint64_t id,
                     const std::string& what) {
  pb::Request r;
  if (what == "abort") {
    r.mutable_abort()->set_id(id);
  } else {
    auto force = bypass_force(req);
    if (auto* e = std::get_if<console_reply>(&force))
      return std::move(*e);
    r.mutable_bypass()->set_id(id);
    r.mutable_bypass()->set_force(std::get<bool>(force));
  }
  auto got = ask_node(ask, r);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& resp = std::get<pb::Response>(got);
  if (resp.has_status())
    return ok_json(status_to_json(resp.status()));
  json j;
  j["id"] = id;
  j["accepted"] = true;
  return ok_json(dump(j));
}

/// GET routes that take no id.
std::optional<console_reply> plain_get(const std::string& what, const console_request& req,
                                       const node_caller& ask, int64_t now_ms) {
  pb::Request r;
  if (what == "console")
    return console_info(req);
  if (what == "procs")
    return list_procs(req, ask);
  if (what == "locks")
    r.mutable_locks();
  else if (what == "nodes")
    r.mutable_nodes();
  else if (what == "metrics")
    r.mutable_metrics();
  else
    return std::nullopt;
  auto got = ask_node(ask, r);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& resp = std::get<pb::Response>(got);
  if (what == "locks")
    return ok_json(locks_to_json(resp.locks()));
  if (what == "nodes")
    return ok_json(nodes_to_json(resp.nodes()));
  return ok_json(metrics_to_json(resp.text(), now_ms));
}

/// GET routes about one procedure.
console_reply id_get(const std::string& what, uint64_t id, const node_caller& ask, int64_t now_ms) {
  pb::Request r;
  if (what == "status")
    r.mutable_status()->set_id(id);
  else if (what == "history")
    r.mutable_history()->set_id(id);
  else
    r.mutable_tree()->set_id(id);
  auto got = ask_node(ask, r);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& resp = std::get<pb::Response>(got);
  if (what == "status")
    return ok_json(status_to_json(resp.status()));
  if (what == "history")
    return ok_json(history_to_json(resp.history()));
  return ok_json(tree_to_json(resp.list(), now_ms));
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

console_reply not_allowed(const console_request& req, const char* allow) {
  auto r = console_error(405, "METHOD_NOT_ALLOWED",
                         req.method + " is not allowed on " + req.path + " (" + allow + ")");
  r.headers.emplace_back("Allow", allow);
  return r;
}

}  // namespace

console_reply console_error(int status, const std::string& code, const std::string& message) {
  json j;
  j["error"] = message;
  j["code"] = code;
  console_reply r;
  r.status = status;
  r.body = dump(j);
  return r;
}

console_reply handle_console_api(const console_request& req, const node_caller& ask,
                                 int64_t now_ms) {
  auto seg = segments(req.path);
  auto no_route = [&] {
    return console_error(404, "NO_ROUTE", "no such API: " + req.method + " " + req.path);
  };
  if (seg.size() < 2 || seg[0] != "api")
    return no_route();
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  std::string what{seg[1]};
  if (seg.size() == 2) {
    if (!get) {
      bool known = what == "console" || what == "procs" || what == "locks" || what == "nodes"
                   || what == "metrics";
      return known ? not_allowed(req, "GET") : no_route();
    }
    if (auto r = plain_get(what, req, ask, now_ms))
      return std::move(*r);
    return no_route();
  }
  if ((what != "procs" && what != "trees") || seg.size() > 4)
    return no_route();
  std::string sub = seg.size() == 4 ? std::string{seg[3]} : "";
  if (what == "trees" && !sub.empty())
    return no_route();
  if (!sub.empty() && sub != "history" && sub != "abort" && sub != "bypass")
    return no_route();
  const bool changes = sub == "abort" || sub == "bypass";
  if (changes ? !post : !get)
    return not_allowed(req, changes ? "POST" : "GET");
  if (changes)
    if (auto refused = check_change_allowed(req))
      return std::move(*refused);
  auto id = parse_id(seg[2]);
  if (!id)
    return bad_id(seg[2]);
  if (changes)
    return change(req, ask, *id, sub);
  return id_get(what == "trees" ? "tree" : sub.empty() ? "status" : sub, *id, ask, now_ms);
}

}  // namespace proctor
