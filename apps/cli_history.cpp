// `proctor history ID`, `proctor locks`, `proctor bypass ID [--force]`.
#include <cstdio>
#include <iostream>
#include <memory>

#include "actors/wire/json/status_json.hpp"
#include "actors/wire/json/views_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

std::variant<pb::Response, int> ask(const caller& call, const pb::Request& req) {
  auto got = call(req, std::chrono::seconds{30});
  if (auto* r = std::get_if<pb::Response>(&got))
    if (int rc = check(*r); rc != exit_ok)
      return rc;
  return got;
}

namespace {

/// "06:40:12.345" (UTC), or "-" when not recorded.
std::string clock_text(int64_t ms) {
  if (ms <= 0)
    return "-";
  auto t = utc_text(ms);  // 2026-11-25T06:40:12Z
  char buf[8];
  std::snprintf(buf, sizeof buf, ".%03lld", static_cast<long long>(ms % 1000));
  return t.substr(11, 8) + buf;
}

std::string history_text(const pb::History& h, const palette& c) {
  const auto& s = h.status();
  std::string out = c.bold() + ("procedure " + std::to_string(s.id())) + c.reset() + " " + s.type()
                    + " " + c.state(s.state()) + pb::ProcState_Name(s.state()) + c.reset() + "\n";
  if (!h.note().empty())
    out += "note: " + h.note() + "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-8s %-12s %-10s %-7s %-9s %-9s %s\n", "LSN", "AT (UTC)",
                "KIND", "ATTEMPT", "TOOK", "+PREVIOUS", "STATE / DETAIL");
  out += c.dim() + std::string(line) + c.reset();
  int64_t previous = 0;
  for (const auto& e : h.entries()) {
    std::string gap = "-";
    if (previous != 0 && e.at_ms() != 0)
      gap = human_ms(e.at_ms() - previous);
    if (e.at_ms() != 0)
      previous = e.at_ms();
    std::string took = e.took_us() != 0 ? human_ms(static_cast<int64_t>(e.took_us() / 1000)) : "-";
    if (e.took_us() != 0 && e.took_us() < 1000)
      took = std::to_string(e.took_us()) + "us";
    std::string what = e.state_name();
    if (!e.next_state_name().empty() && e.kind() == "step")
      what += " -> " + e.next_state_name();
    if (!e.detail().empty())
      what += (what.empty() ? "" : "  ") + e.detail();
    std::snprintf(line, sizeof line, "%-8llu %-12s %-10s %-7s %-9s %-9s ",
                  static_cast<unsigned long long>(e.lsn()), clock_text(e.at_ms()).c_str(),
                  e.kind().c_str(), e.attempt() > 0 ? std::to_string(e.attempt()).c_str() : "-",
                  took.c_str(), gap.c_str());
    out += line + what + "\n";
  }
  return out;
}

std::string locks_text(const google::protobuf::RepeatedPtrField<pb::LockInfo>& xs) {
  if (xs.empty())
    return "no locks held or awaited\n";
  char line[200];
  std::snprintf(line, sizeof line, "%-8s %-10s %-10s %-10s %-30s %s\n", "", "MODE", "PROC", "ROOT",
                "RESOURCE", "BLOCKED BY");
  std::string out = line;
  for (const auto& l : xs) {
    std::snprintf(
      line, sizeof line, "%-8s %-10s %-10llu %-10llu %-30s %s\n", l.held() ? "held" : "awaited",
      l.exclusive() ? "exclusive" : "shared", static_cast<unsigned long long>(l.proc_id()),
      static_cast<unsigned long long>(l.root_id()), l.resource().c_str(), l.blocked_by().c_str());
    out += line;
  }
  return out;
}

}  // namespace

void add_history_commands(CLI::App& app, runner* run) {
  struct args {
    uint64_t id = 0;
    bool json = false;
    bool force = false;
  };
  auto a = std::make_shared<args>();

  auto* history = app.add_subcommand(
    "history", "Print a procedure's journaled life: steps (state, attempt, commit time, "
               "duration), waits, events, failures, undos, its end");
  history->add_option("id", a->id, "Procedure id")->required();
  history->add_flag("--json", a->json, "One JSON object");
  history->callback([a, run] {
    *run = [a](const caller& call) {
      pb::Request req;
      req.mutable_history()->set_id(a->id);
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      const auto& h = std::get<pb::Response>(got).history();
      std::cout << (a->json ? history_to_json(h) + "\n" : history_text(h, palette::for_stdout()));
      return exit_ok;
    };
  });

  auto* locks = app.add_subcommand("locks", "Print the resource locks held and awaited");
  locks->add_flag("--json", a->json, "One JSON array");
  locks->callback([a, run] {
    *run = [a](const caller& call) {
      pb::Request req;
      req.mutable_locks();
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      const auto& r = std::get<pb::Response>(got);
      std::cout << (a->json ? locks_to_json(r.locks()) + "\n" : locks_text(r.locks()));
      return exit_ok;
    };
  });

  auto* bypass = app.add_subcommand(
    "bypass", "Mark a stuck procedure SUCCESS without running or undoing it (its parent "
              "carries on); prints its status");
  bypass->add_option("id", a->id, "Procedure id")->required();
  bypass->add_flag("--force", a->force, "Bypass it even though it is not stuck");
  bypass->callback([a, run] {
    *run = [a](const caller& call) {
      pb::Request req;
      req.mutable_bypass()->set_id(a->id);
      req.mutable_bypass()->set_force(a->force);
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      std::cout << status_to_json(std::get<pb::Response>(got).status()) << '\n';
      return exit_ok;
    };
  });
}

}  // namespace proctor::cli
