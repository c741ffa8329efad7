// `proctor limits`, `proctor limits set TYPE ...`, `proctor limits clear TYPE`: per-type
// concurrency and start-rate limits (docs/flow-control.md).
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "actors/wire/json/views_json.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

/// "1s", "250ms", "5m", "2h" as milliseconds; nullopt if it is none of those.
std::optional<uint64_t> parse_period(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  uint64_t n = 1;
  if (digits > 0) {
    if (digits > 9)
      return std::nullopt;
    n = std::stoull(text.substr(0, digits));
  }
  auto unit = text.substr(digits);
  uint64_t ms = unit == "ms"  ? 1
                : unit == "s" ? 1000
                : unit == "m" ? 60'000
                : unit == "h" ? 3'600'000
                              : 0;
  if (ms == 0 || n == 0)
    return std::nullopt;
  return n * ms;
}

std::string period_ms_text(uint64_t ms) {
  if (ms % 3'600'000 == 0)
    return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0)
    return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0)
    return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

namespace {

std::string limits_text(const google::protobuf::RepeatedPtrField<pb::TypeLimitInfo>& xs) {
  if (xs.empty())
    return "no procedure types registered\n";
  char line[400];
  std::snprintf(line, sizeof line, "%-28s %-12s %-14s %-9s %8s %8s %10s\n", "TYPE", "MAX_RUNNING",
                "RATE", "SOURCE", "RUNNING", "WAITING", "THROTTLED");
  std::string out = line;
  for (const auto& l : xs) {
    std::snprintf(
      line, sizeof line, "%-28s %-12s %-14s %-9s %8u %8u %10llu\n", l.type().c_str(),
      l.max_running() > 0 ? std::to_string(l.max_running()).c_str() : "-",
      l.rate() > 0 ? (std::to_string(l.rate()) + "/" + period_ms_text(l.per_ms())).c_str() : "-",
      l.operator_set() ? "operator" : "code", l.running(), l.waiting(),
      static_cast<unsigned long long>(l.throttled()));
    out += line;
  }
  return out;
}

}  // namespace

void add_limits_command(CLI::App& app, runner* run) {
  struct args {
    bool json = false;
    std::string type;
    std::optional<uint32_t> max_running;
    std::string rate;
  };
  auto a = std::make_shared<args>();
  auto* limits = app.add_subcommand(
    "limits", "Print each procedure type's limits (steps running at once, starts per period) "
              "and load; `limits set` and `limits clear` change a type's on the live node");
  limits->add_flag("--json", a->json, "One JSON array");
  auto print = [a](const pb::Response& r) {
    std::cout << (a->json ? limits_to_json(r.limits()) + "\n" : limits_text(r.limits()));
    return exit_ok;
  };
  limits->callback([a, run, print] {
    if (!*run)  // no subcommand chose: the list
      *run = [a, print](const caller& call) {
        pb::Request req;
        req.mutable_limits();
        auto got = ask(call, req);
        if (auto* rc = std::get_if<int>(&got))
          return *rc;
        return print(std::get<pb::Response>(got));
      };
  });

  auto* set = limits->add_subcommand(
    "set", "Override a type's limits (journaled; kept across restarts); values not given keep "
           "the ones in force");
  set->add_option("type", a->type, "Procedure type")->required();
  set->add_option("--max-running", a->max_running,
                  "At most N steps of the type run at once (0: no limit)");
  set->add_option("--rate", a->rate,
                  "At most N starts per period: N/PERIOD with PERIOD like 1s, 500ms, 5m, 1h "
                  "(N/s = N/1s; 0: no limit)");
  set->add_flag("--json", a->json, "Print the list as one JSON array");
  set->callback([a, run, print] {
    if (!a->max_running && a->rate.empty())
      throw CLI::ValidationError("limits set", "give --max-running, --rate or both");
    pb::LimitsRequest lr;
    lr.set_type(a->type);
    if (a->max_running)
      lr.set_max_running(*a->max_running);
    if (!a->rate.empty()) {
      if (a->rate == "0" || a->rate == "none") {
        lr.set_rate(0);
      } else {
        auto slash = a->rate.find('/');
        std::optional<uint64_t> per;
        uint64_t n = 0;
        bool ok = slash != std::string::npos && slash > 0 && slash <= 9
                  && a->rate.find_first_not_of("0123456789") == slash;
        if (ok) {
          n = std::stoull(a->rate.substr(0, slash));
          per = parse_period(a->rate.substr(slash + 1));
        }
        if (!ok || !per)
          throw CLI::ValidationError("--rate", "'" + a->rate
                                                 + "' is not N/PERIOD (for example 100/1m, "
                                                   "5/s, 10/250ms)");
        lr.set_rate(static_cast<uint32_t>(n));
        lr.set_per_ms(*per);
      }
    }
    *run = [lr, print](const caller& call) {
      pb::Request req;
      *req.mutable_limits() = lr;
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      return print(std::get<pb::Response>(got));
    };
  });

  auto* clear =
    limits->add_subcommand("clear", "Take a type back to the limits its code declares (journaled)");
  clear->add_option("type", a->type, "Procedure type")->required();
  clear->add_flag("--json", a->json, "Print the list as one JSON array");
  clear->callback([a, run, print] {
    *run = [a, print](const caller& call) {
      pb::Request req;
      req.mutable_limits()->set_type(a->type);
      req.mutable_limits()->set_clear(true);
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      return print(std::get<pb::Response>(got));
    };
  });
}

}  // namespace proctor::cli
