// The API's recurring schedules (docs/http-api.md, "Schedules"): GET /api/schedules (?name=
// for one), POST /api/schedules (add), POST /api/schedules/{pause,resume,delete,trigger}
// with {"name":...}. Each is one ScheduleRequest to the node, answered once the node
// answered, so once the change is journaled; the node checks the cron, zone, type and args.

#include "actors/console/api_internal.hpp"
#include "actors/wire/json/views_json.hpp"

namespace proctor::api_detail {

namespace {

console_reply ask_schedule(const api_call& c, const pb::ScheduleRequest& sr) {
  pb::Request r;
  *r.mutable_schedule() = sr;
  auto got = ask_node(c.ask, r);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& resp = std::get<pb::Response>(got);
  if (sr.op() == pb::ScheduleRequest::LIST || sr.op() == pb::ScheduleRequest::SHOW)
    return ok_json(schedules_to_json(resp.schedules()));
  json j;
  j["name"] = sr.op() == pb::ScheduleRequest::ADD ? sr.spec().name() : sr.name();
  if (sr.op() == pb::ScheduleRequest::TRIGGER)
    j["id"] = resp.id();
  if (sr.op() == pb::ScheduleRequest::DELETE)
    j["deleted"] = true;
  j["text"] = first_line(resp.text());
  j["schedule"] =
    resp.schedules_size() > 0 ? json::parse(schedules_to_json(resp.schedules()))[0] : json(nullptr);
  return ok_json(dump(j));
}

/// A change naming its schedule in the body: {"name":"..."}.
console_reply by_name(const api_call& c, pb::ScheduleRequest::Op op) {
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad = unknown_field(o, {"name"}))
    return std::move(*bad);
  if (!o.contains("name") || !o["name"].is_string() || o["name"].get<std::string>().empty())
    return bad_field("name", "the schedule's name, a non-empty string, is wanted");
  pb::ScheduleRequest sr;
  sr.set_op(op);
  sr.set_name(o["name"].get<std::string>());
  return ask_schedule(c, sr);
}

}  // namespace

console_reply list_schedules(const api_call& c) {
  pb::ScheduleRequest sr;
  auto name = param(c.req, "name");
  sr.set_op(name.empty() ? pb::ScheduleRequest::LIST : pb::ScheduleRequest::SHOW);
  sr.set_name(name);
  return ask_schedule(c, sr);
}

console_reply add_schedule(const api_call& c) {
  auto got = body_object(c.req);
  if (auto* e = std::get_if<console_reply>(&got))
    return std::move(*e);
  const auto& o = std::get<json>(got);
  if (auto bad =
        unknown_field(o, {"name", "cron", "type", "args", "args_json", "priority", "overlap",
                          "catch_up", "catch_up_window_ms", "jitter_ms", "zone", "paused"}))
    return std::move(*bad);
  pb::ScheduleRequest sr;
  sr.set_op(pb::ScheduleRequest::ADD);
  auto* s = sr.mutable_spec();
  for (const char* key : {"name", "cron", "type"})
    if (!o.contains(key) || !o[key].is_string() || o[key].get<std::string>().empty())
      return bad_field(key, "a non-empty string is wanted");
  s->set_name(o["name"].get<std::string>());
  s->set_cron(o["cron"].get<std::string>());
  s->set_type(o["type"].get<std::string>());
  auto args = json_field(o, "args", "args_json", true);
  if (auto* e = std::get_if<console_reply>(&args))
    return std::move(*e);
  s->set_args_json(std::get<std::string>(args));
  if (o.contains("zone")) {
    if (!o["zone"].is_string())
      return bad_field("zone", "a string is wanted");
    s->set_zone(o["zone"].get<std::string>());
  }
  if (int32_t priority = 0; o.contains("priority")) {
    if (auto bad = priority_field(o, &priority))
      return std::move(*bad);
    s->set_priority(priority);
  }
  if (o.contains("overlap")) {
    auto v = o["overlap"].is_string() ? o["overlap"].get<std::string>() : "";
    if (v == "skip")
      s->set_overlap(pb::Schedule::SKIP);
    else if (v == "buffer-one")
      s->set_overlap(pb::Schedule::BUFFER_ONE);
    else if (v == "allow")
      s->set_overlap(pb::Schedule::ALLOW);
    else
      return bad_field("overlap", "\"skip\", \"buffer-one\" or \"allow\" is wanted");
  }
  if (o.contains("catch_up")) {
    auto v = o["catch_up"].is_string() ? o["catch_up"].get<std::string>() : "";
    if (v == "one")
      s->set_catch_up(pb::Schedule::CATCH_UP_ONE);
    else if (v == "none")
      s->set_catch_up(pb::Schedule::CATCH_UP_NONE);
    else if (v == "all")
      s->set_catch_up(pb::Schedule::CATCH_UP_ALL);
    else
      return bad_field("catch_up", "\"none\", \"one\" or \"all\" is wanted");
  }
  for (const char* key : {"catch_up_window_ms", "jitter_ms"})
    if (o.contains(key)
        && (!o[key].is_number_unsigned() || o[key].get<uint64_t>() > (uint64_t{1} << 53)))
      return bad_field(key, "a whole number of milliseconds is wanted");
  if (o.contains("catch_up_window_ms"))
    s->set_catch_up_window_ms(o["catch_up_window_ms"].get<uint64_t>());
  if (o.contains("jitter_ms"))
    s->set_jitter_ms(o["jitter_ms"].get<uint64_t>());
  if (o.contains("paused")) {
    if (!o["paused"].is_boolean())
      return bad_field("paused", "true or false is wanted");
    s->set_paused(o["paused"].get<bool>());
  }
  return ask_schedule(c, sr);
}

console_reply pause_schedule(const api_call& c) {
  return by_name(c, pb::ScheduleRequest::PAUSE);
}
console_reply resume_schedule(const api_call& c) {
  return by_name(c, pb::ScheduleRequest::RESUME);
}
console_reply delete_schedule(const api_call& c) {
  return by_name(c, pb::ScheduleRequest::DELETE);
}
console_reply trigger_schedule(const api_call& c) {
  return by_name(c, pb::ScheduleRequest::TRIGGER);
}

}  // namespace proctor::api_detail
