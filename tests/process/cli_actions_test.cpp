// The operator CLI's contract (docs/command-line.md) against a real node: abort, release,
// metrics (CLI and HTTP), many clients at once, and a graceful SIGTERM.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "actors/wire/json/status_json.hpp"
#include "tests/process/cli_fixture.hpp"
#include "tests/process/process_harness.hpp"

namespace {

// fs, the chrono literals, Value, clock_type and the harness's names: cli_fixture.hpp.
using namespace proctor::test::cli_support;

// -- abort and release ----------------------------------------------------------------------------

TEST(cli, abort_of_a_waiting_procedure_rolls_it_back) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.wait_event", R"({"key":"cli-abort"})");
  ASSERT_TRUE(f.reaches(id, "WAITING")) << f.n.log_tail();
  auto a = f.n.ctl({"abort", std::to_string(id)});
  EXPECT_EQ(a.exit_code, 0) << describe(a);
  EXPECT_EQ(a.out, "abort of procedure " + std::to_string(id) + " accepted: its tree rolls back\n")
    << describe(a);
  auto w = f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"});
  EXPECT_EQ(w.exit_code, 1) << describe(w);
  auto v = parse_json(w.out);
  ASSERT_TRUE(v) << describe(w);
  EXPECT_EQ(state_of(*v), "ROLLEDBACK");
  EXPECT_NE(field(*v, "error").string_value().find("abort"), std::string::npos) << w.out;
  // The event now finds no one (and is kept for the next procedure that suspends on it).
  auto e = f.n.ctl({"event", "cli-abort"});
  EXPECT_EQ(e.exit_code, 0) << describe(e);
  EXPECT_NE(e.out.find("(none waits now)"), std::string::npos) << e.out;
  f.n.kill();
}

TEST(cli, abort_of_a_child_says_its_tree_rolls_back) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  // Two timers an hour away: the tree waits, a child's abort fails it.
  auto far = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch() + std::chrono::hours{1})
               .count();
  auto root = f.submit("demo.timers", R"({"count":2,"first_at_ms":)" + std::to_string(far) + "}");
  std::optional<Value> s;
  ASSERT_TRUE(eventually(
    [&] {
      s = f.status(root);
      return s && state_of(*s) == "WAITING"
             && field(*s, "children").list_value().values_size() == 2;
    },
    30s))
    << f.n.log_tail();
  auto child = static_cast<uint64_t>(field(*s, "children").list_value().values(0).number_value());
  ASSERT_TRUE(f.reaches(child, "WAITING_TIMEOUT")) << f.n.log_tail();
  auto a = f.n.ctl({"abort", std::to_string(child)});
  EXPECT_EQ(a.exit_code, 0) << describe(a);
  EXPECT_EQ(a.out, "abort of procedure " + std::to_string(child) + " accepted: its tree (root "
                     + std::to_string(root) + ") rolls back\n")
    << describe(a);
  EXPECT_EQ(a.err, "") << describe(a);
  auto w = f.n.ctl({"wait", std::to_string(root), "--timeout-s", "30"});
  EXPECT_EQ(w.exit_code, 1) << describe(w);
  // Once ended, an abort is refused as before (exit 1, one line).
  auto again = f.n.ctl({"abort", std::to_string(child)});
  expect_one_line_error(again);
  f.n.kill();
}

TEST(cli, abort_of_an_unknown_id_is_an_error) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto r = f.n.ctl({"abort", "987654"});
  expect_one_line_error(r);
  EXPECT_NE(r.err.find("987654"), std::string::npos) << r.err;
  f.n.kill();
}

TEST(cli, release_removes_a_finished_root_and_refuses_a_running_one) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto done = f.submit("demo.ledger", f.ledger_args());
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(done), "--timeout-s", "30"}).exit_code, 0);
  auto running = f.submit("demo.wait_event", R"({"key":"cli-release"})");
  ASSERT_TRUE(f.reaches(running, "WAITING"));

  auto r = f.n.ctl({"release", std::to_string(done)});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  auto s = f.n.ctl({"status", std::to_string(done)});
  expect_one_line_error(s);
  EXPECT_NE(s.err.find("no procedure"), std::string::npos) << s.err;
  auto l = f.n.ctl({"list", "--all", "--json"});
  EXPECT_EQ(l.out.find("\"id\":" + std::to_string(done) + ","), std::string::npos) << l.out;
  // Releasing it again: it is gone.
  expect_one_line_error(f.n.ctl({"release", std::to_string(done)}));

  auto refused = f.n.ctl({"release", std::to_string(running)});
  expect_one_line_error(refused);
  auto still = f.status(running);
  ASSERT_TRUE(still) << "a refused release removed the procedure";
  EXPECT_EQ(state_of(*still), "WAITING");

  // A release survives a restart: the released tree does not come back.
  f.n.kill();
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  expect_one_line_error(f.n.ctl({"status", std::to_string(done)}));
  ASSERT_TRUE(f.status(running));
  f.n.kill();
}

// -- metrics --------------------------------------------------------------------------------------

/// Checks that `text` is Prometheus text: comments, or `name{labels} value` samples.
void expect_prometheus_text(const std::string& text) {
  static const std::regex sample{
    R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? (-?[0-9.eE+-]+|[+-]?Inf|NaN)$)"};
  static const std::regex comment{R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .*$)"};
  size_t samples = 0;
  for (auto& l : lines(text)) {
    if (std::regex_match(l, comment))
      continue;
    EXPECT_TRUE(std::regex_match(l, sample)) << "not a Prometheus sample: '" << l << "'";
    ++samples;
  }
  EXPECT_GT(samples, 0u);
}

/// The value of the sample named exactly `name` (with labels) in `text`.
std::optional<double> sample_value(const std::string& text, const std::string& name) {
  for (auto& l : lines(text))
    if (l.rfind(name + " ", 0) == 0)
      return std::stod(l.substr(name.size() + 1));
  return std::nullopt;
}

TEST(cli, metrics_prints_prometheus_text_with_per_type_counters) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  for (int i = 0; i < 2; ++i) {
    auto id = f.submit("demo.ledger", f.ledger_args());
    ASSERT_EQ(f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"}).exit_code, 0);
  }
  auto rb = f.submit("demo.ledger", f.ledger_args(R"(,"fail_at":0)"));
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(rb), "--timeout-s", "30"}).exit_code, 1);
  auto r = f.n.ctl({"metrics"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err, "");
  expect_prometheus_text(r.out);
  EXPECT_EQ(sample_value(r.out, R"(proctor_procedures_succeeded_total{type="demo.ledger"})"), 2.0)
    << r.out;
  EXPECT_EQ(sample_value(r.out, R"(proctor_procedures_rolledback_total{type="demo.ledger"})"), 1.0)
    << r.out;
  EXPECT_EQ(sample_value(r.out, R"(proctor_procedures_submitted_total{type="demo.ledger"})"), 3.0)
    << r.out;
  f.n.kill();
}

TEST(cli, metrics_histogram_counts_finished_procedures) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.ledger", f.ledger_args());
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"}).exit_code, 0);
  auto r = f.n.ctl({"metrics"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  // One procedure ended, so the submit-to-end histogram has one observation.
  EXPECT_EQ(sample_value(r.out, R"(proctor_procedure_runtime_seconds_count{type="demo.ledger"})"),
            1.0)
    << r.out;
  EXPECT_EQ(sample_value(
              r.out, R"(proctor_procedure_runtime_seconds_bucket{type="demo.ledger",le="+Inf"})"),
            1.0)
    << r.out;
  f.n.kill();
}

/// `text` without the samples of proctor_actor_messages_total: every read of the metrics is
/// itself messages to the executor, the scheduler and the journal (their stats), so two reads
/// never agree on them.
std::string without_message_counts(const std::string& text) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("proctor_actor_messages_total{", 0) != 0)
      out += line + "\n";
  return trim(out);
}

TEST(cli, metrics_over_http_serves_the_same_text) {
  auto metrics_port = free_port();
  fixture f{{"--metrics", "127.0.0.1:" + std::to_string(metrics_port)}};
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.ledger", f.ledger_args());
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"}).exit_code, 0);

  std::optional<std::pair<int, std::string>> got;
  ASSERT_TRUE(
    eventually([&] { return (got = http_get(metrics_port, "/metrics")).has_value(); }, 10s, 50ms))
    << "no HTTP answer on 127.0.0.1:" << metrics_port << "\n"
    << f.n.log_tail();
  EXPECT_EQ(got->first, 200);
  // The finished tree's records are collected a moment after its end (a journal write that
  // moves the journal's counters), so two reads agree once the node is quiet: compare until
  // they do, within a bound, rather than hoping no write falls between them.
  run_result cli;
  eventually(
    [&] {
      cli = f.n.ctl({"metrics"});
      auto again = http_get(metrics_port, "/metrics");
      if (again)
        got = again;
      return cli.exit_code == 0
             && without_message_counts(got->second) == without_message_counts(cli.out);
    },
    30s, 100ms);
  ASSERT_EQ(cli.exit_code, 0) << describe(cli);
  expect_prometheus_text(got->second);
  EXPECT_EQ(without_message_counts(got->second), without_message_counts(cli.out));
  EXPECT_GT(
    sample_value(got->second, R"(proctor_actor_messages_total{actor="procedure"})").value_or(0), 0)
    << got->second;
  EXPECT_EQ(sample_value(got->second, R"(proctor_procedures_succeeded_total{type="demo.ledger"})"),
            1.0)
    << got->second;
  auto missing = http_get(metrics_port, "/no-such-page");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->first, 404);
  f.n.kill();
}

// -- many clients ---------------------------------------------------------------------------------

// A submit without --nonce gets a random one from the CLI (so that running it again after an
// unclear end cannot create the procedure twice): two such submits are two procedures, and a
// repeated --nonce is one.
TEST(cli, submits_without_a_nonce_are_distinct_and_a_repeated_nonce_is_one_procedure) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto a = f.submit("demo.noop", R"({"steps":1})");
  auto b = f.submit("demo.noop", R"({"steps":1})");
  EXPECT_NE(a, b);
  auto once = [&] {
    auto r = f.n.ctl({"submit", "demo.noop", "--args-json", R"({"steps":1})", "--nonce", "n-1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return parse_id(r.out);
  };
  auto c = once();
  ASSERT_TRUE(c);
  EXPECT_EQ(once(), c);
  EXPECT_NE(*c, a);
  EXPECT_NE(*c, b);
  f.n.kill();
}

// Four operators polling one node at once: every call must get its answer, the first time (the
// CLI sends nothing twice). Under CAF's remoting about one answer in 1,500 was lost here, when
// a closed connection's fd went to the next CLI; the client protocol loses none.
TEST(cli, concurrent_cli_calls_all_get_an_answer) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.noop", R"({"steps":1})");
  constexpr size_t calls = 2000;
  std::vector<run_result> results(calls);
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < calls;)
        results[i] = f.n.ctl({i % 2 == 0 ? "status" : "wait", std::to_string(id)}, 20s);
    });
  for (auto& t : pool)
    t.join();
  size_t unanswered = 0;
  for (auto& r : results)
    unanswered += r.exit_code != 0;
  EXPECT_EQ(unanswered, 0u) << "of " << calls << " status and wait calls (4 at a time) got no "
                            << "answer within 20 s";
  f.n.kill();
}

// -- SIGTERM --------------------------------------------------------------------------------------

TEST(cli, sigterm_exits_0_promptly_and_a_restart_carries_a_suspended_procedure_on) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.wait_event", R"({"key":"cli-term"})");
  ASSERT_TRUE(f.reaches(id, "WAITING")) << f.n.log_tail();
  // Steps in flight when the signal comes: 20 ledgers of 5 steps of 50 ms, whose last two
  // steps wait behind gates (demo.ledger's gate_dir) opened only after the SIGTERM.
  auto gates = f.ledger.parent_path() / "gates";
  fs::create_directories(gates);
  for (const char* g : {"step.0", "step.1", "step.2"})
    std::ofstream(gates / g).put('\n');
  std::vector<uint64_t> ledgers;
  for (int i = 0; i < 20; ++i)
    ledgers.push_back(f.submit("demo.ledger", R"({"steps":5,"step_sleep_ms":50,"ledger_dir":")"
                                                + f.ledger.string() + R"(","gate_dir":")"
                                                + gates.string() + "\"}"));
  auto count = [&] {
    return static_cast<size_t>(std::distance(fs::directory_iterator{f.ledger}, {}));
  };
  ASSERT_TRUE(eventually([&] { return count() > 0; }, 60s, 2ms)) << f.n.log_tail();
  auto t0 = clock_type::now();
  EXPECT_EQ(f.n.stop(10s), 0) << f.n.log_tail();
  EXPECT_LE(count(), ledgers.size() * 3) << "a step ran past its closed gate";
  for (const char* g : {"step.3", "step.4"})
    std::ofstream(gates / g).put('\n');
  EXPECT_LT(clock_type::now() - t0, 5s);
  EXPECT_FALSE(f.n.running());

  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto s = f.status(id);
  ASSERT_TRUE(s) << f.n.log_tail();
  EXPECT_EQ(state_of(*s), "WAITING");
  auto e = f.n.ctl({"event", "cli-term", "--payload-json", R"({"after":"sigterm"})"});
  EXPECT_EQ(e.exit_code, 0) << describe(e);
  auto w = f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"});
  EXPECT_EQ(w.exit_code, 0) << describe(w);
  auto v = parse_json(w.out);
  ASSERT_TRUE(v);
  EXPECT_EQ(field(field(*v, "result"), "after").string_value(), "sigterm") << w.out;

  // The steps the signal interrupted were carried on: every ledger done, each step once.
  std::set<std::string> want;
  for (auto l : ledgers) {
    auto lw = f.n.ctl({"wait", std::to_string(l), "--timeout-s", "30"});
    EXPECT_EQ(lw.exit_code, 0) << describe(lw);
    for (int s = 0; s < 5; ++s)
      want.insert(std::to_string(l) + "." + std::to_string(l) + "." + std::to_string(s));
  }
  std::set<std::string> have;
  for (auto& e : fs::directory_iterator{f.ledger})
    have.insert(e.path().filename().string());
  EXPECT_EQ(have, want);
  EXPECT_EQ(f.n.stop(10s), 0);
}

}  // namespace
