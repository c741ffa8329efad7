// The fold of a Bypassed record (`proctor bypass`): the procedure ends SUCCESS, a WAITING
// parent whose children all ended runs again, a bypassed root ends its tree, and a record
// naming an unknown procedure quarantines the tree like any.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"

namespace proctor {
namespace {

class bypass_fold : public ::testing::Test {
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
    s->set_type_version(1);
    s->set_state(1);
    add(r);
  }
  void step(uint64_t id, int32_t executed, int32_t next, std::vector<uint64_t> children = {}) {
    pb::JournalRecord r;
    auto* s = r.mutable_step();
    s->set_proc_id(id);
    s->set_executed_state(executed);
    s->set_next_state(next);
    s->set_attempt(1);
    for (auto c : children)
      s->add_children(c);
    add(r);
  }
  void suspended(uint64_t id) {
    pb::JournalRecord r;
    r.mutable_suspended()->set_proc_id(id);
    r.mutable_suspended()->set_event_key("k");
    r.mutable_suspended()->set_resume_state(2);
    add(r);
  }
  void bypassed(uint64_t id) {
    pb::JournalRecord r;
    r.mutable_bypassed()->set_proc_id(id);
    r.mutable_bypassed()->set_state(pb::WAITING);
    r.mutable_bypassed()->set_forced(true);
    add(r);
  }
  tree_image fold() const { return fold_tree(1, records_); }

  std::vector<stored_record> records_;
  uint64_t next_lsn_ = 1;
};

TEST_F(bypass_fold, a_bypassed_child_ends_success_and_its_waiting_parent_runs_again) {
  submitted(1, 0);
  step(1, 1, 2, {2});
  submitted(2, 1);
  step(2, 1, 2);
  suspended(2);
  auto before = fold();
  ASSERT_TRUE(before.corrupt.empty()) << before.corrupt;
  EXPECT_EQ(before.find(2)->status, proc_state::waiting);
  EXPECT_EQ(before.find(1)->status, proc_state::waiting);

  bypassed(2);
  auto t = fold();
  ASSERT_TRUE(t.corrupt.empty()) << t.corrupt;
  EXPECT_EQ(t.find(2)->status, proc_state::success);
  EXPECT_TRUE(t.find(2)->bypassed);
  EXPECT_EQ(t.find(1)->status, proc_state::runnable);
  EXPECT_FALSE(t.finished);
  EXPECT_FALSE(t.find(1)->bypassed);
}

TEST_F(bypass_fold, a_bypassed_root_ends_its_tree) {
  submitted(1, 0);
  step(1, 1, 2);
  suspended(1);
  bypassed(1);
  auto t = fold();
  ASSERT_TRUE(t.corrupt.empty()) << t.corrupt;
  EXPECT_TRUE(t.finished);
  EXPECT_EQ(t.root()->status, proc_state::success);
  auto s = summarize(t, 5);
  ASSERT_EQ(s.procs_size(), 1);
  EXPECT_EQ(s.procs(0).state(), pb::SUCCESS);
  EXPECT_TRUE(s.procs(0).bypassed());
  // The summary keeps the mark when it is folded again.
  pb::JournalRecord r;
  *r.mutable_summary() = s;
  add(r);
  EXPECT_TRUE(fold().root()->bypassed);
}

TEST_F(bypass_fold, a_bypass_of_an_unknown_procedure_quarantines_the_tree) {
  submitted(1, 0);
  bypassed(9);
  EXPECT_NE(fold().corrupt.find("unknown procedure 9"), std::string::npos) << fold().corrupt;
}

}  // namespace
}  // namespace proctor
