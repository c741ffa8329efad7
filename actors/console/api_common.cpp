// What every route of the API does alike (api_internal.hpp).
#include <charconv>
#include <iterator>

#include "actors/console/api_internal.hpp"

namespace proctor {

console_reply console_error(int status, const std::string& code, const std::string& message) {
  api_detail::json j;
  j["error"] = message;
  j["code"] = code;
  console_reply r;
  r.status = status;
  r.body = api_detail::dump(j);
  return r;
}

namespace api_detail {

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

console_reply ok_json(std::string body, int status) {
  console_reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

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
    case pb::Response::NOT_LEADER:
      status = 503;
      break;
    case pb::Response::PERMISSION_DENIED:
      status = 403;
      break;
    default:
      status = 500;
      break;
  }
  auto text = r.error().empty() ? pb::Response::Code_Name(r.code()) : first_line(r.error());
  auto out = console_error(status, pb::Response::Code_Name(r.code()), text);
  // The leader's HTTP address, what an HTTP client can use; its client address apart.
  if (r.code() == pb::Response::NOT_LEADER && !r.leader_http().empty())
    out.headers.emplace_back("X-Proctor-Leader", r.leader_http());
  if (r.code() == pb::Response::NOT_LEADER && !r.leader().empty())
    out.headers.emplace_back("X-Proctor-Leader-Client", r.leader());
  return out;
}

std::variant<pb::Response, console_reply> ask_node(const node_caller& ask, const pb::Request& req) {
  auto a = ask(req);
  if (!a.response)
    return console_error(503, "UNAVAILABLE", a.failure);
  if (a.response->code() != pb::Response::OK)
    return node_error(*a.response);
  return std::move(*a.response);
}

std::string param(const console_request& req, const std::string& key) {
  auto range = req.params.equal_range(key);
  return range.first == range.second ? std::string{} : std::prev(range.second)->second;
}

std::optional<bool> flag(const console_request& req, const std::string& key) {
  auto v = param(req, key);
  if (v.empty() || v == "false" || v == "0")
    return false;
  if (v == "true" || v == "1")
    return true;
  return std::nullopt;
}

console_reply bad_field(const std::string& field, const std::string& why) {
  json j;
  j["error"] = field + ": " + why;
  j["code"] = "BAD_REQUEST";
  j["field"] = field;
  return ok_json(dump(j), 400);
}

std::variant<json, console_reply> body_object(const console_request& req) {
  if (req.body.find_first_not_of(" \t\r\n") == std::string::npos)
    return json::object();
  auto body = json::parse(req.body, nullptr, false);
  if (body.is_discarded())
    return bad_field("body", "not valid JSON");
  if (!body.is_object())
    return bad_field("body", "a JSON object is wanted");
  return body;
}

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

/// A duration: a number with a unit (ms, s, m; none: seconds), e.g. "30s", "500ms", "2m".
std::optional<std::chrono::milliseconds> parse_duration(std::string_view s) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc{} || end == s.data() || n > 86'400'000)
    return std::nullopt;
  std::string_view unit(end, static_cast<size_t>(s.data() + s.size() - end));
  if (unit == "ms")
    return std::chrono::milliseconds{n};
  if (unit.empty() || unit == "s")
    return std::chrono::milliseconds{n * 1000};
  if (unit == "m")
    return std::chrono::milliseconds{n * 60'000};
  return std::nullopt;
}

std::optional<console_reply> too_many_waits(const wait_slot& slot,
                                            const console_api_options& opts) {
  if (slot.held() <= opts.max_waits)
    return std::nullopt;
  auto r = console_error(429, "TOO_MANY_WAITS",
                         std::to_string(opts.max_waits)
                           + " waits are held already; wait again in a moment");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace api_detail
}  // namespace proctor
