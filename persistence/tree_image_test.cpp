// The fold of one tree's journal into its image (tree_image.hpp): states, waits, failures and
// rollbacks as the records set them (its corruptions: tree_image_corruption_test.cpp).
#include "persistence/tree_image.hpp"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "tests/support/journal_builder.hpp"

namespace proctor {
namespace {

using journal_testing::journal_builder;

// -- fold ---------------------------------------------------------------------------------------

TEST(tree_image_test, submitted_root_is_runnable) {
  journal_builder j(5);
  j.submitted(5, 0, "d0", 3, "t.root");
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "");
  EXPECT_EQ(t.root_id, 5u);
  EXPECT_EQ(t.last_lsn, 1u);
  ASSERT_EQ(t.procs.size(), 1u);
  const auto* r = t.root();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->id, 5u);
  EXPECT_EQ(r->parent_id, 0u);
  EXPECT_EQ(r->type, "t.root");
  EXPECT_EQ(r->type_version, 2u);
  EXPECT_EQ(r->priority, 5);
  EXPECT_EQ(r->nonce, "nonce-5");
  EXPECT_EQ(r->submitted_at_ms, 1005);
  EXPECT_EQ(r->status, proc_state::runnable);
  EXPECT_EQ(r->state, 3);
  EXPECT_EQ(r->data, "d0");
  EXPECT_TRUE(r->steps.empty());
  EXPECT_TRUE(r->children.empty());
  EXPECT_FALSE(t.failed);
  EXPECT_FALSE(t.finished);
  EXPECT_FALSE(t.summarized);
  EXPECT_FALSE(t.past_no_return);
}

TEST(tree_image_test, steps_update_data_and_state_and_keep_the_data_each_committed) {
  journal_builder j(1, 10);
  j.submitted(1, 0, "d0", 1);
  j.step(1, 1, 2, "d1");
  j.step(1, 2, 2, "d2");
  j.step(1, 2, 3, "d3");
  const std::vector<std::string> data{"d0", "d1", "d2", "d3"};
  const std::vector<int32_t> state{1, 2, 2, 3};
  for (size_t n = 1; n <= 4; ++n) {
    auto t = j.fold_prefix(n);
    ASSERT_EQ(t.corrupt, "");
    const auto* r = t.root();
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->data, data[n - 1]) << n;
    EXPECT_EQ(r->state, state[n - 1]) << n;
    EXPECT_EQ(r->status, proc_state::runnable) << n;
    ASSERT_EQ(r->steps.size(), n - 1);
    EXPECT_EQ(t.last_lsn, 10 + n - 1);
  }
  auto t = j.fold();
  const auto& s = t.root()->steps;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].lsn, 11u);
  EXPECT_EQ(s[0].executed_state, 1);
  EXPECT_EQ(s[0].data, "d1");
  EXPECT_EQ(s[1].lsn, 12u);
  EXPECT_EQ(s[1].executed_state, 2);
  EXPECT_EQ(s[1].data, "d2");
  EXPECT_EQ(s[2].lsn, 13u);
  EXPECT_EQ(s[2].executed_state, 2);
  EXPECT_EQ(s[2].data, "d3");
  for (const auto& e : s) {
    EXPECT_FALSE(e.no_return);
    EXPECT_FALSE(e.undone);
  }
}

TEST(tree_image_test, spawn_makes_parent_waiting_until_every_child_of_the_last_spawn_ended) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");                         // 1
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});  // 2, 3, 4
  {
    auto t = j.fold();
    ASSERT_EQ(t.corrupt, "");
    ASSERT_EQ(t.procs.size(), 3u);
    const auto* r = t.root();
    EXPECT_EQ(r->status, proc_state::waiting);
    EXPECT_EQ(r->state, 2);
    EXPECT_EQ(r->data, "r1");
    EXPECT_EQ(r->children, (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(r->last_spawned, (std::vector<uint64_t>{2, 3}));
    const auto* a = t.find(2);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->parent_id, 1u);
    EXPECT_EQ(a->status, proc_state::runnable);
    EXPECT_EQ(a->data, "a0");
    EXPECT_EQ(a->nonce, "");
    EXPECT_EQ(t.find(3)->status, proc_state::runnable);
  }
  j.step(2, 1, 1, "a1");                     // 5
  j.finished(2, pb::SUCCESS, R"({"a":1})");  // 6
  {
    auto t = j.fold();
    EXPECT_EQ(t.find(2)->status, proc_state::success);
    EXPECT_EQ(t.find(2)->result_json, R"({"a":1})");
    EXPECT_EQ(t.root()->status, proc_state::waiting);  // child 3 still runs
    EXPECT_FALSE(t.finished);
  }
  j.step(3, 1, 1, "b1");       // 7
  j.finished(3, pb::SUCCESS);  // 8
  {
    auto t = j.fold();
    EXPECT_EQ(t.find(3)->status, proc_state::success);
    EXPECT_EQ(t.root()->status, proc_state::runnable);
    EXPECT_EQ(t.root()->state, 2);
    EXPECT_FALSE(t.finished);
  }
  // A second spawn: only its children count.
  j.spawn(1, 2, 3, "r2", {{4, "c0"}});  // 9, 10
  {
    auto t = j.fold();
    const auto* r = t.root();
    EXPECT_EQ(r->status, proc_state::waiting);
    EXPECT_EQ(r->children, (std::vector<uint64_t>{2, 3, 4}));
    EXPECT_EQ(r->last_spawned, (std::vector<uint64_t>{4}));
  }
  j.finished(4, pb::FAILED, "", "child failed");  // 11
  {
    auto t = j.fold();
    EXPECT_EQ(t.find(4)->status, proc_state::failed);
    EXPECT_EQ(t.find(4)->error, "child failed");
    EXPECT_EQ(t.root()->status, proc_state::runnable);  // FAILED is final too
  }
  j.step(1, 3, 4, "r3");                         // 12
  j.finished(1, pb::SUCCESS, R"({"ok":true})");  // 13
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::success);
  EXPECT_EQ(t.root()->result_json, R"({"ok":true})");
  EXPECT_TRUE(t.finished);
  EXPECT_EQ(t.last_lsn, 13u);
}

TEST(tree_image_test, parent_waits_while_a_child_waits_on_grandchildren) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}});
  j.spawn(2, 1, 2, "a1", {{3, "g0"}});
  {
    auto t = j.fold();
    EXPECT_EQ(t.root()->status, proc_state::waiting);
    EXPECT_EQ(t.find(2)->status, proc_state::waiting);
    EXPECT_EQ(t.find(3)->status, proc_state::runnable);
  }
  j.finished(3, pb::SUCCESS);
  auto t = j.fold();
  EXPECT_EQ(t.find(2)->status, proc_state::runnable);
  EXPECT_EQ(t.root()->status, proc_state::waiting);
}

TEST(tree_image_test, spawn_without_children_keeps_runnable) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1", {});
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::runnable);
  EXPECT_TRUE(t.root()->last_spawned.empty());
}

TEST(tree_image_test, suspended_waits_for_its_event) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  j.suspended(1, "order-9", 123456, 2);
  {
    auto t = j.fold();
    const auto* r = t.root();
    EXPECT_EQ(r->status, proc_state::waiting);
    EXPECT_EQ(r->event_key, "order-9");
    EXPECT_EQ(r->deadline_ms, 123456);
    EXPECT_EQ(r->state, 2);
    EXPECT_FALSE(r->event_delivered);
  }
  j.delivered(1, "order-9", R"({"x":1})", false);
  {
    auto t = j.fold();
    const auto* r = t.root();
    EXPECT_EQ(r->status, proc_state::runnable);
    EXPECT_TRUE(r->event_delivered);
    EXPECT_EQ(r->event_payload, R"({"x":1})");
    EXPECT_FALSE(r->event_timed_out);
    EXPECT_EQ(r->state, 2);
    EXPECT_EQ(r->data, "r1");
  }
  // The resumed step's commit clears the event.
  j.step(1, 2, 3, "r2");
  auto t = j.fold();
  const auto* r = t.root();
  EXPECT_EQ(r->status, proc_state::runnable);
  EXPECT_EQ(r->event_key, "");
  EXPECT_EQ(r->event_payload, "");
  EXPECT_FALSE(r->event_delivered);
  EXPECT_EQ(r->deadline_ms, 0);
  EXPECT_EQ(r->state, 3);
  EXPECT_EQ(r->data, "r2");
}

TEST(tree_image_test, suspended_parent_stays_waiting_although_its_old_children_ended) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}});
  j.finished(2, pb::SUCCESS);
  j.step(1, 2, 3, "r2");
  j.suspended(1, "k", 0, 3);
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::waiting);
  EXPECT_EQ(t.root()->event_key, "k");
}

TEST(tree_image_test, event_timed_out) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  j.suspended(1, "k", 99, 2);
  j.delivered(1, "k", "", true);
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::runnable);
  EXPECT_TRUE(t.root()->event_timed_out);
  EXPECT_TRUE(t.root()->event_delivered);
}

TEST(tree_image_test, timer_set_is_waiting_timeout) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 4, "r1");
  j.timer(1, 777, 4);
  {
    auto t = j.fold();
    EXPECT_EQ(t.root()->status, proc_state::waiting_timeout);
    EXPECT_EQ(t.root()->wake_at_ms, 777);
    EXPECT_EQ(t.root()->state, 4);
  }
  j.step(1, 4, 5, "r2");
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::runnable);
  EXPECT_EQ(t.root()->wake_at_ms, 0);
  EXPECT_EQ(t.root()->state, 5);
}

TEST(tree_image_test, failed_marks_tree_and_procedure_keeping_the_first_failure) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});
  j.failed(3, 1, "first boom");
  j.failed(2, 1, "second boom");
  j.failed(3, 2, "again");
  auto t = j.fold();
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.failure, "first boom");
  const auto* b = t.find(3);
  EXPECT_TRUE(b->failed);
  EXPECT_EQ(b->failed_state, 2);
  EXPECT_EQ(b->error, "first boom");
  EXPECT_TRUE(t.find(2)->failed);
  EXPECT_EQ(t.find(2)->error, "second boom");
  EXPECT_FALSE(t.root()->failed);
  EXPECT_FALSE(t.finished);
}

TEST(tree_image_test, rollback_step_done_marks_steps_and_partial_undos) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  auto s1 = j.step(1, 1, 2, "r1");
  auto s2 = j.step(1, 2, 3, "r2");
  j.failed(1, 3, "boom");
  j.undone(0, 1, 3, "r2-partial-undone");
  {
    auto t = j.fold();
    EXPECT_TRUE(t.root()->partial_undone);
    EXPECT_EQ(t.root()->data, "r2-partial-undone");
    EXPECT_FALSE(t.root()->steps[0].undone);
    EXPECT_FALSE(t.root()->steps[1].undone);
  }
  j.undone(s2, 1, 2, "r1");
  {
    auto t = j.fold();
    EXPECT_FALSE(t.root()->steps[0].undone);
    EXPECT_TRUE(t.root()->steps[1].undone);
    EXPECT_EQ(t.root()->data, "r1");
  }
  j.undone(s1, 1, 1, "r0");
  j.rolled_back("boom");
  auto t = j.fold();
  EXPECT_TRUE(t.root()->steps[0].undone);
  EXPECT_TRUE(t.rolled_back);
  EXPECT_TRUE(t.finished);
  EXPECT_EQ(t.root()->status, proc_state::rolledback);
  EXPECT_EQ(t.root()->error, "boom");
}

// An undo handed to a worker waits for its task until its RollbackStepDone; one whose task
// failed for good waits for none (its handler runs again and dispatches a new one), and the
// new dispatch is the one waited for.
TEST(tree_image_test, an_undo_waits_for_its_last_dispatched_task_unless_that_one_failed) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  auto s1 = j.step(1, 1, 2, "r1");
  j.failed(1, 2, "boom");
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 2U);  // the partly run state 2, then the step of state 1
  const auto& item = plan[1];
  ASSERT_EQ(item.lsn, s1);
  EXPECT_EQ(undo_task_of(j.fold(), item), nullptr);
  j.undo_dispatched(s1, 1, 1, "call:1:undo:5:1");
  {
    auto t = j.fold();
    const auto* u = undo_task_of(t, item);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->key, "call:1:undo:5:1");
    EXPECT_EQ(u->data, "handler's data");
  }
  j.undo_dispatched(s1, 1, 1, "call:1:undo:5:1", "refund service down");
  EXPECT_EQ(undo_task_of(j.fold(), item), nullptr);
  j.undo_dispatched(s1, 1, 1, "call:1:undo:9:2");
  {
    auto t = j.fold();
    const auto* u = undo_task_of(t, item);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->key, "call:1:undo:9:2");
  }
  j.undone(s1, 1, 1, "r0");
  EXPECT_EQ(undo_task_of(j.fold(), item), nullptr);
}

TEST(tree_image_test, rolled_back_ends_every_procedure) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});
  j.finished(2, pb::SUCCESS, "{}");
  j.failed(3, 1, "boom");
  j.rolled_back("tree rolled back");
  auto t = j.fold();
  for (const auto& [id, p] : t.procs)
    EXPECT_EQ(p.status, proc_state::rolledback) << id;
  EXPECT_EQ(t.find(3)->error, "boom");
  EXPECT_EQ(t.find(2)->error, "tree rolled back");
  EXPECT_EQ(t.root()->error, "tree rolled back");
  EXPECT_TRUE(t.finished);
  EXPECT_TRUE(t.rolled_back);
}

TEST(tree_image_test, finished_of_a_child_does_not_finish_the_tree) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}});
  j.finished(2, pb::SUCCESS);
  EXPECT_FALSE(j.fold().finished);
  j.finished(1, pb::SUCCESS, "\"r\"");
  EXPECT_TRUE(j.fold().finished);
}

TEST(tree_image_test, no_return_step_marks_the_tree) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  EXPECT_FALSE(j.fold().past_no_return);
  j.step(1, 2, 3, "r2", {}, true);
  auto t = j.fold();
  EXPECT_TRUE(t.past_no_return);
  EXPECT_FALSE(t.root()->steps[0].no_return);
  EXPECT_TRUE(t.root()->steps[1].no_return);
}

TEST(tree_image_test, other_trees_and_node_records_are_ignored) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  pb::JournalRecord floor;
  floor.mutable_id_floor()->set_next_id(100);
  j.add(floor);
  pb::JournalRecord ev;
  ev.mutable_event()->set_event_key("k");
  j.add(ev);
  auto recs = j.records();
  journal_builder other(2);
  other.submitted(2, 0, "x0");
  other.step(2, 1, 2, "x1");
  other.raw("garbage\xff\xff\xff\xff");
  for (const auto& r : other.records())
    recs.push_back(r);
  auto t = fold_tree(1, recs);
  EXPECT_EQ(t.corrupt, "");
  EXPECT_EQ(t.procs.size(), 1u);
  EXPECT_EQ(t.root()->data, "r0");
  EXPECT_EQ(t.last_lsn, 3u);
}

}  // namespace
}  // namespace proctor
