// Rollback plans (tree_rollback_plan.cpp): what a failed tree undoes, in which order, and what
// it does not undo again after a restart.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"
#include "persistence/tree_snapshot.hpp"
#include "tests/support/journal_builder.hpp"

namespace proctor {
namespace {

using journal_testing::describe;
using journal_testing::expect_item;
using journal_testing::journal_builder;
using journal_testing::sample_summary;

// -- rollback plans -----------------------------------------------------------------------------

/// Root 1 spawns 2 and 3; both make progress interleaved; 2 succeeds; 3 fails in state 3.
journal_builder failed_tree() {
  journal_builder j(1);
  j.submitted(1, 0, "r0");                         // 1
  j.step(1, 1, 2, "r1");                           // 2
  j.spawn(1, 2, 3, "r2", {{2, "a0"}, {3, "b0"}});  // 3, 4, 5
  j.step(2, 1, 2, "a1");                           // 6
  j.step(3, 1, 2, "b1");                           // 7
  j.step(2, 2, 3, "a2");                           // 8
  j.finished(2, pb::SUCCESS);                      // 9
  j.step(3, 2, 3, "b2");                           // 10
  j.failed(3, 3, "boom");                          // 11
  return j;
}

TEST(rollback_plan_test, partial_states_first_then_steps_by_descending_lsn) {
  auto j = failed_tree();
  auto t = j.fold();
  ASSERT_EQ(t.corrupt, "");
  ASSERT_TRUE(t.failed);
  auto plan = rollback_plan(t);
  ASSERT_EQ(plan.size(), 8u) << describe(plan);
  // Partial states of the procedures that had not ended: 3 (failed), then 1 (waiting).
  expect_item(plan[0], 3, 3, 0, "b2");
  expect_item(plan[1], 1, 3, 0, "r2");
  // Every committed step, newest first, parent and children interleaved, each undone with
  // the data it committed.
  expect_item(plan[2], 3, 2, 10, "b2");
  expect_item(plan[3], 2, 2, 8, "a2");
  expect_item(plan[4], 3, 1, 7, "b1");
  expect_item(plan[5], 2, 1, 6, "a1");
  expect_item(plan[6], 1, 2, 3, "r2");
  expect_item(plan[7], 1, 1, 2, "r1");
  EXPECT_FALSE(plan[0].committed());
  EXPECT_TRUE(plan[2].committed());
}

TEST(rollback_plan_test, failed_procedure_undoes_its_failed_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  j.failed(1, 5, "boom");  // the step of state 5 failed, though 2 was to run next
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 2u) << describe(plan);
  expect_item(plan[0], 1, 5, 0, "r1");
  expect_item(plan[1], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, a_failure_outside_a_step_undoes_the_current_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  j.failed(1, 0, "escalated");  // no step failed: supervision gave up on the tree
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 2u) << describe(plan);
  expect_item(plan[0], 1, 2, 0, "r1");
  expect_item(plan[1], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, committed_lsns_strictly_descend_across_the_tree) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}, {4, "c0"}});
  for (int round = 0; round < 4; ++round)
    for (uint64_t c : {4, 2, 3})
      j.step(c, round + 1, round + 2, "x" + std::to_string(round));
  j.failed(2, 5, "boom");
  auto plan = rollback_plan(j.fold());
  std::vector<uint64_t> lsns;
  for (const auto& u : plan)
    if (u.lsn != 0)
      lsns.push_back(u.lsn);
  ASSERT_EQ(lsns.size(), 13u) << describe(plan);
  for (size_t i = 1; i < lsns.size(); ++i)
    EXPECT_GT(lsns[i - 1], lsns[i]) << describe(plan);
  // The partial undos all come before the first committed step.
  size_t partials = 0;
  while (partials < plan.size() && plan[partials].lsn == 0)
    ++partials;
  EXPECT_EQ(partials, 4u) << describe(plan);
  EXPECT_EQ(plan.size(), partials + lsns.size());
}

TEST(rollback_plan_test, resumes_after_recorded_undos_without_repeating_any) {
  auto full = rollback_plan(failed_tree().fold());
  ASSERT_EQ(full.size(), 8u);
  for (size_t done = 0; done <= full.size(); ++done) {
    auto j = failed_tree();
    for (size_t i = 0; i < done; ++i)
      j.undone(full[i].lsn, full[i].proc_id, full[i].state, "after-undo-" + std::to_string(i));
    auto t = j.fold();
    ASSERT_EQ(t.corrupt, "");
    auto rest = rollback_plan(t);
    ASSERT_EQ(rest.size(), full.size() - done) << "after " << done << ": " << describe(rest);
    for (size_t i = 0; i < rest.size(); ++i) {
      SCOPED_TRACE("after " + std::to_string(done) + " undos, item " + std::to_string(i));
      const auto& want = full[done + i];
      EXPECT_EQ(rest[i].proc_id, want.proc_id);
      EXPECT_EQ(rest[i].state, want.state);
      EXPECT_EQ(rest[i].lsn, want.lsn);
      EXPECT_EQ(rest[i].data, want.data);
    }
  }
}

TEST(rollback_plan_test, finished_children_have_no_partial_undo_but_their_steps_are_undone) {
  auto t = failed_tree().fold();
  auto plan = rollback_plan(t);
  for (const auto& u : plan) {
    if (u.proc_id == 2) {
      EXPECT_NE(u.lsn, 0u) << describe(plan);
    }
  }
}

TEST(rollback_plan_test, no_return_steps_are_left_out) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");            // 2
  j.step(1, 2, 3, "r2", {}, true);  // 3: point of no return
  j.step(1, 3, 4, "r3");            // 4
  j.failed(1, 4, "boom");
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 3u) << describe(plan);
  expect_item(plan[0], 1, 4, 0, "r3");
  expect_item(plan[1], 1, 3, 4, "r3");
  expect_item(plan[2], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, waiting_and_sleeping_procedures_undo_their_current_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});  // 2, 3, 4
  j.step(2, 1, 7, "a1");                           // 5
  j.suspended(2, "k", 0, 7);                       // 6
  j.step(3, 1, 8, "b1");                           // 7
  j.timer(3, 1000, 8);                             // 8
  j.failed(1, 2, "aborted");                       // 9
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 6u) << describe(plan);
  expect_item(plan[0], 3, 8, 0, "b1");
  expect_item(plan[1], 2, 7, 0, "a1");
  expect_item(plan[2], 1, 2, 0, "r1");
  expect_item(plan[3], 3, 1, 7, "b1");
  expect_item(plan[4], 2, 1, 5, "a1");
  expect_item(plan[5], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, nothing_left_once_everything_is_undone) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  auto s = j.step(1, 1, 2, "r1");
  j.failed(1, 2, "boom");
  j.undone(0, 1, 2, "r1");
  j.undone(s, 1, 1, "r0");
  EXPECT_TRUE(rollback_plan(j.fold()).empty());
}

TEST(rollback_plan_test, fresh_root_has_only_its_partial_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0", 4);
  j.failed(1, 4, "boom");
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 1u);
  expect_item(plan[0], 1, 4, 0, "r0");
}

// An abort (or a sibling's failure) while a step ran: the step commits after the Failed
// record. Its state is undone once, as a committed step; the partly run state is the one
// after it, which the stop may report as never started.
TEST(rollback_plan_test, a_failing_step_that_committed_after_all_is_not_undone_twice) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");  // 2
  j.failed(1, 2, "boom");
  j.step(1, 2, 3, "r2");  // 4: state 2's step was still running
  auto t = j.fold();
  EXPECT_EQ(t.root()->failed_state, 0);
  auto plan = rollback_plan(t);
  ASSERT_EQ(plan.size(), 3u) << describe(plan);
  expect_item(plan[0], 1, 3, 0, "r2");
  expect_item(plan[1], 1, 2, 4, "r2");
  expect_item(plan[2], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, a_state_that_never_started_has_no_partial_undo) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}});  // 2, 3
  j.failed(1, 0, "aborted");
  pb::JournalRecord r;
  auto* u = r.mutable_undone();
  u->set_proc_id(2);
  u->set_state(1);
  u->set_never_started(true);
  j.add(r);
  auto t = j.fold();
  EXPECT_TRUE(t.find(2)->partial_undone);
  EXPECT_EQ(t.find(2)->data, "a0");  // nothing ran, nothing changed
  auto plan = rollback_plan(t);
  ASSERT_EQ(plan.size(), 2u) << describe(plan);
  expect_item(plan[0], 1, 2, 0, "r1");
  expect_item(plan[1], 1, 1, 2, "r1");
  EXPECT_EQ(undos_done(t), 1u);
}

TEST(rollback_plan_test, a_step_that_ended_its_procedure_leaves_no_partial_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.failed(1, 0, "aborted");
  pb::JournalRecord r;
  auto* s = r.mutable_step();
  s->set_proc_id(1);
  s->set_executed_state(1);
  s->set_data("r1");
  s->set_ended(true);  // it returned done while the tree was failing
  auto lsn = j.add(r);
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 1u) << describe(plan);
  expect_item(plan[0], 1, 1, lsn, "r1");
}

// Found by the journal-record fuzzer: a tree compacted after an undo (its snapshot counts the
// undone step it left out) and then summarized folded otherwise than the same tree whole.
TEST(rollback_plan_test, a_summary_after_a_compaction_counts_no_undo_left_out) {
  auto full = rollback_plan(failed_tree().fold());
  // Partial states first (lsn 0), then steps: undo up to the first step.
  size_t n = 0;
  while (n < full.size() && full[n].lsn == 0)
    ++n;
  ASSERT_LT(n, full.size());
  ++n;
  auto j = failed_tree();
  for (size_t i = 0; i < n; ++i)
    j.undone(full[i].lsn, full[i].proc_id, full[i].state, "x");
  auto head = j.fold();
  ASSERT_EQ(undos_done(head), n);
  journal_builder k(1, head.last_lsn);
  pb::JournalRecord snap;
  snap.set_format(1);
  *snap.mutable_snapshot() = snapshot_of(head, 0);
  k.add(snap);
  ASSERT_EQ(k.fold().undos_dropped, 1u);  // the undone step, left out
  ASSERT_EQ(undos_done(k.fold()), n);
  j.summary(sample_summary());
  k.summary(sample_summary());
  auto whole = j.fold();
  auto compacted = k.fold();
  EXPECT_EQ(compacted.undos_dropped, 0u);
  EXPECT_EQ(undos_done(compacted), undos_done(whole));
}

TEST(rollback_plan_test, undos_done_counts_what_earlier_incarnations_undid) {
  auto full = rollback_plan(failed_tree().fold());
  for (size_t done = 0; done <= full.size(); ++done) {
    auto j = failed_tree();
    for (size_t i = 0; i < done; ++i)
      j.undone(full[i].lsn, full[i].proc_id, full[i].state, "x");
    auto t = j.fold();
    EXPECT_EQ(undos_done(t), done);
    EXPECT_EQ(undos_done(t) + rollback_plan(t).size(), full.size());
  }
}

}  // namespace
}  // namespace proctor
