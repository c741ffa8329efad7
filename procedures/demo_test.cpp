// The other demo procedures (procedures/demo.hpp): demo.flaky, demo.wait_event, demo.noop,
// demo.timer and demo.fanout.
#include "procedures/demo.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/demo.pb.h>

#include "tests/support/demo_fixture.hpp"

namespace proctor {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using demo_testing::demo_test;
using demo_testing::files_in;
using demo_testing::make_ctx;

// -- demo.flaky ---------------------------------------------------------------------------------

TEST_F(demo_test, flaky_crashes_crash_times_then_proceeds) {
  auto p = make("demo.flaky", R"({"ledger_dir": ")" + dir.path + R"(", "crash_times": 2})");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->initial_state(), pb::FLAKY_PREPARE);
  auto ctx = make_ctx(12, 10, 10);
  auto o = p->execute(pb::FLAKY_PREPARE, ctx);
  ASSERT_EQ(o.what(), outcome::kind::next);
  EXPECT_EQ(o.state(), pb::FLAKY_RISKY);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"10.12.prepared"}));

  auto attempts = [&] {
    std::ifstream in(dir.path + "/12.attempts");
    int n = -1;
    in >> n;
    return n;
  };
  auto bytes = p->data().SerializeAsString();
  for (int i = 1; i <= 2; ++i) {
    // Each attempt on a fresh instance, as after an actor restart.
    auto q = from_bytes("demo.flaky", bytes);
    try {
      q->execute(pb::FLAKY_RISKY, ctx);
      FAIL() << "attempt " << i << " should crash";
    } catch (const procedure_failure& e) {
      FAIL() << "a crash must not be a procedure_failure: " << e.what();
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()),
                "demo.flaky: simulated crash " + std::to_string(i) + " of 2");
    }
    EXPECT_EQ(attempts(), i);
  }
  auto q = from_bytes("demo.flaky", bytes);
  o = q->execute(pb::FLAKY_RISKY, ctx);
  ASSERT_EQ(o.what(), outcome::kind::next);
  EXPECT_EQ(o.state(), pb::FLAKY_FINISH);
  EXPECT_EQ(attempts(), 3);
  o = q->execute(pb::FLAKY_FINISH, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(o.result_json(), "");
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"10.12.prepared", "12.attempts"}));
}

TEST_F(demo_test, flaky_without_crashes_proceeds_at_once) {
  auto p = make("demo.flaky", R"({"ledger_dir": ")" + dir.path + R"("})");
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(1, 1);
  EXPECT_EQ(p->execute(pb::FLAKY_RISKY, ctx).what(), outcome::kind::next);
}

TEST_F(demo_test, flaky_rollback_removes_the_prepared_file) {
  auto p = make("demo.flaky", R"({"ledger_dir": ")" + dir.path + R"("})");
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(3, 1, 1);
  p->execute(pb::FLAKY_PREPARE, ctx);
  ASSERT_EQ(files_in(dir.path), (std::set<std::string>{"1.3.prepared"}));
  p->rollback(pb::FLAKY_RISKY, ctx);
  p->rollback(pb::FLAKY_FINISH, ctx);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"1.3.prepared"}));
  p->rollback(pb::FLAKY_PREPARE, ctx);
  EXPECT_TRUE(files_in(dir.path).empty());
  EXPECT_NO_THROW(p->rollback(pb::FLAKY_PREPARE, ctx));
}

TEST_F(demo_test, validate_never_throws_on_strange_paths) {
  // A path component longer than NAME_MAX makes the throwing filesystem calls throw.
  auto long_name = "/tmp/" + std::string(300, 'a');
  auto e = error_of("demo.ledger", R"({"ledger_dir": ")" + long_name + "\"}");
  EXPECT_NE(e.find("is not a directory (File name too long)"), std::string::npos) << e;
  e = error_of("demo.flaky", R"({"ledger_dir": ")" + long_name + "\"}");
  EXPECT_NE(e.find("is not a directory"), std::string::npos) << e;
}

TEST_F(demo_test, flaky_validate) {
  EXPECT_EQ(error_of("demo.flaky", "{}"), "invalid args for 'demo.flaky': ledger_dir is required");
  EXPECT_EQ(error_of("demo.flaky", R"({"ledger_dir": ")" + dir.path + R"(", "crash_times": -1})"),
            "invalid args for 'demo.flaky': crash_times must not be negative");
  EXPECT_EQ(error_of("demo.flaky", R"({"ledger_dir": "/nonexistent/proctor/x"})"),
            "invalid args for 'demo.flaky': ledger_dir '/nonexistent/proctor/x' is not a "
            "directory");
}

// -- demo.wait_event ----------------------------------------------------------------------------

TEST_F(demo_test, wait_event_suspends_then_finishes_with_the_payload) {
  auto p = make("demo.wait_event", R"({"key": "order-17", "timeout_ms": 1500})");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->initial_state(), pb::WAIT_EVENT_SUSPEND);
  EXPECT_FALSE(p->resume_on_timeout());
  auto ctx = make_ctx(1, 1);
  auto o = p->execute(pb::WAIT_EVENT_SUSPEND, ctx);
  ASSERT_EQ(o.what(), outcome::kind::suspend);
  EXPECT_EQ(o.event_key(), "order-17");
  EXPECT_EQ(o.state(), pb::WAIT_EVENT_RESUME);
  EXPECT_EQ(o.duration(), 1500ms);

  ctx.event_payload_ = R"({"paid":true})";
  o = p->execute(pb::WAIT_EVENT_RESUME, ctx);
  ASSERT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(o.result_json(), R"({"paid":true})");
  EXPECT_EQ(dynamic_cast<pb::WaitEventData&>(p->data()).payload_json(), R"({"paid":true})");
}

TEST_F(demo_test, wait_event_without_timeout_waits_forever) {
  auto p = make("demo.wait_event", R"({"key": "k"})");
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(1, 1);
  auto o = p->execute(pb::WAIT_EVENT_SUSPEND, ctx);
  ASSERT_EQ(o.what(), outcome::kind::suspend);
  EXPECT_EQ(o.duration(), 0ms);
  o = p->execute(pb::WAIT_EVENT_RESUME, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(o.result_json(), "");
}

TEST_F(demo_test, wait_event_validate) {
  EXPECT_EQ(error_of("demo.wait_event", "{}"),
            "invalid args for 'demo.wait_event': key is required");
  EXPECT_EQ(error_of("demo.wait_event", R"({"key": "k", "timeout_ms": -5})"),
            "invalid args for 'demo.wait_event': timeout_ms must not be negative");
}

// -- demo.noop / demo.fanout --------------------------------------------------------------------

TEST_F(demo_test, noop_finishes_after_steps_steps) {
  for (int steps : {1, 2, 5}) {
    auto p = make("demo.noop", R"({"steps": )" + std::to_string(steps) + "}");
    ASSERT_NE(p, nullptr);
    auto ctx = make_ctx(1, 1);
    int runs = 0;
    for (;;) {
      ASSERT_LT(runs, 100);
      auto o = p->execute(p->initial_state(), ctx);
      ++runs;
      if (o.what() == outcome::kind::done)
        break;
      ASSERT_EQ(o.what(), outcome::kind::next);
      EXPECT_EQ(o.state(), pb::NOOP_STEP);
    }
    EXPECT_EQ(runs, steps) << "steps " << steps;
    EXPECT_EQ(dynamic_cast<pb::NoopData&>(p->data()).step(), steps);
  }
}

TEST_F(demo_test, timer_steps_block_only_to_append_to_a_ledger) {
  auto plain = make("demo.timer", R"({"wake_at_ms": 1})");
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(plain->never_blocks(pb::TIMER_WAIT, false));
  EXPECT_TRUE(plain->never_blocks(pb::TIMER_FIRE, false));
  EXPECT_TRUE(plain->never_blocks(pb::TIMER_FIRE, true));
  auto ledger = make("demo.timer", R"({"wake_at_ms": 1, "ledger_dir": ")" + dir.path + R"("})");
  ASSERT_NE(ledger, nullptr);
  EXPECT_TRUE(ledger->never_blocks(pb::TIMER_WAIT, false)) << "it only computes the wait";
  EXPECT_FALSE(ledger->never_blocks(pb::TIMER_FIRE, false)) << "it appends to a file";
  EXPECT_TRUE(ledger->never_blocks(pb::TIMER_FIRE, true)) << "its undo does nothing";
  // A type with no declaration blocks everywhere (the safe default).
  auto other = make("demo.ledger", ledger_json());
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->never_blocks(other->initial_state(), false));
}

TEST_F(demo_test, fanout_spawns_noop_children_and_joins) {
  auto p = make("demo.fanout", R"({"children": 3, "child_steps": 0})");
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(1, 1);
  auto o = p->execute(pb::FANOUT_SPAWN, ctx);
  ASSERT_EQ(o.what(), outcome::kind::spawn);
  EXPECT_EQ(o.state(), pb::FANOUT_JOIN);
  ASSERT_EQ(o.children().size(), 3u);
  for (const auto& c : o.children()) {
    EXPECT_EQ(c.type, "demo.noop");
    pb::NoopData d;
    ASSERT_TRUE(d.ParseFromString(c.data));
    EXPECT_EQ(d.steps(), 1);  // at least one step
    EXPECT_EQ(d.step(), 0);
  }
  ctx.children_ = {{2, proc_state::success, "", ""},
                   {3, proc_state::success, "", ""},
                   {4, proc_state::success, "", ""}};
  o = p->execute(pb::FANOUT_JOIN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(o.result_json(), R"({"children":3})");
  ctx.children_[1].state = proc_state::failed;
  o = p->execute(pb::FANOUT_JOIN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::fail);
  EXPECT_EQ(o.error(), "child 3 did not succeed");
}

}  // namespace
}  // namespace proctor
