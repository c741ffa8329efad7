// Join policies in the fold (tree_join.cpp, docs/flow-control.md): cancellations pending until
// their Finished records, and a parent that runs again only once its join is met.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"
#include "tests/support/journal_builder.hpp"

namespace proctor {
namespace {

using journal_testing::journal_builder;

/// Root 1, submitted, whose step 1 spawns children 2 and 3 with join::at_least(k) (and
/// child_failure::wait_for_siblings when `wait`); their Submitted records are the test's.
journal_builder root_spawning_two(uint32_t k, bool wait = false) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  pb::JournalRecord sp;
  auto* s = sp.mutable_step();
  s->set_proc_id(1);
  s->set_executed_state(1);
  s->set_next_state(2);
  s->set_data("r1");
  s->add_children(2);
  s->add_children(3);
  s->set_join_at_least(k);
  s->set_join_wait_for_siblings(wait);
  j.add(sp);
  return j;
}

// Join policies (docs/flow-control.md): a Cancelled record marks the children it names as
// pending cancellation (never run forward again, their parent still WAITING); the Finished
// records with `cancelled` close them, and the parent whose join is met runs again. Their
// undone steps are out of any later rollback plan.
TEST(tree_image_join_test, a_cancellation_is_pending_until_its_finished_records) {
  auto j = root_spawning_two(1);
  j.submitted(2, 1, "a0");
  j.submitted(3, 1, "b0");
  j.step(2, 1, 2, "a1");
  j.finished(2, pb::SUCCESS);
  auto b1 = j.step(3, 1, 2, "b1");
  pb::JournalRecord c;
  c.mutable_cancelled()->set_parent_id(1);
  c.mutable_cancelled()->add_children(3);
  c.mutable_cancelled()->set_reason("join::any met");
  j.add(c);
  auto t = j.fold();
  ASSERT_TRUE(t.corrupt.empty()) << t.corrupt;
  EXPECT_EQ(t.find(1)->join_at_least, 1u);
  EXPECT_TRUE(t.find(3)->cancel_pending);
  EXPECT_EQ(t.find(3)->cancel_reason, "join::any met");
  EXPECT_EQ(t.find(1)->status, proc_state::waiting) << "runs on before its children are undone";
  j.undone(b1, 3, 1, "b0");
  pb::JournalRecord f;
  f.mutable_finished()->set_proc_id(3);
  f.mutable_finished()->set_state(pb::ROLLEDBACK);
  f.mutable_finished()->set_error("join::any met");
  f.mutable_finished()->set_cancelled(true);
  j.add(f);
  t = j.fold();
  EXPECT_FALSE(t.find(3)->cancel_pending);
  EXPECT_TRUE(t.find(3)->cancelled);
  EXPECT_EQ(t.find(3)->status, proc_state::rolledback);
  EXPECT_EQ(t.find(1)->status, proc_state::runnable);
  // A later failure of the tree undoes the rest, and nothing of the cancelled child again.
  j.failed(1, 0, "aborted");
  auto plan = rollback_plan(j.fold());
  for (const auto& item : plan)
    EXPECT_NE(item.proc_id, 3u) << "the cancelled child is undone twice";
}

// A parent whose join cannot be met stays WAITING when its children all ended: its actor
// fails the join (it must not run on as if the join were met).
TEST(tree_image_join_test, an_unmet_join_does_not_let_the_parent_run) {
  auto j = root_spawning_two(2, true);
  j.submitted(2, 1, "a0");
  j.submitted(3, 1, "b0");
  j.finished(2, pb::SUCCESS);
  pb::JournalRecord f;
  f.mutable_finished()->set_proc_id(3);
  f.mutable_finished()->set_state(pb::FAILED);
  f.mutable_finished()->set_cancelled(true);
  j.add(f);
  auto t = j.fold();
  EXPECT_TRUE(t.find(1)->join_wait);
  EXPECT_EQ(t.find(1)->status, proc_state::waiting);
}

}  // namespace
}  // namespace proctor
