// Interleavings that once went wrong, each made certain with gates instead of timing: a
// child that ends while its root stops the tree, an abort while a step runs, an abort
// acknowledged before it was durable, a retried step that saw its failed attempt's data, a
// rollback whose progress and failing undo were invisible.
#include <google/protobuf/util/json_util.h>

#include "tests/engine/engine_fixture.hpp"
#include "tests/engine/engine_probe.hpp"

namespace proctor::testing {
namespace {

using testpb::ProbeAction;
using testpb::ProbeData;

class interleave_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    register_probe(types_);
    world_name_ = dir_;  // unique per test
    start();
  }

  probe_world& world() { return probe_world::get(world_name_); }

  ProbeData probe_data(std::vector<ProbeAction> actions) {
    return make_probe(world_name_, std::move(actions));
  }

  pb::Response abort(uint64_t id, std::chrono::milliseconds timeout = std::chrono::seconds{30}) {
    pb::Request req;
    req.mutable_abort()->set_id(id);
    return call(req, timeout);
  }

  void expect_clean_world() {
    for (const auto& e : world().errors())
      ADD_FAILURE() << e;
  }

  std::string world_name_;
};

// A child's last step commits while the root stops the tree after its sibling failed: the
// child ends and quits without answering the stop. The tree must still roll back.
TEST_F(interleave_test, child_ending_while_the_root_stops_the_tree_does_not_hang_it) {
  auto root = probe_data({act(ProbeAction::NEXT), act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  auto c0 = probe_data({act(ProbeAction::NEXT, "c0")});
  auto c1 = probe_data({act(ProbeAction::FAIL)});
  *root.mutable_actions(1)->add_children() = c0;
  *root.mutable_actions(1)->add_children() = c1;
  auto id = submit("test.probe", json(root));
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::FAILED; }))
    << "the tree never started to fail";
  world().open("c0");
  auto s = wait(id, std::chrono::seconds{20});
  ASSERT_EQ(s.state(), pb::ROLLEDBACK) << "tree hangs: " << s.ShortDebugString();
  EXPECT_EQ(world().check_rolled_back(tree_ids(id)), "");
  expect_clean_world();
}

// An abort while a step runs: the step commits after the Failed record, and its state is
// undone once (as the committed step), not a second time as a partly run state; the state
// after it never started and is not undone.
TEST_F(interleave_test, abort_while_a_step_runs_undoes_every_state_exactly_once) {
  auto id =
    submit("test.probe", json(probe_data({act(ProbeAction::NEXT), act(ProbeAction::NEXT),
                                          act(ProbeAction::NEXT, "s3"), act(ProbeAction::NEXT)})));
  ASSERT_TRUE(world().wait_started(probe_world::key(id, 3)));
  auto r = abort(id);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  world().open("s3");
  ASSERT_EQ(wait(id).state(), pb::ROLLEDBACK);
  auto k = [&](int s) { return probe_world::key(id, s); };
  EXPECT_EQ(world().undo_order(), (std::vector<std::string>{k(3), k(2), k(1)}));
  EXPECT_EQ(world().check_rolled_back({id}), "");
  expect_clean_world();
}

// A root aborted while its first step waits for a run slot: that state never started, so
// nothing of it is undone (a submitted root once counted its first state as partly run).
TEST_F(interleave_test, abort_before_the_first_step_started_undoes_nothing) {
  restart([](node_options& o) { o.workers = 1; });
  auto blocker = submit("test.probe", json(probe_data({act(ProbeAction::NEXT, "slot")})));
  ASSERT_TRUE(world().wait_started(probe_world::key(blocker, 1)));
  auto id =
    submit("test.probe", json(probe_data({act(ProbeAction::NEXT), act(ProbeAction::NEXT)})));
  ASSERT_TRUE(eventually([&] { return metric("proctor_queue_depth") >= 1; }))
    << "its first step never queued for the run slot";
  ASSERT_EQ(abort(id).code(), pb::Response::OK);
  ASSERT_TRUE(eventually([&] { return metric("proctor_queue_depth") == 0; }))
    << "the stopped root's step was never taken off the queue";
  world().open("slot");
  ASSERT_EQ(wait(id).state(), pb::ROLLEDBACK);
  EXPECT_EQ(world().check_rolled_back({id}), "");
  EXPECT_EQ(wait(blocker).state(), pb::SUCCESS);
  expect_clean_world();
}

// An abort aimed at a root whose last step is running must not be lost when that step ends
// the procedure: the acknowledged abort rolls the tree back.
TEST_F(interleave_test, abort_during_the_last_step_rolls_back_instead_of_succeeding) {
  auto id = submit("test.probe",
                   json(probe_data({act(ProbeAction::NEXT), act(ProbeAction::DONE, "last")})));
  ASSERT_TRUE(world().wait_started(probe_world::key(id, 2)));
  ASSERT_EQ(abort(id).code(), pb::Response::OK);
  world().open("last");
  ASSERT_EQ(wait(id).state(), pb::ROLLEDBACK);
  EXPECT_EQ(world().check_rolled_back({id}), "");
  expect_clean_world();
}

// Nothing is acknowledged before it is durable: while the journal cannot complete a write,
// an abort gets no answer; once it answered, a crash cannot lose it.
TEST_F(interleave_test, abort_is_acknowledged_only_once_its_record_is_durable) {
  std::shared_ptr<fault_store> store;
  auto with_store = [&](node_options& o) {
    std::string err;
    store.reset();  // the previous incarnation's database must be closed first
    auto inner = open_rocksdb_store(o.data_dir, &err);
    ASSERT_TRUE(inner) << err;
    store = std::make_shared<fault_store>(std::move(inner));
    o.store = store;
    o.on_journal_fatal = [](const std::string&) {};
  };
  restart(with_store);
  auto a = submit("test.probe", json(probe_data({act(ProbeAction::NEXT, "a")})));
  ASSERT_TRUE(world().wait_started(probe_world::key(a, 1)));

  store->hold_writes(true);
  auto held = abort(a, std::chrono::milliseconds{500});
  EXPECT_NE(held.code(), pb::Response::OK) << "abort acknowledged while its record was not durable";
  store->crash_now();
  world().open("a");  // the step may end now: its commit meets the frozen store
  restart(with_store);
  EXPECT_EQ(wait(a).state(), pb::SUCCESS) << "an abort that was never acknowledged happened";

  auto b =
    submit("test.probe", json(probe_data({act(ProbeAction::NEXT, "b"), act(ProbeAction::NEXT)})));
  ASSERT_TRUE(world().wait_started(probe_world::key(b, 1)));
  auto r = abort(b);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  store->crash_now();  // the kill comes right after the acknowledgement
  world().open("b");
  restart([&](node_options&) { store.reset(); });
  EXPECT_EQ(wait(b).state(), pb::ROLLEDBACK) << "an acknowledged abort was lost in a crash";
}

// A retried step starts from the last committed data, not from what the failed attempt left.
TEST_F(interleave_test, a_retried_step_starts_from_the_committed_data) {
  auto id = submit("test.probe", json(probe_data({act(ProbeAction::FAIL_TWICE)})));
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.result_json(), R"({"sum":5})");
}

// While a tree rolls back, its root says how far the rollback got, and an undo that keeps
// failing says so, with its error and attempt, in status and in the metrics.
TEST_F(interleave_test, rollback_progress_and_a_failing_undo_are_visible) {
  auto first = act(ProbeAction::NEXT);
  first.set_undo_gate("u1");
  first.set_undo_failures(2);
  auto id =
    submit("test.probe", json(probe_data({first, act(ProbeAction::NEXT), act(ProbeAction::FAIL)})));
  // Undone so far: the failed state 3 (partly run) and step 2; step 1 waits at its gate.
  ASSERT_TRUE(eventually([&] { return status(id).waiting_for() == "rolling back: 2 of 3 undone"; }))
    << status(id).ShortDebugString();
  EXPECT_EQ(metric("proctor_rollbacks_in_progress"), 1);
  world().open("u1");
  ASSERT_TRUE(eventually([&] {
    return status(id).waiting_for().find("undo of state 1 of procedure " + std::to_string(id)
                                         + " failing: undo of ")
           == 0;
  }))
    << status(id).ShortDebugString();
  ASSERT_EQ(wait(id).state(), pb::ROLLEDBACK);
  EXPECT_GE(metric("proctor_undo_failures_total"), 2);
  EXPECT_EQ(metric("proctor_rollbacks_in_progress"), 0);
  expect_clean_world();
}

}  // namespace
}  // namespace proctor::testing
