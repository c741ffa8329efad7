// External events, deadlines, nonces and supervision through a real node, across SIGKILLs:
// a suspended demo.wait_event outlives a crash and wakes on its event; an event that woke a
// waiter is consumed (a later waiter does not get it); an event that finds no waiter is kept
// for the first later one only; a deadline keeps its absolute time across a restart; a nonce
// keeps naming its procedure; demo.flaky is restarted by its supervisor or escalates.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using google::protobuf::Value;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::field;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::run_result;
using proctor::test::state_of;
using proctor::test::temp_dir;
using clock_type = std::chrono::steady_clock;

bool same_json(const Value& a, const Value& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

struct fixture {
  temp_dir dir;
  fs::path ledger = dir.path() / "ledger";
  node n{dir.path() / "data"};
  fixture() { fs::create_directories(ledger); }

  uint64_t submit(const std::string& type, const std::string& args, const std::string& nonce = "") {
    std::vector<std::string> cmd{"submit", type, "--args-json", args};
    if (!nonce.empty())
      cmd.insert(cmd.end(), {"--nonce", nonce});
    auto r = n.ctl(cmd, 30s);
    EXPECT_EQ(r.exit_code, 0) << describe(r) << n.log_tail();
    auto id = parse_id(r.out);
    EXPECT_TRUE(id) << describe(r);
    return id.value_or(0);
  }
  std::optional<Value> status(uint64_t id) {
    auto r = n.ctl({"status", std::to_string(id), "--json"}, 10s);
    if (r.exit_code != 0)
      return std::nullopt;
    return parse_json(r.out);
  }
  /// True once procedure `id` is suspended (WAITING or WAITING_TIMEOUT), polled up to 30 s.
  bool suspended(uint64_t id) {
    return eventually(
      [&] {
        auto s = status(id);
        return s && state_of(*s).rfind("WAITING", 0) == 0;
      },
      30s, 20ms);
  }
  /// `wait` with a timeout; the printed status (nullopt if none) and the exit code.
  std::pair<std::optional<Value>, run_result> wait(uint64_t id, int timeout_s = 30) {
    auto r = n.ctl({"wait", std::to_string(id), "--timeout-s", std::to_string(timeout_s)},
                   std::chrono::seconds{timeout_s + 30});
    return {parse_json(r.out), r};
  }
  run_result event(const std::string& key, const std::string& payload) {
    return n.ctl({"event", key, "--payload-json", payload}, 30s);
  }
};

// -- events ---------------------------------------------------------------------------------------

TEST(events_process, suspended_procedure_survives_sigkill_and_wakes_on_an_event_after_restart) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.wait_event", R"({"key":"ev-crash"})");
  ASSERT_TRUE(f.suspended(id)) << f.n.log_tail();
  auto before = f.status(id);
  ASSERT_TRUE(before);
  EXPECT_EQ(field(*before, "waiting_for").string_value(), "event ev-crash");

  f.n.kill();
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto after = f.status(id);
  ASSERT_TRUE(after) << f.n.log_tail();
  EXPECT_EQ(state_of(*after), state_of(*before));

  std::string payload = R"({"n":42,"list":[1,"two",null],"nested":{"ok":true}})";
  auto e = f.event("ev-crash", payload);
  ASSERT_EQ(e.exit_code, 0) << describe(e);
  EXPECT_NE(e.out.find("delivered to 1 "), std::string::npos) << e.out;
  auto [v, r] = f.wait(id);
  ASSERT_EQ(r.exit_code, 0) << describe(r) << f.n.log_tail();
  ASSERT_TRUE(v);
  EXPECT_EQ(state_of(*v), "SUCCESS");
  auto want = parse_json(payload);
  EXPECT_TRUE(same_json(field(*v, "result"), *want)) << "result " << r.out;
  f.n.kill();
}

TEST(events_process, event_without_a_waiter_reaches_a_waiter_submitted_later) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto e = f.event("ev-early", R"({"early":1})");
  ASSERT_EQ(e.exit_code, 0) << describe(e);
  EXPECT_NE(e.out.find("event 'ev-early' kept for 5 min for the first procedure that suspends on "
                       "it (none waits now)"),
            std::string::npos)
    << e.out;

  auto id = f.submit("demo.wait_event", R"({"key":"ev-early"})");
  auto [v, r] = f.wait(id, 10);
  ASSERT_EQ(r.exit_code, 0) << describe(r) << f.n.log_tail();
  ASSERT_TRUE(v);
  EXPECT_EQ(field(field(*v, "result"), "early").number_value(), 1.0) << r.out;

  // Consumed: a second waiter waits for an event of its own.
  auto second = f.submit("demo.wait_event", R"({"key":"ev-early"})");
  ASSERT_TRUE(f.suspended(second)) << f.n.log_tail();
  std::this_thread::sleep_for(300ms);
  auto still = f.status(second);
  ASSERT_TRUE(still);
  EXPECT_EQ(state_of(*still), "WAITING") << "the kept event woke a second waiter";
  f.n.kill();
}

// Issue 32: an event that woke its waiter was kept for later ones, and charged twice.
TEST(events_process, event_that_woke_a_waiter_does_not_wake_one_submitted_later) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto first = f.submit("demo.wait_event", R"({"key":"payment:o8"})");
  ASSERT_TRUE(f.suspended(first)) << f.n.log_tail();
  auto e = f.event("payment:o8", R"({"amount":8})");
  ASSERT_EQ(e.exit_code, 0) << describe(e);
  EXPECT_NE(e.out.find("event 'payment:o8' delivered to 1 waiting procedure(s)"), std::string::npos)
    << e.out;
  auto [v, r] = f.wait(first);
  ASSERT_EQ(r.exit_code, 0) << describe(r) << f.n.log_tail();

  auto second = f.submit("demo.wait_event", R"({"key":"payment:o8"})");
  ASSERT_TRUE(f.suspended(second)) << f.n.log_tail();
  f.n.kill();  // nor after a crash
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  std::this_thread::sleep_for(300ms);
  auto still = f.status(second);
  ASSERT_TRUE(still) << f.n.log_tail();
  EXPECT_EQ(state_of(*still), "WAITING") << "the consumed event woke a later waiter";
  f.n.kill();
}

TEST(events_process, event_without_a_waiter_is_kept_across_sigkill) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto e = f.event("ev-kept", R"("kept")");
  ASSERT_EQ(e.exit_code, 0) << describe(e);
  f.n.kill();
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();

  auto id = f.submit("demo.wait_event", R"({"key":"ev-kept"})");
  auto [v, r] = f.wait(id, 10);
  ASSERT_EQ(r.exit_code, 0) << describe(r) << f.n.log_tail();
  ASSERT_TRUE(v);
  EXPECT_EQ(field(*v, "result").string_value(), "kept") << r.out;
  f.n.kill();
}

// -- deadlines ------------------------------------------------------------------------------------

// Both deadline tests need the kill to come before the deadline. How long submitting and
// polling take depends on the machine's load, so a run that missed that premise is not a
// failure: it is made again with a deadline twice as long.
constexpr std::chrono::seconds deadline_tries[] = {6s, 12s, 24s};

TEST(events_process, deadline_set_before_sigkill_fires_after_restart_within_its_remaining_time) {
  for (auto timeout : deadline_tries) {
    fixture f;
    ASSERT_TRUE(f.n.start()) << f.n.log_tail();
    auto t0 = clock_type::now();
    auto id = f.submit("demo.wait_event", R"({"key":"ev-never","timeout_ms":)"
                                            + std::to_string(timeout.count() * 1000) + "}");
    ASSERT_TRUE(f.suspended(id)) << f.n.log_tail();
    // Crash when most of the time has gone (the sleep is the point: time must pass), so that
    // a deadline re-armed in full after the restart would fire long after the original one.
    std::this_thread::sleep_until(t0 + timeout * 2 / 3);
    auto still = f.status(id);
    ASSERT_TRUE(still);
    if (state_of(*still).rfind("WAITING", 0) != 0) {
      ASSERT_GE(clock_type::now() - t0, timeout)
        << "the deadline fired early: " << state_of(*still);
      std::printf("  the deadline passed before the kill; again with a longer one\n");
      continue;
    }
    f.n.kill();
    // The node recovers after this moment: a deadline re-armed in full fires no earlier
    // than `timeout` after it.
    auto restarting = clock_type::now() - t0;
    ASSERT_TRUE(f.n.start()) << f.n.log_tail();
    if (clock_type::now() - t0 - restarting > timeout / 2) {
      std::printf("  the restart took over half the deadline; again with a longer one\n");
      continue;
    }

    auto [v, r] = f.wait(id, 60);
    auto ended = clock_type::now() - t0;
    EXPECT_EQ(r.exit_code, 1) << describe(r) << f.n.log_tail();
    ASSERT_TRUE(v) << describe(r);
    EXPECT_EQ(state_of(*v), "ROLLEDBACK");
    EXPECT_GE(ended, timeout - 100ms) << "the deadline fired before its time";
    // The bound is what a deadline re-armed in full would do, not the speed of this machine.
    EXPECT_LT(ended, restarting + timeout)
      << "the deadline fired "
      << std::chrono::duration_cast<std::chrono::milliseconds>(ended - timeout).count()
      << " ms late: re-armed in full after the restart?";
    f.n.kill();
    return;
  }
  FAIL() << "the kill or the restart was never quick enough, even with the longest deadline";
}

TEST(events_process, deadline_that_passed_while_the_node_was_down_fires_at_restart) {
  for (auto timeout : deadline_tries) {
    fixture f;
    ASSERT_TRUE(f.n.start()) << f.n.log_tail();
    auto t0 = clock_type::now();
    auto id = f.submit("demo.wait_event", R"({"key":"ev-never","timeout_ms":)"
                                            + std::to_string(timeout.count() * 1000) + "}");
    ASSERT_TRUE(f.suspended(id)) << f.n.log_tail();
    auto s = f.status(id);
    ASSERT_TRUE(s);
    if (state_of(*s).rfind("WAITING", 0) != 0) {
      ASSERT_GE(clock_type::now() - t0, timeout) << "the deadline fired early: " << state_of(*s);
      std::printf("  the deadline passed before the kill; again with a longer one\n");
      continue;
    }
    f.n.kill();
    // The sleep is the point: the deadline passes while no node runs.
    std::this_thread::sleep_until(t0 + timeout + 500ms);

    ASSERT_TRUE(f.n.start()) << f.n.log_tail();
    auto restarted = clock_type::now();
    auto [v, r] = f.wait(id, 60);
    EXPECT_EQ(r.exit_code, 1) << describe(r) << f.n.log_tail();
    ASSERT_TRUE(v) << describe(r);
    EXPECT_EQ(state_of(*v), "ROLLEDBACK");
    // Re-armed in full it would wait `timeout` again: the bound is that, not the speed of
    // this machine.
    EXPECT_LT(clock_type::now() - restarted, timeout) << "an expired deadline waited again";
    f.n.kill();
    return;
  }
  FAIL() << "the kill never came before the deadline, even with the longest one";
}

// -- nonces ---------------------------------------------------------------------------------------

TEST(events_process, same_nonce_returns_the_same_id_before_and_after_a_restart) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto waiting = f.submit("demo.wait_event", R"({"key":"ev-nonce"})", "nonce-waiting");
  EXPECT_EQ(f.submit("demo.wait_event", R"({"key":"ev-nonce"})", "nonce-waiting"), waiting);
  auto other = f.submit("demo.wait_event", R"({"key":"ev-nonce"})", "nonce-other");
  EXPECT_NE(other, waiting);
  auto finished = f.submit("demo.noop", R"({"steps":2})", "nonce-finished");
  auto [v, r] = f.wait(finished);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(f.submit("demo.noop", R"({"steps":2})", "nonce-finished"), finished);
  ASSERT_TRUE(f.suspended(waiting));

  f.n.kill();
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  EXPECT_EQ(f.submit("demo.wait_event", R"({"key":"ev-nonce"})", "nonce-waiting"), waiting);
  EXPECT_EQ(f.submit("demo.wait_event", R"({"key":"ev-nonce"})", "nonce-other"), other);
  EXPECT_EQ(f.submit("demo.noop", R"({"steps":2})", "nonce-finished"), finished);

  // No duplicate was created: three roots, and a fresh nonce gets a fresh id.
  auto all = f.n.ctl({"list", "--all", "--json"});
  ASSERT_EQ(all.exit_code, 0) << describe(all);
  auto list = parse_json(all.out);
  ASSERT_TRUE(list && list->has_list_value()) << all.out;
  EXPECT_EQ(list->list_value().values_size(), 3) << all.out;
  auto fresh = f.submit("demo.noop", R"({"steps":1})", "nonce-fresh");
  EXPECT_NE(fresh, waiting);
  EXPECT_NE(fresh, other);
  EXPECT_NE(fresh, finished);
  f.n.kill();
}

// -- supervision ----------------------------------------------------------------------------------

int attempts(const fs::path& dir, uint64_t id) {
  std::ifstream in{dir / (std::to_string(id) + ".attempts")};
  int n = -1;
  in >> n;
  return n;
}

TEST(events_process, flaky_step_is_restarted_to_success_or_escalates_to_rollback) {
  fixture f;
  auto a_dir = f.ledger / "a";
  auto b_dir = f.ledger / "b";
  fs::create_directories(a_dir);
  fs::create_directories(b_dir);
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto a = f.submit("demo.flaky", R"({"crash_times":2,"ledger_dir":")" + a_dir.string() + "\"}");
  auto b = f.submit("demo.flaky", R"({"crash_times":1000,"ledger_dir":")" + b_dir.string() + "\"}");

  auto [va, ra] = f.wait(a, 60);
  EXPECT_EQ(ra.exit_code, 0) << describe(ra) << f.n.log_tail();
  ASSERT_TRUE(va);
  EXPECT_EQ(state_of(*va), "SUCCESS");
  EXPECT_EQ(attempts(a_dir, a), 3) << "two crashes, then the step succeeded";
  EXPECT_TRUE(fs::exists(a_dir / (std::to_string(a) + "." + std::to_string(a) + ".prepared")));

  auto [vb, rb] = f.wait(b, 60);
  EXPECT_EQ(rb.exit_code, 1) << describe(rb) << f.n.log_tail();
  ASSERT_TRUE(vb);
  EXPECT_EQ(state_of(*vb), "ROLLEDBACK");
  EXPECT_NE(field(*vb, "error").string_value().find("escalated"), std::string::npos) << rb.out;
  auto tries = attempts(b_dir, b);
  EXPECT_GT(tries, 1) << "never restarted";
  EXPECT_LT(tries, 1000) << "never escalated";
  EXPECT_FALSE(fs::exists(b_dir / (std::to_string(b) + "." + std::to_string(b) + ".prepared")))
    << "the rollback did not undo FLAKY_PREPARE";

  // The crashes stayed inside the procedures: the node lives on and serves.
  EXPECT_TRUE(f.n.running()) << f.n.log_tail();
  auto c = f.submit("demo.noop", R"({"steps":3})");
  auto [vc, rc] = f.wait(c);
  EXPECT_EQ(rc.exit_code, 0) << describe(rc);
  f.n.kill();
}

}  // namespace
