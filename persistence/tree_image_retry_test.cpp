// The fold of what `proctor retry` and `proctor resubmit` journal: a Retried record changes
// nothing (the procedure runs its step again from its last commit either way) and must name a
// procedure of the tree; a root's submit (its args, type version, priority and the root it was
// resubmitted from) survives into its tree's summary and back, so a ROLLEDBACK tree can be
// resubmitted once only its summary is left.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"

namespace proctor {
namespace {

class retry_fold : public ::testing::Test {
protected:
  void add(pb::JournalRecord r) {
    r.set_format(1);
    records_.push_back(stored_record{1, next_lsn_++, r.SerializeAsString()});
  }
  void submitted(uint64_t id, uint64_t parent) {
    pb::JournalRecord r;
    auto* s = r.mutable_submitted();
    s->set_proc_id(id);
    s->set_parent_id(parent);
    s->set_type("t.demo");
    s->set_type_version(3);
    s->set_state(1);
    s->set_data("args of " + std::to_string(id));
    s->set_priority(7);
    s->set_resubmitted_from(parent == 0 ? 40 : 0);
    add(r);
  }
  void step(uint64_t id, int32_t executed, int32_t next, std::string data) {
    pb::JournalRecord r;
    auto* s = r.mutable_step();
    s->set_proc_id(id);
    s->set_executed_state(executed);
    s->set_next_state(next);
    s->set_attempt(1);
    s->set_data(std::move(data));
    s->set_data_version(3);
    add(r);
  }
  void retried(uint64_t id) {
    pb::JournalRecord r;
    auto* t = r.mutable_retried();
    t->set_proc_id(id);
    t->set_state(2);
    t->set_attempts(3);
    t->set_was_failed(true);
    t->set_error("still broken");
    add(r);
  }
  tree_image fold() const { return fold_tree(1, records_); }

  std::vector<stored_record> records_;
  uint64_t next_lsn_ = 1;
};

TEST_F(retry_fold, a_retried_record_leaves_the_procedure_runnable_at_its_last_commit) {
  submitted(1, 0);
  step(1, 1, 2, "committed");
  retried(1);
  auto t = fold();
  ASSERT_TRUE(t.corrupt.empty()) << t.corrupt;
  const auto* p = t.root();
  EXPECT_EQ(p->status, proc_state::runnable);
  EXPECT_EQ(p->state, 2);
  EXPECT_EQ(p->data, "committed");
  EXPECT_EQ(p->steps.size(), 1u);
}

TEST_F(retry_fold, a_retry_of_an_unknown_procedure_quarantines_the_tree) {
  submitted(1, 0);
  retried(9);
  EXPECT_NE(fold().corrupt.find("unknown procedure 9"), std::string::npos) << fold().corrupt;
}

TEST_F(retry_fold, the_roots_submit_survives_into_its_summary_and_back) {
  submitted(1, 0);
  submitted(2, 1);
  step(1, 1, 2, "changed by the step");
  auto t = fold();
  const auto* root = t.root();
  EXPECT_TRUE(root->args_kept);
  EXPECT_EQ(root->args, "args of 1");  // what was submitted, not what a step committed
  EXPECT_EQ(root->resubmitted_from, 40u);
  EXPECT_FALSE(t.find(2)->args_kept);  // children are not resubmitted
  pb::JournalRecord rec;
  rec.set_format(1);
  *rec.mutable_summary() = summarize(t, 5);
  const auto& ps = rec.summary().procs(0);
  ASSERT_EQ(ps.proc_id(), 1u);
  EXPECT_EQ(ps.args(), "args of 1");
  EXPECT_EQ(ps.type_version(), 3u);
  EXPECT_EQ(ps.priority(), 7);
  EXPECT_EQ(ps.resubmitted_from(), 40u);
  EXPECT_EQ(rec.summary().procs(1).args(), "");
  tree_folder f(1);
  f.add(99, rec);
  auto back = f.finish();
  ASSERT_TRUE(back.summarized);
  EXPECT_TRUE(back.root()->args_kept);
  EXPECT_EQ(back.root()->args, "args of 1");
  EXPECT_EQ(back.root()->type_version, 3u);
  EXPECT_EQ(back.root()->priority, 7);
  EXPECT_EQ(back.root()->resubmitted_from, 40u);
}

TEST_F(retry_fold, a_summary_written_before_args_were_kept_says_so) {
  pb::JournalRecord rec;
  rec.set_format(1);
  auto* p = rec.mutable_summary()->add_procs();
  p->set_proc_id(1);
  p->set_type("t.demo");
  p->set_state(pb::ROLLEDBACK);
  tree_folder f(1);
  f.add(1, rec);
  EXPECT_FALSE(f.finish().root()->args_kept);
}

}  // namespace
}  // namespace proctor
