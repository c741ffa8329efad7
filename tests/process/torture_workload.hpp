// The torture test's workload (torture_test.cpp): the seeded mix of roots, trees, waiters,
// events and flaky procedures, the actions a round sends, and the helpers that read a node's
// procedures and logs back.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace proctor::test::torture {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using google::protobuf::Value;
using proctor::test::field;
using proctor::test::file_names;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::run_result;
using proctor::test::temp_dir;
using proctor::test::trim;
using clock_type = std::chrono::steady_clock;

inline constexpr int kills = 10;
// Round r < kills runs while the kill timer runs and ends with SIGKILL r + 1; round `kills`
// runs after the last restart. Round -1 is the batch submitted up front.
inline constexpr int final_round = kills;
// How long the final `wait`s may take in all: bounds a run in which something is stuck.
inline constexpr auto final_wait_budget = 120s;  // a bound for failures, not a pace

// -- small helpers ------------------------------------------------------------------------------

inline std::string describe_run(const run_result& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "")
         + ", stdout: " + trim(r.out) + ", stderr: " + trim(r.err);
}

inline std::string join(const std::set<std::string>& s, size_t max = 12) {
  std::string out;
  size_t n = 0;
  for (auto& x : s) {
    if (n++ == max) {
      out += "... (" + std::to_string(s.size()) + " in all)";
      break;
    }
    out += x + " ";
  }
  return "[" + out + "]";
}

inline std::set<std::string> minus(const std::set<std::string>& a, const std::set<std::string>& b) {
  std::set<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::inserter(out, out.end()));
  return out;
}

/// The seed: PROCTOR_TORTURE_SEED if set (decimal or 0x hex), else from the clock.
inline std::optional<uint64_t> torture_seed() {
  const char* s = std::getenv("PROCTOR_TORTURE_SEED");
  if (s == nullptr || *s == '\0')
    return static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count())
           ^ (static_cast<uint64_t>(::getpid()) << 40);
  char* end = nullptr;
  errno = 0;
  uint64_t v = std::strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0')
    return std::nullopt;
  return v;
}

// -- the workload -------------------------------------------------------------------------------

enum class kind { ledger, waiter, timeout, flaky };

inline const char* kind_name(kind k) {
  switch (k) {
    case kind::ledger:
      return "demo.ledger";
    case kind::waiter:
      return "demo.wait_event (event)";
    case kind::timeout:
      return "demo.wait_event (timeout)";
    case kind::flaky:
      return "demo.flaky";
  }
  return "?";
}

/// One root of the workload: what is submitted and what it must end as.
struct root_spec {
  kind k = kind::ledger;
  std::string type;
  std::string args;
  std::string nonce;
  fs::path dir;  // ledger and flaky: the root's own ledger dir
  // demo.ledger
  int steps = 0, children = 0, depth = 0, sleep_ms = 0, fail_at = -1;
  // demo.wait_event
  std::string key, payload;
  int timeout_ms = 0;
  // demo.flaky
  int crash_times = 0;

  int submit_round = -1;
  int event_round = -1;  // waiters: when their event is sent

  std::optional<uint64_t> id;
  int submit_attempts = 0;
  int event_attempts = 0;
  run_result wait;

  bool must_succeed() const { return !(k == kind::timeout || (k == kind::ledger && fail_at >= 0)); }

  /// Procedures in its tree (ledger roots).
  size_t tree_size() const {
    size_t total = 1, level = 1;
    for (int d = 0; d < depth; ++d)
      total += (level *= static_cast<size_t>(children));
    return total;
  }

  std::string what() const {
    return std::string(kind_name(k)) + " root " + (id ? std::to_string(*id) : "(no id)") + " args "
           + args + (k == kind::waiter ? " event payload " + payload : "") + " submitted in round "
           + std::to_string(submit_round)
           + (submit_attempts > 1 ? " (" + std::to_string(submit_attempts) + " tries)" : "")
           + (k == kind::waiter ? ", event in round " + std::to_string(event_round) : "")
           + (event_attempts > 1 ? " (" + std::to_string(event_attempts) + " tries)" : "");
  }
};

struct action {
  enum { submit, event } what;
  size_t root;
  int at_ms = 0;  // when in its round it runs (rounds before the last kill)
};

inline std::string random_payload(std::mt19937_64& rng, const std::string& key) {
  auto n = std::to_string(std::uniform_int_distribution<int>(0, 1000000)(rng));
  switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0:
      return R"({"key":")" + key + R"(","n":)" + n
             + R"(,"list":[1,"two",null],"nested":{"ok":true}})";
    case 1:
      return "\"payload " + n + " for " + key + "\"";
    case 2:
      return n;
    default:
      return "[" + n + R"(,"x",{"y":false}])";
  }
}

/// Builds the workload for `seed`: the roots, and per round the actions that run then.
struct workload {
  std::vector<root_spec> roots;
  std::vector<action> up_front;
  std::vector<std::vector<action>> rounds = std::vector<std::vector<action>>(final_round + 1);
  std::vector<int> kill_delays_ms;

  workload(std::mt19937_64& rng, uint64_t seed, const fs::path& ledgers) {
    auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
    auto between = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    // About half of each kind up front, the rest spread over the rounds before the last kill
    // and the final round.
    auto pick_round = [&] { return chance(0.5) ? -1 : between(0, final_round); };
    auto add = [&](kind k) -> root_spec& {
      auto& r = roots.emplace_back();
      r.k = k;
      r.nonce = "torture-" + std::to_string(seed) + "-" + std::to_string(roots.size() - 1);
      r.submit_round = pick_round();
      return r;
    };

    for (int i = 0; i < 40; ++i) {
      auto& r = add(kind::ledger);
      r.type = "demo.ledger";
      r.dir = ledgers / ("root-" + std::to_string(roots.size() - 1));
      r.steps = between(1, 5);
      if (chance(0.35)) {
        r.children = between(1, 3);
        r.depth = between(1, 2);
      }
      r.sleep_ms = between(0, 30);
      if (chance(0.3))
        r.fail_at = between(0, r.steps - 1);
      r.args = R"({"ledger_dir":")" + r.dir.string() + R"(","steps":)" + std::to_string(r.steps)
               + R"(,"step_sleep_ms":)" + std::to_string(r.sleep_ms);
      if (r.children > 0)
        r.args +=
          R"(,"children":)" + std::to_string(r.children) + R"(,"depth":)" + std::to_string(r.depth);
      if (r.fail_at >= 0)
        r.args += R"(,"fail_at":)" + std::to_string(r.fail_at);
      r.args += "}";
    }
    for (int i = 0; i < 10; ++i) {
      auto& r = add(kind::waiter);
      r.type = "demo.wait_event";
      r.key = "torture-" + std::to_string(seed) + "-event-" + std::to_string(i);
      r.payload = random_payload(rng, r.key);
      r.args = R"({"key":")" + r.key + "\"}";
      // Independent of the submit round: some events come before their waiter exists.
      r.event_round = between(0, final_round);
    }
    for (int i = 0; i < 5; ++i) {
      auto& r = add(kind::timeout);
      r.type = "demo.wait_event";
      r.key = "torture-" + std::to_string(seed) + "-never-" + std::to_string(i);
      r.timeout_ms = between(200, 2000);
      r.args = R"({"key":")" + r.key + R"(","timeout_ms":)" + std::to_string(r.timeout_ms) + "}";
    }
    for (int i = 0; i < 3; ++i) {
      auto& r = add(kind::flaky);
      r.type = "demo.flaky";
      r.dir = ledgers / ("root-" + std::to_string(roots.size() - 1));
      r.crash_times = between(1, 2);
      r.args = R"({"ledger_dir":")" + r.dir.string() + R"(","crash_times":)"
               + std::to_string(r.crash_times) + "}";
    }

    for (size_t i = 0; i < roots.size(); ++i) {
      auto& r = roots[i];
      (r.submit_round < 0 ? up_front : rounds[static_cast<size_t>(r.submit_round)])
        .push_back({action::submit, i});
      if (r.k == kind::waiter)
        rounds[static_cast<size_t>(r.event_round)].push_back({action::event, i});
    }
    std::shuffle(up_front.begin(), up_front.end(), rng);
    for (auto& round : rounds) {
      for (auto& a : round)
        a.at_ms = between(0, 650);
      std::sort(round.begin(), round.end(),
                [](const action& a, const action& b) { return a.at_ms < b.at_ms; });
    }
    for (int k = 0; k < kills; ++k)
      kill_delays_ms.push_back(between(50, 600));
  }
};

/// Runs one submit or event; true once the node acknowledged it (exit 0). A call cut off by a
/// kill (exit 3) returns false, to be retried after the restart; anything else is a problem.
inline bool perform(const node& n, const action& a, std::vector<root_spec>& roots,
                    std::vector<std::string>& problems) {
  auto& r = roots[a.root];
  if (a.what == action::submit) {
    ++r.submit_attempts;
    auto res = n.ctl({"submit", r.type, "--args-json", r.args, "--nonce", r.nonce}, 30s);
    if (res.exit_code == 3)
      return false;
    auto id = parse_id(res.out);
    if (res.exit_code != 0 || !id) {
      problems.push_back("submit of " + r.what() + ": " + describe_run(res));
      return true;  // not retried: the failure is reported
    }
    if (r.id && *r.id != *id)
      problems.push_back("submit of " + r.what() + " with its nonce again returned id "
                         + std::to_string(*id));
    r.id = id;
    return true;
  }
  ++r.event_attempts;
  auto res = n.ctl({"event", r.key, "--payload-json", r.payload}, 30s);
  if (res.exit_code == 3)
    return false;
  if (res.exit_code != 0)
    problems.push_back("event for " + r.what() + ": " + describe_run(res));
  return true;
}

/// One procedure of `list --all --json`.
struct proc_status {
  uint64_t id = 0, root_id = 0, parent_id = 0;
  std::string type, state, error;
  std::vector<uint64_t> children;
};

inline std::optional<std::vector<proc_status>> list_procedures(const node& n, bool all,
                                                               std::string* raw) {
  std::vector<std::string> cmd{"list", "--json"};
  if (all)
    cmd.push_back("--all");
  auto r = n.ctl(cmd, 30s);
  *raw = describe_run(r);
  auto v = parse_json(r.out);
  if (r.exit_code != 0 || !v || !v->has_list_value())
    return std::nullopt;
  std::vector<proc_status> out;
  for (auto& p : v->list_value().values()) {
    proc_status s;
    s.id = static_cast<uint64_t>(field(p, "id").number_value());
    s.root_id = static_cast<uint64_t>(field(p, "root_id").number_value());
    s.parent_id = static_cast<uint64_t>(field(p, "parent_id").number_value());
    s.type = field(p, "type").string_value();
    s.state = field(p, "state").string_value();
    s.error = field(p, "error").string_value();
    for (auto& c : field(p, "children").list_value().values())
      s.children.push_back(static_cast<uint64_t>(c.number_value()));
    out.push_back(std::move(s));
  }
  return out;
}

/// The node log's lines about root `id` and about starts and recoveries, for failure messages.
inline std::string log_lines_of(const node& n, uint64_t id, size_t max = 60) {
  std::ifstream in{n.log_file()};
  std::deque<std::string> lines;
  auto a = "[proc " + std::to_string(id) + " ";
  auto b = " root " + std::to_string(id) + "]";
  auto c = "[root " + std::to_string(id) + "]";
  for (std::string l; std::getline(in, l);)
    if (l.find(a) != std::string::npos || l.find(b) != std::string::npos
        || l.find(c) != std::string::npos || l.find("recovery") != std::string::npos
        || l.find("node started") != std::string::npos) {
      lines.push_back(l);
      if (lines.size() > max)
        lines.pop_front();
    }
  std::string out;
  for (auto& l : lines)
    out += l + "\n";
  return out;
}

inline bool terminal(const std::string& state) {
  return state == "SUCCESS" || state == "ROLLEDBACK";
}

}  // namespace proctor::test::torture
