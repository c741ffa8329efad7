// `proctor schedule add|list|show|pause|resume|delete|trigger` (docs/flow-control.md,
// "Recurring schedules"). The node checks everything about a schedule (its cron, zone, type
// and args) and journals a change before it answers; a refusal is one line on stderr and
// exit code 1. Option values the CLI reads itself (--overlap, --catch-up, durations) are
// refused the same way.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "actors/wire/json/views_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

namespace {

std::string when(int64_t ms) {
  return ms != 0 ? utc_text(ms) : "-";
}

std::string run_state(const pb::ScheduleRunInfo& r) {
  if (r.state() == pb::STATE_UNSPECIFIED)
    return "released";
  return pb::ProcState_Name(r.state());
}

std::string list_text(const google::protobuf::RepeatedPtrField<pb::ScheduleInfo>& xs) {
  if (xs.empty())
    return "no schedules\n";
  char line[600];
  std::snprintf(line, sizeof line, "%-20s %-18s %-15s %-22s %-7s %-21s %6s %7s %6s  %s\n", "NAME",
                "CRON", "ZONE", "TYPE", "STATE", "NEXT", "FIRED", "SKIPPED", "MISSED", "LAST RUN");
  std::string out = line;
  for (const auto& x : xs) {
    const auto& s = x.schedule();
    std::string last = "-";
    if (x.runs_size() > 0) {
      const auto& r = x.runs(x.runs_size() - 1);
      last = std::to_string(r.proc_id()) + " " + run_state(r);
    }
    std::snprintf(line, sizeof line, "%-20s %-18s %-15s %-22s %-7s %-21s %6llu %7llu %6llu  %s\n",
                  s.name().c_str(), s.cron().c_str(), s.zone().empty() ? "UTC" : s.zone().c_str(),
                  s.type().c_str(), s.paused() ? "paused" : "active",
                  when(x.next_fire_ms()).c_str(), static_cast<unsigned long long>(s.fired()),
                  static_cast<unsigned long long>(s.skipped()),
                  static_cast<unsigned long long>(s.missed()), last.c_str());
    out += line;
  }
  return out;
}

std::string show_text(const pb::ScheduleInfo& x) {
  const auto& s = x.schedule();
  std::string out;
  auto row = [&](const char* k, const std::string& v) { out += std::string(k) + ": " + v + "\n"; };
  row("name", s.name());
  row("cron", s.cron() + " (" + (s.zone().empty() ? "UTC" : s.zone()) + ")");
  row("type", s.type());
  row("args", s.args_json().empty() ? "{}" : s.args_json());
  row("priority", std::to_string(s.priority()));
  row("overlap", overlap_name(s.overlap()));
  row("catch-up",
      std::string(catch_up_name(s.catch_up())) + " within "
        + period_ms_text(s.catch_up_window_ms() != 0 ? s.catch_up_window_ms() : 3'600'000));
  row("jitter", s.jitter_ms() != 0 ? period_ms_text(s.jitter_ms()) : "none");
  row("state", s.paused() ? "paused" : "active");
  row("created", when(s.created_at_ms()));
  row("next fire", when(x.next_fire_ms()));
  if (s.buffered_ms() != 0)
    row("held", when(s.buffered_ms()) + " (buffer-one: submitted when the running one ends)");
  row("fired", std::to_string(s.fired()));
  row("skipped", std::to_string(s.skipped()));
  row("missed", std::to_string(s.missed()));
  row("triggered", std::to_string(s.triggered()));
  out += "recent runs (oldest first):\n";
  if (x.runs_size() == 0)
    out += "  none\n";
  for (const auto& r : x.runs())
    out += "  " + std::to_string(r.proc_id()) + "  " + run_state(r) + "  for " + when(r.fire_ms())
           + (r.manual() ? "  (triggered)" : "") + "\n";
  return out;
}

}  // namespace

void add_schedule_command(CLI::App& app, runner* run) {
  struct args {
    bool json = false;
    std::string name, cron, type, args_json, zone, overlap = "skip", catch_up = "one",
                                                   window = "1h", jitter;
    int32_t priority = 0;
    bool paused = false;
  };
  auto a = std::make_shared<args>();
  auto* sched = app.add_subcommand(
    "schedule", "Recurring schedules: each fire time of a cron expression submits a root "
                "(docs/flow-control.md, \"Recurring schedules\")");
  sched->require_subcommand(1);
  auto print = [a](const pb::Response& r) {
    if (a->json)
      std::cout << schedules_to_json(r.schedules()) << '\n';
    else if (r.schedules_size() == 1 && !a->name.empty())
      std::cout << show_text(r.schedules(0));
    else
      std::cout << list_text(r.schedules());
    return exit_ok;
  };
  /// One request; prints the answer (`text` on stderr first, when there is one).
  auto send = [print](pb::ScheduleRequest sr) {
    return [sr, print](const caller& call) {
      pb::Request req;
      *req.mutable_schedule() = sr;
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      const auto& r = std::get<pb::Response>(got);
      if (!r.text().empty())
        std::cerr << "schedule "
                  << (sr.op() == pb::ScheduleRequest::ADD ? sr.spec().name() : sr.name()) << ": "
                  << r.text() << '\n';
      if (sr.op() == pb::ScheduleRequest::TRIGGER) {
        std::cout << r.id() << '\n';
        return exit_ok;
      }
      if (sr.op() == pb::ScheduleRequest::DELETE)
        return exit_ok;
      return print(r);
    };
  };

  auto* list =
    sched->add_subcommand("list", "Each schedule: its next fire time, counts and last run");
  list->add_flag("--json", a->json, "One JSON array");
  list->callback([run, send] {
    pb::ScheduleRequest sr;
    sr.set_op(pb::ScheduleRequest::LIST);
    *run = send(sr);
  });

  auto* show =
    sched->add_subcommand("show", "One schedule in full, with its recent runs and their states");
  show->add_option("name", a->name, "Schedule name")->required();
  show->add_flag("--json", a->json, "A JSON array of one");
  show->callback([a, run, send] {
    pb::ScheduleRequest sr;
    sr.set_op(pb::ScheduleRequest::SHOW);
    sr.set_name(a->name);
    *run = send(sr);
  });

  auto* add = sched->add_subcommand(
    "add", "Add a schedule (journaled before it is answered): each fire time of --cron submits "
           "a root of TYPE with --args-json");
  add->add_option("name", a->name, "Schedule name: letters, digits, '.', '_', '-'")->required();
  add->add_option("type", a->type, "Procedure type of the roots it submits")->required();
  add
    ->add_option("--cron", a->cron,
                 "Cron expression in --zone's local time: 5 fields (minute hour day-of-month "
                 "month day-of-week), or 6 with seconds first; @hourly, @daily, ...")
    ->required();
  add->add_option("--args-json", a->args_json, "The roots' args, a JSON object");
  add->add_option("--priority", a->priority, "The roots' priority");
  add->add_option("--overlap", a->overlap,
                  "While the previous run has not ended: skip (default), buffer-one, allow");
  add->add_option("--catch-up", a->catch_up,
                  "Fire times missed while the node was down: none, one (default: the latest), "
                  "all (at most 100)");
  add->add_option("--catch-up-window", a->window,
                  "How far back catch-up looks (default 1h; at most 30 days)");
  add->add_option("--jitter", a->jitter,
                  "Delay each fire time by up to this (10s, 1m, ...), the same for a fire time "
                  "every time");
  add->add_option("--zone", a->zone,
                  "Time zone the cron's fields are read in: UTC (default) or an IANA name such "
                  "as Europe/Berlin. A time a daylight-saving change skips fires when the gap "
                  "ends; a time it repeats fires once, the first time");
  add->add_flag("--paused", a->paused, "Add it paused");
  add->add_flag("--json", a->json, "Print the schedule as JSON");
  add->callback([a, run, send] {
    *run = [a, send](const caller& call) {
      auto fail = [](const std::string& why) {
        std::cerr << "error: " << why << '\n';
        return exit_error;
      };
      pb::ScheduleRequest sr;
      sr.set_op(pb::ScheduleRequest::ADD);
      auto* s = sr.mutable_spec();
      s->set_name(a->name);
      s->set_cron(a->cron);
      s->set_zone(a->zone);
      s->set_type(a->type);
      s->set_args_json(a->args_json);
      s->set_priority(a->priority);
      s->set_paused(a->paused);
      if (a->overlap == "skip")
        s->set_overlap(pb::Schedule::SKIP);
      else if (a->overlap == "buffer-one")
        s->set_overlap(pb::Schedule::BUFFER_ONE);
      else if (a->overlap == "allow")
        s->set_overlap(pb::Schedule::ALLOW);
      else
        return fail("--overlap '" + a->overlap + "': skip, buffer-one or allow");
      if (a->catch_up == "one")
        s->set_catch_up(pb::Schedule::CATCH_UP_ONE);
      else if (a->catch_up == "none")
        s->set_catch_up(pb::Schedule::CATCH_UP_NONE);
      else if (a->catch_up == "all")
        s->set_catch_up(pb::Schedule::CATCH_UP_ALL);
      else
        return fail("--catch-up '" + a->catch_up + "': none, one or all");
      auto window = parse_period(a->window);
      if (!window)
        return fail("--catch-up-window '" + a->window + "': a period like 30m, 1h, 90s");
      s->set_catch_up_window_ms(*window);
      if (!a->jitter.empty() && a->jitter != "0") {
        auto j = parse_period(a->jitter);
        if (!j)
          return fail("--jitter '" + a->jitter + "': a period like 10s, 1m, 500ms");
        s->set_jitter_ms(*j);
      }
      return send(sr)(call);
    };
  });

  for (auto [verb, op, help] :
       {std::tuple{"pause", pb::ScheduleRequest::PAUSE,
                   "Stop firing (journaled); its fire times until resume are skipped"},
        std::tuple{"resume", pb::ScheduleRequest::RESUME,
                   "Fire again, from the next fire time after now (journaled)"},
        std::tuple{"delete", pb::ScheduleRequest::DELETE,
                   "Delete the schedule (journaled); its runs go on"},
        std::tuple{"trigger", pb::ScheduleRequest::TRIGGER,
                   "Submit a run now (whether paused or a run is going on); prints its id"}}) {
    auto* c = sched->add_subcommand(verb, help);
    c->add_option("name", a->name, "Schedule name")->required();
    if (op != pb::ScheduleRequest::TRIGGER && op != pb::ScheduleRequest::DELETE)
      c->add_flag("--json", a->json, "Print the schedule as JSON");
    c->callback([a, run, send, op = op] {
      pb::ScheduleRequest sr;
      sr.set_op(op);
      sr.set_name(a->name);
      *run = send(sr);
    });
  }
}

}  // namespace proctor::cli
