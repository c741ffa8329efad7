#include "actors/wire/json/views_json.hpp"

#include <map>
#include <vector>

#include "actors/wire/json/json_writer.hpp"
#include "actors/wire/json/status_json.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

ordered_json time_field(int64_t ms) {
  return ms <= 0 ? ordered_json(nullptr) : ordered_json(utc_text(ms));
}

std::string state_field(int state) {
  return pb::ProcState_IsValid(state) ? pb::ProcState_Name(static_cast<pb::ProcState>(state))
                                      : std::string("UNKNOWN");
}

struct tree_index {
  std::map<uint64_t, const pb::ProcStatus*> by_id;
  int64_t now_ms = 0;

  ordered_json object(json_writer& w, const pb::ProcStatus& s) const {
    auto end = s.ended_at_ms() != 0 ? s.ended_at_ms() : now_ms;
    auto duration =
      s.started_at_ms() != 0 ? ordered_json(end - s.started_at_ms()) : ordered_json(nullptr);
    auto children = ordered_json::array();
    size_t done = 0;
    for (auto c : s.children()) {
      auto i = by_id.find(c);
      if (i == by_id.end() || i->second == &s)
        continue;
      children.push_back(object(w, *i->second));
      done += has_ended(*i->second) ? 1 : 0;
    }
    auto total = children.size();
    json_members j(16);
    j("id", s.id())("type", s.type())("state", state_field(s.state()))(
      "waiting_for", s.waiting_for())("node", s.node())("parent_id", s.parent_id())(
      "error", s.error())("result", result_json_value(w, s.result_json()))(
      "started_at", time_field(s.started_at_ms()))("since", time_field(s.since_ms()))(
      "ended_at", time_field(s.ended_at_ms()))("duration_ms", std::move(duration))(
      "bypassed", s.bypassed())("done", done)("total", total)("children", std::move(children));
    return j.take();
  }
};

}  // namespace

std::string tree_to_json(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs,
                         int64_t now_ms) {
  if (xs.empty())
    return "null";
  tree_index t;
  t.now_ms = now_ms;
  for (const auto& s : xs)
    t.by_id.emplace(s.id(), &s);
  json_writer w;
  return w.dump(t.object(w, xs[0]));
}

std::string history_to_json(const pb::History& h) {
  json_writer w;
  auto entries = ordered_json::array();
  int64_t previous = 0;
  for (const auto& e : h.entries()) {
    auto since =
      previous != 0 && e.at_ms() != 0 ? ordered_json(e.at_ms() - previous) : ordered_json(nullptr);
    if (e.at_ms() != 0)
      previous = e.at_ms();
    entries.push_back({{"lsn", e.lsn()},
                       {"kind", e.kind()},
                       {"state", e.state()},
                       {"state_name", e.state_name()},
                       {"next_state", e.next_state()},
                       {"next_state_name", e.next_state_name()},
                       {"attempt", e.attempt()},
                       {"at", time_field(e.at_ms())},
                       {"at_ms", e.at_ms()},
                       {"took_us", e.took_us()},
                       {"since_previous_ms", std::move(since)},
                       {"deadline", time_field(e.deadline_ms())},
                       {"deadline_ms", e.deadline_ms()},
                       {"detail", e.detail()}});
  }
  return w.dump({{"status", status_json_value(w, h.status())},
                 {"note", h.note()},
                 {"entries", std::move(entries)}});
}

std::string locks_to_json(const google::protobuf::RepeatedPtrField<pb::LockInfo>& xs) {
  auto list = ordered_json::array();
  for (const auto& l : xs)
    list.push_back({{"resource", l.resource()},
                    {"mode", l.exclusive() ? "exclusive" : "shared"},
                    {"proc_id", l.proc_id()},
                    {"root_id", l.root_id()},
                    {"held", l.held()},
                    {"blocked_by", l.blocked_by()}});
  return json_writer{}.dump(list);
}

std::string audit_to_json(const google::protobuf::RepeatedPtrField<pb::AuditEntry>& xs) {
  auto list = ordered_json::array();
  for (const auto& e : xs)
    list.push_back({{"at", time_field(e.at_ms())},
                    {"at_ms", e.at_ms()},
                    {"who", e.who()},
                    {"address", e.address()},
                    {"act", e.act()},
                    {"proc_id", e.proc_id()},
                    {"detail", e.detail()},
                    {"answered", !e.outcome().empty()},
                    {"outcome", e.outcome()},
                    {"answered_at", time_field(e.answered_at_ms())},
                    {"answered_at_ms", e.answered_at_ms()}});
  return json_writer{}.dump(list);
}

std::string queues_to_json(const google::protobuf::RepeatedPtrField<pb::QueueInfo>& xs) {
  auto list = ordered_json::array();
  for (const auto& q : xs) {
    auto workers = ordered_json::array();
    for (const auto& w : q.workers())
      workers.push_back({{"worker", w.worker()}, {"last_poll_ms", w.at_ms()}});
    ordered_json x = {{"name", q.name()},
                      {"depth", q.depth()},
                      {"leased", q.leased()},
                      {"pollers", q.pollers()},
                      {"oldest_age_ms", q.oldest_age_ms()},
                      {"dispatched", q.dispatched()},
                      {"completed", q.completed()},
                      {"failed", q.failed()},
                      {"timed_out", q.timed_out()},
                      {"throttled", q.throttled()},
                      {"workers", std::move(workers)}};
    if (q.max_leased() > 0 || q.rate() > 0)
      x["limits"] = {{"max_leased", q.max_leased()}, {"rate", q.rate()}, {"per_ms", q.per_ms()}};
    list.push_back(std::move(x));
  }
  return json_writer{}.dump(ordered_json{{"queues", std::move(list)}});
}

std::string limits_to_json(const google::protobuf::RepeatedPtrField<pb::TypeLimitInfo>& xs) {
  auto list = ordered_json::array();
  for (const auto& l : xs) {
    ordered_json x = {{"type", l.type()},
                      {"max_running", l.max_running()},
                      {"rate", l.rate()},
                      {"per_ms", l.per_ms()},
                      {"source", l.operator_set() ? "operator" : "code"},
                      {"running", l.running()},
                      {"waiting", l.waiting()},
                      {"throttled", l.throttled()},
                      {"code",
                       {{"max_running", l.code_max_running()},
                        {"rate", l.code_rate()},
                        {"per_ms", l.code_per_ms()}}}};
    if (l.operator_set())
      x["set_at_ms"] = l.set_at_ms();
    list.push_back(std::move(x));
  }
  return json_writer{}.dump(list);
}

const char* overlap_name(pb::Schedule::Overlap o) {
  switch (o) {
    case pb::Schedule::BUFFER_ONE:
      return "buffer-one";
    case pb::Schedule::ALLOW:
      return "allow";
    default:
      return "skip";
  }
}

const char* catch_up_name(pb::Schedule::CatchUp c) {
  switch (c) {
    case pb::Schedule::CATCH_UP_NONE:
      return "none";
    case pb::Schedule::CATCH_UP_ALL:
      return "all";
    default:
      return "one";
  }
}

std::string schedules_to_json(const google::protobuf::RepeatedPtrField<pb::ScheduleInfo>& xs) {
  auto list = ordered_json::array();
  auto at = [](int64_t ms) { return ms != 0 ? ordered_json(utc_text(ms)) : ordered_json(nullptr); };
  for (const auto& x : xs) {
    const auto& s = x.schedule();
    auto args = ordered_json::parse(s.args_json().empty() ? "{}" : s.args_json(), nullptr, false);
    if (args.is_discarded())
      args = s.args_json();
    auto runs = ordered_json::array();
    for (const auto& r : x.runs())
      runs.push_back({{"fire_at", at(r.fire_ms())},
                      {"fire_ms", r.fire_ms()},
                      {"id", r.proc_id()},
                      {"manual", r.manual()},
                      {"state", r.state() == pb::STATE_UNSPECIFIED
                                  ? ordered_json(nullptr)
                                  : ordered_json(pb::ProcState_Name(r.state()))},
                      {"ended", r.ended()}});
    list.push_back({{"name", s.name()},
                    {"cron", s.cron()},
                    {"zone", s.zone().empty() ? "UTC" : s.zone()},
                    {"type", s.type()},
                    {"args", std::move(args)},
                    {"priority", s.priority()},
                    {"overlap", overlap_name(s.overlap())},
                    {"catch_up", catch_up_name(s.catch_up())},
                    {"catch_up_window_ms", s.catch_up_window_ms()},
                    {"jitter_ms", s.jitter_ms()},
                    {"paused", s.paused()},
                    {"created_at", at(s.created_at_ms())},
                    {"next_fire_at", at(x.next_fire_ms())},
                    {"next_fire_ms", x.next_fire_ms()},
                    {"buffered_fire_at", at(s.buffered_ms())},
                    {"fired", s.fired()},
                    {"triggered", s.triggered()},
                    {"skipped", s.skipped()},
                    {"missed", s.missed()},
                    {"cluster", s.from_cluster()},
                    {"runs", std::move(runs)}});
  }
  return json_writer{}.dump(list);
}

}  // namespace proctor
