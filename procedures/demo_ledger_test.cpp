// demo.ledger (procedures/demo.hpp): one file per step, children, failures at a step, and
// rollbacks that remove exactly their own files.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/demo.pb.h>

#include "procedures/demo.hpp"
#include "tests/support/demo_fixture.hpp"

namespace proctor {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using demo_testing::demo_test;
using demo_testing::files_in;
using demo_testing::ledger_data;
using demo_testing::ledger_file;
using demo_testing::make_ctx;

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

}  // namespace
}  // namespace proctor
