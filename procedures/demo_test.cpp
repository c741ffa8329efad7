#include "procedures/demo.hpp"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/demo.pb.h>

namespace proctor {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/proctor_demo_test_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out.insert(e.path().filename().string());
  return out;
}

context make_ctx(uint64_t id, uint64_t root, uint64_t parent = 0) {
  context c;
  c.id_ = id;
  c.root_id_ = root;
  c.parent_id_ = parent;
  return c;
}

std::string ledger_file(uint64_t root, uint64_t id, int step) {
  return std::to_string(root) + "." + std::to_string(id) + "." + std::to_string(step);
}

class demo_test : public ::testing::Test {
protected:
  demo_test() { register_demo_procedures(reg); }

  std::unique_ptr<procedure> make(const std::string& type, const std::string& json) {
    std::string err;
    auto p = reg.make_from_json(type, json, &err);
    EXPECT_NE(p, nullptr) << err;
    return p;
  }

  std::unique_ptr<procedure> from_bytes(const std::string& type, const std::string& bytes) {
    std::string err;
    auto p = reg.make_from_bytes(type, bytes, &err);
    EXPECT_NE(p, nullptr) << err;
    return p;
  }

  std::string error_of(const std::string& type, const std::string& json) {
    std::string err;
    auto p = reg.make_from_json(type, json, &err);
    EXPECT_EQ(p, nullptr);
    return err;
  }

  std::string ledger_json(const std::string& extra = {}) {
    return R"({"ledger_dir": ")" + dir.path + "\"" + (extra.empty() ? "" : ", " + extra) + "}";
  }

  registry reg;
  temp_dir dir;
};

pb::LedgerData& ledger_data(procedure& p) {
  return dynamic_cast<pb::LedgerData&>(p.data());
}

// -- demo.ledger --------------------------------------------------------------------------------

TEST_F(demo_test, ledger_runs_each_step_once_leaving_one_file_each) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 3)"));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->initial_state(), pb::LEDGER_STEP);
  auto ctx = make_ctx(7, 7);
  std::set<std::string> expected;
  std::vector<outcome::kind> kinds;
  int32_t state = p->initial_state();
  for (int i = 0; i < 10; ++i) {
    auto o = p->execute(state, ctx);
    kinds.push_back(o.what());
    expected.insert(ledger_file(7, 7, i));
    EXPECT_EQ(files_in(dir.path), expected) << "after step " << i;
    EXPECT_EQ(ledger_data(*p).step(), i + 1);
    if (o.what() == outcome::kind::done) {
      EXPECT_EQ(o.result_json(), R"({"steps":3})");
      break;
    }
    ASSERT_EQ(o.what(), outcome::kind::next);
    state = o.state();
    EXPECT_EQ(state, pb::LEDGER_STEP);
  }
  EXPECT_EQ(kinds, (std::vector<outcome::kind>{outcome::kind::next, outcome::kind::next,
                                               outcome::kind::done}));
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"7.7.0", "7.7.1", "7.7.2"}));
}

TEST_F(demo_test, ledger_default_is_three_steps) {
  auto p = make("demo.ledger", ledger_json());
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(3, 1, 1);
  int runs = 0;
  for (;; ++runs) {
    ASSERT_LT(runs, 10);
    auto o = p->execute(pb::LEDGER_STEP, ctx);
    if (o.what() == outcome::kind::done)
      break;
  }
  EXPECT_EQ(runs + 1, 3);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"1.3.0", "1.3.1", "1.3.2"}));
}

TEST_F(demo_test, ledger_rerun_of_a_step_is_idempotent) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 2)"));
  ASSERT_NE(p, nullptr);
  auto before = p->data().SerializeAsString();
  auto ctx = make_ctx(9, 9);
  ASSERT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::next);
  // A crash before the commit: the step runs again from the journaled data.
  auto q = from_bytes("demo.ledger", before);
  ASSERT_EQ(q->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::next);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"9.9.0"}));
}

TEST_F(demo_test, ledger_zero_steps_is_done_at_once) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 0)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(1, 1);
  auto o = p->execute(pb::LEDGER_STEP, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(o.result_json(), R"({"steps":0})");
  EXPECT_TRUE(files_in(dir.path).empty());
}

TEST_F(demo_test, ledger_spawns_children_at_step_zero) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 2, "depth": 2, "children": 3)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(1, 1);
  auto o = p->execute(pb::LEDGER_STEP, ctx);
  ASSERT_EQ(o.what(), outcome::kind::spawn);
  EXPECT_EQ(o.state(), pb::LEDGER_STEP);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"1.1.0"}));
  EXPECT_EQ(ledger_data(*p).step(), 1);
  ASSERT_EQ(o.children().size(), 3u);
  for (const auto& c : o.children()) {
    EXPECT_EQ(c.type, "demo.ledger");
    EXPECT_EQ(c.priority, 0);
    pb::LedgerData d;
    ASSERT_TRUE(d.ParseFromString(c.data));
    EXPECT_EQ(d.depth(), 1);
    EXPECT_EQ(d.step(), 0);
    EXPECT_EQ(d.children(), 3);
    EXPECT_EQ(d.ledger_dir(), dir.path);
    EXPECT_TRUE(d.has_steps());
    EXPECT_EQ(d.steps(), 2);
    EXPECT_FALSE(d.has_fail_at());
  }

  // A child (not a root) with depth 1 spawns grandchildren with depth 0.
  auto child = from_bytes("demo.ledger", o.children()[0].data);
  auto cctx = make_ctx(2, 1, 1);
  auto co = child->execute(pb::LEDGER_STEP, cctx);
  ASSERT_EQ(co.what(), outcome::kind::spawn);
  ASSERT_EQ(co.children().size(), 3u);
  pb::LedgerData g;
  ASSERT_TRUE(g.ParseFromString(co.children()[2].data));
  EXPECT_EQ(g.depth(), 0);
  EXPECT_EQ(g.step(), 0);

  // A grandchild (depth 0) does not spawn.
  auto grand = from_bytes("demo.ledger", co.children()[2].data);
  auto gctx = make_ctx(5, 1, 2);
  auto go = grand->execute(pb::LEDGER_STEP, gctx);
  EXPECT_EQ(go.what(), outcome::kind::next);
  EXPECT_TRUE(go.children().empty());

  // The parent resumes after its children and finishes its remaining step.
  o = p->execute(pb::LEDGER_STEP, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(o.result_json(), R"({"steps":2})");
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"1.1.0", "1.1.1", "1.2.0", "1.5.0"}));
}

TEST_F(demo_test, ledger_needs_depth_and_children_to_spawn) {
  for (const char* extra : {R"("depth": 1, "children": 0)", R"("depth": 0, "children": 4)"}) {
    auto p = make("demo.ledger", ledger_json(extra));
    ASSERT_NE(p, nullptr);
    auto ctx = make_ctx(1, 1);
    auto o = p->execute(pb::LEDGER_STEP, ctx);
    EXPECT_EQ(o.what(), outcome::kind::next) << extra;
    EXPECT_TRUE(o.children().empty()) << extra;
  }
}

TEST_F(demo_test, ledger_root_fails_at_fail_at_before_its_file) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 4, "fail_at": 2)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(3, 3);
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::next);
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::next);
  auto o = p->execute(pb::LEDGER_STEP, ctx);
  ASSERT_EQ(o.what(), outcome::kind::fail);
  EXPECT_EQ(o.error(), "demo.ledger: failing at step 2 as asked (fail_at)");
  EXPECT_EQ(ledger_data(*p).step(), 2);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"3.3.0", "3.3.1"}));
  // Retried, it fails again the same way.
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::fail);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"3.3.0", "3.3.1"}));
}

TEST_F(demo_test, ledger_fail_at_zero_creates_nothing) {
  auto p = make("demo.ledger", ledger_json(R"("fail_at": 0, "depth": 1, "children": 2)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(4, 4);
  auto o = p->execute(pb::LEDGER_STEP, ctx);
  EXPECT_EQ(o.what(), outcome::kind::fail);
  EXPECT_TRUE(o.children().empty());
  EXPECT_TRUE(files_in(dir.path).empty());
}

TEST_F(demo_test, ledger_non_root_ignores_fail_at) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 3, "fail_at": 1)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(6, 4, 5);
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::next);
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::next);
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::done);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"4.6.0", "4.6.1", "4.6.2"}));
}

TEST_F(demo_test, ledger_children_inherit_fail_at_but_ignore_it) {
  auto p =
    make("demo.ledger", ledger_json(R"("steps": 2, "fail_at": 1, "depth": 1, "children": 1)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(1, 1);
  auto o = p->execute(pb::LEDGER_STEP, ctx);
  ASSERT_EQ(o.what(), outcome::kind::spawn);
  ASSERT_EQ(o.children().size(), 1u);
  auto c = from_bytes("demo.ledger", o.children()[0].data);
  ASSERT_TRUE(ledger_data(*c).has_fail_at());
  auto cctx = make_ctx(2, 1, 1);
  EXPECT_EQ(c->execute(pb::LEDGER_STEP, cctx).what(), outcome::kind::next);
  EXPECT_EQ(c->execute(pb::LEDGER_STEP, cctx).what(), outcome::kind::done);
  // The root then fails at step 1.
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::fail);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"1.1.0", "1.2.0", "1.2.1"}));
}

TEST_F(demo_test, ledger_rollback_removes_exactly_its_step_file_and_is_idempotent) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 3)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(8, 2, 2);
  std::vector<std::string> committed;  // data each step committed, as the journal keeps it
  for (;;) {
    auto what = p->execute(pb::LEDGER_STEP, ctx).what();
    committed.push_back(p->data().SerializeAsString());
    if (what == outcome::kind::done)
      break;
  }
  ASSERT_EQ(committed.size(), 3u);
  std::set<std::string> left{"2.8.0", "2.8.1", "2.8.2"};
  ASSERT_EQ(files_in(dir.path), left);
  ctx.undo_committed_ = true;  // the undo of a committed step sees what the step committed
  for (int s = 2; s >= 0; --s) {
    auto u = from_bytes("demo.ledger", committed[static_cast<size_t>(s)]);
    ASSERT_EQ(ledger_data(*u).touched(), s);
    u->rollback(pb::LEDGER_STEP, ctx);
    left.erase(ledger_file(2, 8, s));
    EXPECT_EQ(files_in(dir.path), left) << "after undo of step " << s;
    EXPECT_NO_THROW(u->rollback(pb::LEDGER_STEP, ctx));
    EXPECT_EQ(files_in(dir.path), left) << "after second undo of step " << s;
  }
  EXPECT_TRUE(files_in(dir.path).empty());
}

TEST_F(demo_test, ledger_rollback_out_of_order_touches_only_its_file) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 3)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(1, 1);
  while (p->execute(pb::LEDGER_STEP, ctx).what() != outcome::kind::done) {
  }
  auto u = make("demo.ledger", ledger_json(R"("steps": 3, "step": 1)"));
  ASSERT_NE(u, nullptr);
  u->rollback(pb::LEDGER_STEP, ctx);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"1.1.0", "1.1.2"}));
  // Another procedure's rollback leaves this one's files alone.
  auto other_ctx = make_ctx(2, 1, 1);
  u->rollback(pb::LEDGER_STEP, other_ctx);
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"1.1.0", "1.1.2"}));
}

TEST_F(demo_test, ledger_rollback_of_a_failed_partial_step_tolerates_nothing_to_undo) {
  auto p = make("demo.ledger", ledger_json(R"("steps": 3, "fail_at": 1)"));
  ASSERT_NE(p, nullptr);
  auto ctx = make_ctx(1, 1);
  ASSERT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::next);
  ASSERT_EQ(p->execute(pb::LEDGER_STEP, ctx).what(), outcome::kind::fail);
  EXPECT_NO_THROW(p->rollback(pb::LEDGER_STEP, ctx));  // step 1's file never existed
  EXPECT_EQ(files_in(dir.path), (std::set<std::string>{"1.1.0"}));
}

TEST_F(demo_test, ledger_rollback_is_supported) {
  auto p = make("demo.ledger", ledger_json());
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->rollback_supported(pb::LEDGER_STEP));
  EXPECT_EQ(p->state_name(pb::LEDGER_STEP), "LEDGER_STEP");
}

TEST_F(demo_test, ledger_validate) {
  EXPECT_EQ(error_of("demo.ledger", "{}"),
            "invalid args for 'demo.ledger': ledger_dir is required");
  EXPECT_EQ(error_of("demo.ledger", R"({"steps": 2})"),
            "invalid args for 'demo.ledger': ledger_dir is required");
  auto missing = dir.path + "/missing";
  EXPECT_EQ(error_of("demo.ledger", R"({"ledger_dir": ")" + missing + "\"}"),
            "invalid args for 'demo.ledger': ledger_dir '" + missing + "' is not a directory");
  auto file = dir.path + "/plain";
  std::ofstream(file) << "x";
  EXPECT_EQ(error_of("demo.ledger", R"({"ledger_dir": ")" + file + "\"}"),
            "invalid args for 'demo.ledger': ledger_dir '" + file + "' is not a directory");
  const std::string negative =
    "invalid args for 'demo.ledger': steps, children, depth and step_sleep_ms must not be "
    "negative";
  EXPECT_EQ(error_of("demo.ledger", ledger_json(R"("steps": -1)")), negative);
  EXPECT_EQ(error_of("demo.ledger", ledger_json(R"("children": -1)")), negative);
  EXPECT_EQ(error_of("demo.ledger", ledger_json(R"("depth": -1)")), negative);
  EXPECT_EQ(error_of("demo.ledger", ledger_json(R"("step_sleep_ms": -1)")), negative);
  const std::string limits =
    "invalid args for 'demo.ledger': depth is limited to 8 and children to 100000";
  EXPECT_EQ(error_of("demo.ledger", ledger_json(R"("depth": 9)")), limits);
  EXPECT_EQ(error_of("demo.ledger", ledger_json(R"("children": 100001)")), limits);
  EXPECT_NE(make("demo.ledger", ledger_json(R"("depth": 8, "children": 100000)")), nullptr);
}

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
