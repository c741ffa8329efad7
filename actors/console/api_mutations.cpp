// The API's changes (console_api.hpp): submit, event, abort, bypass, retry, resubmit, release,
// limits. The router has checked the token; each is one request to the node, answered once
// the node answered, so once what it did is durable. A body is a JSON object whose wrong or
// unknown field is a 400 naming it.
#include <initializer_list>
#include <limits>

#include "actors/console/api_internal.hpp"
#include "actors/wire/json/status_json.hpp"
#include "actors/wire/json/views_json.hpp"

namespace proctor::api_detail {

std::optional<console_reply> priority_field(const json& o, int32_t* out) {
  if (!o.contains("priority"))
    return std::nullopt;
  const auto& p = o["priority"];
  if (!p.is_number_integer() || p.get<int64_t>() < std::numeric_limits<int32_t>::min()
      || p.get<int64_t>() > std::numeric_limits<int32_t>::max())
    return bad_field("priority", "a 32-bit integer is wanted");
  *out = p.get<int32_t>();
  return std::nullopt;
}

std::optional<console_reply> unknown_field(const json& o,
                                           std::initializer_list<const char*> known) {
  for (const auto& [key, value] : o.items()) {
    bool ok = false;
    std::string names;
    for (const char* k : known) {
      ok = ok || key == k;
      names += (names.empty() ? "" : ", ") + std::string(k);
    }
    if (!ok)
      return bad_field(key, "unknown field (the fields are " + names + ")");
  }
  return std::nullopt;
}

std::variant<std::string, console_reply> json_field(const json& o, const char* value_key,
                                                    const char* text_key, bool object) {
  const bool has_value = o.contains(value_key);
  const bool has_text = o.contains(text_key);
  if (has_value && has_text)
    return bad_field(value_key,
                     std::string("give ") + value_key + " or " + text_key + ", not both");
  if (has_value) {
    if (object && !o[value_key].is_object())
      return bad_field(value_key, "a JSON object is wanted");
    return dump(o[value_key]);
  }
  if (!has_text)
    return std::string{};
  if (!o[text_key].is_string())
    return bad_field(text_key, "a string holding JSON is wanted");
  auto text = o[text_key].get<std::string>();
  auto parsed = json::parse(text, nullptr, false);
  if (parsed.is_discarded() || (object && !parsed.is_object()))
    return bad_field(text_key, object ? "not a JSON object" : "not valid JSON");
  return text;
}

namespace {

/// {"id":ID,KEY:true} and the node's `text` when it said something.
console_reply done(uint64_t id, const char* key, const pb::Response& r) {
  if (r.has_status())
    return ok_json(status_to_json(r.status()));
  json j;
  j["id"] = id;
  j[key] = true;
  if (!r.text().empty())
    j["text"] = first_line(r.text());
  return ok_json(dump(j));
}

}  // namespace

console_reply submit(const api_call& c) {
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad = unknown_field(o, {"type", "args", "args_json", "nonce", "key", "priority"}))
    return std::move(*bad);
  pb::Request r;
  auto* s = r.mutable_submit();
  if (!o.contains("type") || !o["type"].is_string() || o["type"].get<std::string>().empty())
    return bad_field("type", "the procedure type, a non-empty string, is wanted");
  s->set_type(o["type"].get<std::string>());
  auto args = json_field(o, "args", "args_json", true);
  if (auto* e = std::get_if<console_reply>(&args))
    return std::move(*e);
  auto& args_text = std::get<std::string>(args);
  if (args_text.size() > c.opts.max_args_bytes) {
    json j;
    j["error"] = "args: " + std::to_string(args_text.size()) + " bytes of JSON, more than the "
                 + std::to_string(c.opts.max_args_bytes) + " the node takes (--max-args-bytes)";
    j["code"] = "PAYLOAD_TOO_LARGE";
    j["field"] = "args";
    return ok_json(dump(j), 413);
  }
  s->set_args_json(std::move(args_text));
  if (o.contains("nonce")) {
    if (!o["nonce"].is_string())
      return bad_field("nonce", "a string is wanted");
    s->set_nonce(o["nonce"].get<std::string>());
  }
  if (o.contains("key")) {  // placement (docs/cluster.md, "Placement by key")
    if (!o["key"].is_string())
      return bad_field("key", "a string is wanted");
    s->set_key(o["key"].get<std::string>());
  }
  if (int32_t priority = 0; o.contains("priority")) {
    if (auto bad = priority_field(o, &priority))
      return std::move(*bad);
    s->set_priority(priority);
  }
  return rendered(c, r, [](const pb::Response& resp) {
    json j;
    j["id"] = resp.id();
    auto out = ok_json(dump(j));
    out.headers.emplace_back("Location", "/api/procs/" + std::to_string(resp.id()));
    return out;
  });
}

console_reply send_event(const api_call& c) {
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad = unknown_field(o, {"key", "payload", "payload_json", "event_id"}))
    return std::move(*bad);
  if (!o.contains("key") || !o["key"].is_string() || o["key"].get<std::string>().empty())
    return bad_field("key", "the event key, a non-empty string, is wanted");
  if (o.contains("event_id") && !o["event_id"].is_string())
    return bad_field("event_id", "the event's id, a string, is wanted");
  auto payload = json_field(o, "payload", "payload_json", false);
  if (auto* e = std::get_if<console_reply>(&payload))
    return std::move(*e);
  if (std::get<std::string>(payload).size() > c.opts.max_args_bytes)
    return console_error(413, "PAYLOAD_TOO_LARGE",
                         "payload: more than the " + std::to_string(c.opts.max_args_bytes)
                           + " bytes the node takes (--max-args-bytes)");
  pb::Request r;
  r.mutable_event()->set_key(o["key"].get<std::string>());
  r.mutable_event()->set_payload_json(std::get<std::string>(payload));
  if (o.contains("event_id"))
    r.mutable_event()->set_event_id(o["event_id"].get<std::string>());
  return rendered(c, r, [&](const pb::Response& resp) {
    json j;
    j["key"] = o["key"];
    j["accepted"] = true;
    j["text"] = first_line(resp.text());
    return ok_json(dump(j));
  });
}

console_reply abort_proc(const api_call& c) {
  pb::Request r;
  r.mutable_abort()->set_id(c.id);
  return rendered(c, r, [&](const pb::Response& resp) { return done(c.id, "accepted", resp); });
}

console_reply bypass_proc(const api_call& c) {
  auto force = flag(c.req, "force");
  if (!force)
    return bad_field("force", "true or false is wanted");
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad = unknown_field(o, {"force"}))
    return std::move(*bad);
  if (o.contains("force")) {
    if (!o["force"].is_boolean())
      return bad_field("force", "true or false is wanted");
    *force = *force || o["force"].get<bool>();
  }
  pb::Request r;
  r.mutable_bypass()->set_id(c.id);
  r.mutable_bypass()->set_force(*force);
  return rendered(c, r, [&](const pb::Response& resp) { return done(c.id, "bypassed", resp); });
}

console_reply retry_proc(const api_call& c) {
  pb::Request r;
  r.mutable_retry()->set_id(c.id);
  return rendered(c, r, [&](const pb::Response& resp) { return done(c.id, "retried", resp); });
}

console_reply resubmit_proc(const api_call& c) {
  pb::Request r;
  r.mutable_resubmit()->set_id(c.id);
  return rendered(c, r, [&](const pb::Response& resp) {
    json j;
    j["id"] = resp.id();
    j["resubmitted_from"] = c.id;
    if (!resp.text().empty())
      j["text"] = first_line(resp.text());  // resubmitted already: the same id
    auto out = ok_json(dump(j));
    out.headers.emplace_back("Location", "/api/procs/" + std::to_string(resp.id()));
    return out;
  });
}

console_reply release_proc(const api_call& c) {
  pb::Request r;
  r.mutable_release()->set_id(c.id);
  return rendered(c, r, [&](const pb::Response& resp) { return done(c.id, "released", resp); });
}

console_reply set_limits(const api_call& c) {
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad = unknown_field(o, {"type", "max_running", "rate", "per_ms", "clear"}))
    return std::move(*bad);
  if (!o.contains("type") || !o["type"].is_string() || o["type"].get<std::string>().empty())
    return bad_field("type", "the procedure type, a non-empty string, is wanted");
  pb::Request r;
  auto* l = r.mutable_limits();
  l->set_type(o["type"].get<std::string>());
  if (o.contains("clear")) {
    if (!o["clear"].is_boolean())
      return bad_field("clear", "true or false is wanted");
    l->set_clear(o["clear"].get<bool>());
  }
  // Each a count from 0 (no limit) up; the node checks the bounds and says which.
  auto count = [&](const char* key, uint64_t max) -> std::optional<console_reply> {
    if (!o.contains(key))
      return std::nullopt;
    const auto& v = o[key];
    if (!v.is_number_unsigned() || v.get<uint64_t>() > max)
      return bad_field(key, "a whole number from 0 to " + std::to_string(max) + " is wanted");
    return std::nullopt;
  };
  for (auto [key, max] :
       {std::pair{"max_running", uint64_t{0xffffffff}}, std::pair{"rate", uint64_t{0xffffffff}},
        std::pair{"per_ms", uint64_t{1} << 53}})
    if (auto bad = count(key, max))
      return std::move(*bad);
  if (o.contains("max_running"))
    l->set_max_running(o["max_running"].get<uint32_t>());
  if (o.contains("rate"))
    l->set_rate(o["rate"].get<uint32_t>());
  if (o.contains("per_ms"))
    l->set_per_ms(o["per_ms"].get<uint64_t>());
  return rendered(c, r,
                  [](const pb::Response& resp) { return ok_json(limits_to_json(resp.limits())); });
}

console_reply forget_node(const api_call& c) {
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad = unknown_field(o, {"name", "confirm_lost"}))
    return std::move(*bad);
  if (!o.contains("name") || !o["name"].is_string() || o["name"].get<std::string>().empty())
    return bad_field("name", "the peer's name, a non-empty string, is wanted");
  if (!o.contains("confirm_lost") || !o["confirm_lost"].is_boolean()
      || !o["confirm_lost"].get<bool>())
    return bad_field("confirm_lost",
                     "true is wanted: forgetting a node declares everything it holds lost (the "
                     "trees with parts there undo what is elsewhere, not what it did)");
  pb::Request r;
  r.mutable_forget()->set_name(o["name"].get<std::string>());
  r.mutable_forget()->set_confirm(true);
  return rendered(c, r, [&](const pb::Response& resp) {
    json j;
    j["node"] = o["name"];
    j["forgotten"] = true;
    j["text"] = resp.text();
    return ok_json(dump(j));
  });
}

}  // namespace proctor::api_detail
