// The fold keeps the type version of every data blob it keeps.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"

namespace proctor {
namespace {

pb::JournalRecord submitted(uint64_t id, uint64_t parent, uint32_t version, std::string data) {
  pb::JournalRecord r;
  auto* s = r.mutable_submitted();
  s->set_proc_id(id);
  s->set_parent_id(parent);
  s->set_type("t.v");
  s->set_type_version(version);
  s->set_data(std::move(data));
  s->set_state(1);
  return r;
}

pb::JournalRecord step(uint64_t id, int32_t executed, std::string data, uint32_t version) {
  pb::JournalRecord r;
  auto* s = r.mutable_step();
  s->set_proc_id(id);
  s->set_executed_state(executed);
  s->set_next_state(executed + 1);
  s->set_data(std::move(data));
  s->set_data_version(version);
  return r;
}

pb::JournalRecord undone(uint64_t id, uint64_t lsn, int32_t state, std::string data,
                         uint32_t version) {
  pb::JournalRecord r;
  auto* u = r.mutable_undone();
  u->set_proc_id(id);
  u->set_undone_lsn(lsn);
  u->set_state(state);
  u->set_data(std::move(data));
  u->set_data_version(version);
  return r;
}

pb::JournalRecord failed(uint64_t id) {
  pb::JournalRecord r;
  r.mutable_failed()->set_proc_id(id);
  r.mutable_failed()->set_error("x");
  return r;
}

TEST(tree_image_versions_test, a_record_without_a_version_is_of_the_submitted_one) {
  tree_folder f(1);
  f.add(1, submitted(1, 0, 2, "s"));
  f.add(2, step(1, 1, "a", 0));
  auto t = f.finish();
  const auto& p = *t.root();
  EXPECT_EQ(p.data_version, 2u);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].data_version, 2u);
}

TEST(tree_image_versions_test, each_blob_keeps_the_version_it_was_written_by) {
  // Version 1 submitted and ran a step; a node of version 3 ran the next, then rolled back.
  tree_folder f(1);
  f.add(1, submitted(1, 0, 1, "s1"));
  f.add(2, step(1, 1, "a1", 1));
  f.add(3, step(1, 2, "b3", 3));
  f.add(4, failed(1));
  auto t = f.finish();
  const auto& p = *t.root();
  EXPECT_EQ(p.data, "b3");
  EXPECT_EQ(p.data_version, 3u);
  ASSERT_EQ(p.steps.size(), 2u);
  EXPECT_EQ(p.steps[0].data, "a1");
  EXPECT_EQ(p.steps[0].data_version, 1u);
  EXPECT_EQ(p.steps[1].data, "b3");
  EXPECT_EQ(p.steps[1].data_version, 3u);
  auto plan = rollback_plan(t);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].data, "b3");  // the partly run state
  EXPECT_EQ(plan[0].data_version, 3u);
  EXPECT_EQ(plan[1].data, "b3");  // each undo sees what its step committed
  EXPECT_EQ(plan[1].data_version, 3u);
  EXPECT_EQ(plan[2].data, "a1");
  EXPECT_EQ(plan[2].data_version, 1u);
}

TEST(tree_image_versions_test, an_undo_sets_the_version_of_the_data_after_it) {
  tree_folder f(1);
  f.add(1, submitted(1, 0, 1, "s1"));
  f.add(2, step(1, 1, "a1", 0));
  f.add(3, failed(1));
  f.add(4, undone(1, 0, 2, "u3", 3));
  auto t = f.finish();
  EXPECT_EQ(t.root()->data, "u3");
  EXPECT_EQ(t.root()->data_version, 3u);
  f = tree_folder(1);
  f.add(1, submitted(1, 0, 2, "s2"));
  f.add(2, undone(1, 0, 1, "u", 0));  // 0: the submitted version
  EXPECT_EQ(f.finish().root()->data_version, 2u);
}

TEST(tree_image_versions_test, children_have_versions_of_their_own) {
  tree_folder f(1);
  f.add(1, submitted(1, 0, 4, "p"));
  f.add(2, submitted(2, 1, 7, "c"));
  f.add(3, step(2, 1, "c2", 0));
  auto t = f.finish();
  EXPECT_EQ(t.find(1)->data_version, 4u);
  EXPECT_EQ(t.find(2)->data_version, 7u);
  EXPECT_EQ(t.find(2)->steps[0].data_version, 7u);
}

}  // namespace
}  // namespace proctor
