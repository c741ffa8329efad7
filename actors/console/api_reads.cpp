// The API's reads (console_api.hpp): each one request to the node, rendered as the CLI's
// --json renders it; a status with ?wait= is a long-poll with a bound.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <tuple>

#include "actors/console/api_internal.hpp"
#include "actors/console/console_metrics.hpp"
#include "actors/console/embedded_files.hpp"
#include "actors/wire/json/cluster_json.hpp"
#include "actors/wire/json/status_json.hpp"
#include "actors/wire/json/views_json.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor::api_detail {

namespace {

json state_names() {
  json names = json::array();
  for (int s = pb::ProcState_MIN + 1; s <= pb::ProcState_MAX; ++s)
    names.push_back(pb::ProcState_Name(static_cast<pb::ProcState>(s)));
  return names;
}

/// The node's OK answer to a request `fill` makes, rendered by `render`.
template <class Fill, class Render>
console_reply read(const api_call& c, Fill fill, Render render) {
  pb::Request r;
  fill(r);
  auto got = ask_node(c.ask, r);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  return render(std::get<pb::Response>(got));
}

/// A count parameter: absent is `fallback`, else a decimal number up to 10^9.
std::optional<size_t> count(const console_request& req, const std::string& key, size_t fallback) {
  auto v = param(req, key);
  if (v.empty())
    return fallback;
  size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size() || n > 1'000'000'000)
    return std::nullopt;
  return n;
}

/// The console's view of a list (docs/web-console.md): `order=newest` puts the last started
/// first (ties: the higher id), `offset` and `limit` cut a page of it.
struct list_view {
  bool newest = false;
  bool paged = false;
  size_t offset = 0;
  size_t limit = 0;
};

std::variant<list_view, console_reply> read_list_view(const console_request& req) {
  list_view v;
  auto order = param(req, "order");
  if (!order.empty() && order != "id" && order != "newest")
    return bad_field("order", "id or newest is wanted");
  v.newest = order == "newest";
  auto offset = count(req, "offset", 0);
  if (!offset)
    return bad_field("offset", "a number is wanted");
  auto limit = count(req, "limit", std::numeric_limits<size_t>::max());
  if (!limit)
    return bad_field("limit", "a number is wanted");
  v.paged = !param(req, "offset").empty() || !param(req, "limit").empty();
  v.offset = *offset;
  v.limit = *limit;
  return v;
}

/// Orders and cuts `list`; a page says in X-Proctor-Total how many there are in all.
void apply_list_view(const list_view& v, google::protobuf::RepeatedPtrField<pb::ProcStatus>& list,
                     console_reply& out) {
  if (v.newest)
    std::sort(list.begin(), list.end(), [](const pb::ProcStatus& a, const pb::ProcStatus& b) {
      return std::make_tuple(a.started_at_ms(), a.id())
             > std::make_tuple(b.started_at_ms(), b.id());
    });
  if (!v.paged)
    return;
  const auto total = static_cast<size_t>(list.size());
  out.headers.emplace_back("X-Proctor-Total", std::to_string(total));
  const auto from = std::min(v.offset, total);
  const auto to = from + std::min(v.limit, total - from);
  list.DeleteSubrange(static_cast<int>(to), static_cast<int>(total - to));
  list.DeleteSubrange(0, static_cast<int>(from));
}

}  // namespace

console_reply console_info(const api_call& c) {
  const bool read_only = c.req.auth == console_auth::not_configured;
  json j;
  j["read_only"] = read_only;
  j["why"] =
    read_only ? "read-only: the node was started without --http-token or --http-token-file" : "";
  j["states"] = state_names();
  return ok_json(dump(j));
}

console_reply list_procs(const api_call& c) {
  pb::Request r;
  auto* list = r.mutable_list();
  auto state_text = param(c.req, "state");
  if (!state_text.empty()) {
    std::transform(state_text.begin(), state_text.end(), state_text.begin(),
                   [](unsigned char ch) { return std::toupper(ch); });
    pb::ProcState s = pb::STATE_UNSPECIFIED;
    if (!pb::ProcState_Parse(state_text, &s) || s == pb::STATE_UNSPECIFIED)
      return console_error(400, "BAD_REQUEST",
                           "unknown state '" + param(c.req, "state") + "' (one of "
                             + state_names().dump() + ")");
    list->set_state(s);
  }
  for (const char* key : {"all", "local"})
    if (!flag(c.req, key))
      return bad_field(key, "true or false is wanted");
  list->set_all(*flag(c.req, "all"));
  list->set_local(*flag(c.req, "local"));
  auto view = read_list_view(c.req);
  if (auto* e = std::get_if<console_reply>(&view))
    return std::move(*e);
  auto got = ask_node(c.ask, r);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  auto& resp = std::get<pb::Response>(got);
  auto type = param(c.req, "type");
  if (!type.empty()) {
    google::protobuf::RepeatedPtrField<pb::ProcStatus> kept;
    for (auto& s : *resp.mutable_list())
      if (s.type() == type)
        kept.Add(std::move(s));
    resp.mutable_list()->Swap(&kept);
  }
  console_reply out;
  apply_list_view(std::get<list_view>(view), *resp.mutable_list(), out);
  out.body = list_to_json(resp.list());
  // A cluster-wide list that lacks some node's procedures says so (as the CLI's stderr does).
  std::string missing;
  for (const auto& u : resp.unreachable())
    missing += (missing.empty() ? "" : "; ") + first_line(u);
  if (!missing.empty())
    out.headers.emplace_back("X-Proctor-Unreachable", missing);
  return out;
}

console_reply proc_status(const api_call& c) {
  auto wait_text = param(c.req, "wait");
  std::chrono::milliseconds wait{0};
  if (!wait_text.empty()) {
    auto d = parse_duration(wait_text);
    if (!d)
      return bad_field("wait", "a duration is wanted, e.g. 30s, 500ms or 2m");
    wait = std::min(*d, c.opts.max_wait);
  }
  if (wait.count() == 0)
    return read(
      c, [&](pb::Request& r) { r.mutable_status()->set_id(c.id); },
      [](const pb::Response& r) { return ok_json(status_to_json(r.status())); });
  wait_slot slot(c.opts.waits);
  if (auto busy = too_many_waits(slot, c.opts))
    return std::move(*busy);
  pb::Request r;
  r.mutable_wait()->set_id(c.id);
  r.mutable_wait()->set_timeout_ms(static_cast<uint64_t>(wait.count()));
  auto a = c.ask(r);
  if (!a.response)
    return console_error(503, "UNAVAILABLE", a.failure);
  // Ended: 200 and its final status. Still running when the bound passed: 202 and its
  // status then (ask again).
  if (a.response->code() == pb::Response::OK)
    return ok_json(status_to_json(a.response->status()));
  if (a.response->code() == pb::Response::TIMEOUT && a.response->has_status())
    return ok_json(status_to_json(a.response->status()), 202);
  return node_error(*a.response);
}

console_reply proc_history(const api_call& c) {
  return read(
    c, [&](pb::Request& r) { r.mutable_history()->set_id(c.id); },
    [](const pb::Response& r) { return ok_json(history_to_json(r.history())); });
}

console_reply proc_tree(const api_call& c) {
  return read(
    c, [&](pb::Request& r) { r.mutable_tree()->set_id(c.id); },
    [&](const pb::Response& r) { return ok_json(tree_to_json(r.list(), c.now_ms)); });
}

namespace {

/// A period back for `since`: a duration (parse_duration: ms, s, m) or whole hours or days
/// ("2h", "7d"; a wait's duration takes neither).
std::optional<int64_t> period_back_ms(std::string_view s) {
  if (auto d = parse_duration(s))
    return d->count();
  if (s.size() < 2 || (s.back() != 'h' && s.back() != 'd'))
    return std::nullopt;
  uint64_t n = 0;
  auto digits = s.substr(0, s.size() - 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc{} || end != digits.data() + digits.size() || n > 100'000)
    return std::nullopt;
  return static_cast<int64_t>(n) * (s.back() == 'h' ? 3'600'000 : 86'400'000);
}

}  // namespace

/// GET /api/audit?since=&limit=: `proctor audit --json` (docs/security.md, "Audit"). `since`
/// is a time (2026-12-01T10:00:00Z) or a period back (15m).
console_reply audit(const api_call& c) {
  int64_t since_ms = 0;
  if (auto since = param(c.req, "since"); !since.empty()) {
    if (auto at = parse_utc(since))
      since_ms = *at;
    else if (auto back = period_back_ms(since))
      since_ms = c.now_ms - *back;
    else
      return bad_field("since", "a time (2026-12-01T10:00:00Z) or a period back (15m) is wanted");
  }
  auto limit = count(c.req, "limit", 0);
  if (!limit || *limit > std::numeric_limits<uint32_t>::max())
    return bad_field("limit", "a number is wanted");
  return read(
    c,
    [&](pb::Request& r) {
      r.mutable_audit()->set_since_ms(since_ms);
      r.mutable_audit()->set_limit(static_cast<uint32_t>(*limit));
    },
    [](const pb::Response& r) { return ok_json(audit_to_json(r.audit())); });
}

console_reply locks(const api_call& c) {
  return read(
    c, [](pb::Request& r) { r.mutable_locks(); },
    [](const pb::Response& r) { return ok_json(locks_to_json(r.locks())); });
}

console_reply limits(const api_call& c) {
  return read(
    c, [](pb::Request& r) { r.mutable_limits(); },
    [](const pb::Response& r) { return ok_json(limits_to_json(r.limits())); });
}

console_reply nodes(const api_call& c) {
  return read(
    c, [](pb::Request& r) { r.mutable_nodes(); },
    [](const pb::Response& r) { return ok_json(nodes_to_json(r.nodes())); });
}

console_reply cluster(const api_call& c) {
  return read(
    c, [](pb::Request& r) { r.mutable_cluster()->set_op(pb::ClusterRequest::SHOW); },
    [](const pb::Response& r) { return ok_json(cluster_to_json(r.cluster())); });
}

console_reply quarantine(const api_call& c) {
  return read(
    c, [](pb::Request& r) { r.mutable_quarantine(); },
    [](const pb::Response& r) { return ok_json(quarantine_to_json(r.quarantined())); });
}

console_reply metrics_summary(const api_call& c) {
  return read(
    c, [](pb::Request& r) { r.mutable_metrics(); },
    [&](const pb::Response& r) { return ok_json(metrics_to_json(r.text(), c.now_ms)); });
}

console_reply metrics_text(const api_call& c) {
  return read(
    c, [](pb::Request& r) { r.mutable_metrics(); },
    [](const pb::Response& r) {
      auto out = ok_json(r.text());
      out.content_type = "text/plain; version=0.0.4; charset=utf-8";
      return out;
    });
}

console_reply openapi_document(const api_call&) {
  for (const auto& f : api_files())
    if (f.name == "openapi.json")
      return ok_json(std::string(f.data));
  return console_error(500, "INTERNAL", "the OpenAPI document was not built into this binary");
}

}  // namespace proctor::api_detail
