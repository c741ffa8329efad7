// The records that quarantine a tree in its fold (tree_image.hpp): an unparsable or empty one,
// one naming an unknown procedure or a child on another node, a second Submitted, no root.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"
#include "tests/support/journal_builder.hpp"

namespace proctor {
namespace {

using journal_testing::journal_builder;

TEST(tree_image_test, unparsable_value_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.raw(std::string("\xff\xff\xff\xff", 4));  // a varint tag that never ends
  j.step(1, 1, 2, "r1");
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "unparsable record at lsn 2");
  // The records around it are still folded.
  EXPECT_EQ(t.root()->data, "r1");
}

TEST(tree_image_test, record_naming_an_unknown_procedure_marks_the_tree_corrupt) {
  const std::vector<std::function<void(journal_builder&)>> bad{
    [](journal_builder& j) { j.step(9, 1, 2, "x"); },
    [](journal_builder& j) { j.suspended(9, "k", 0, 2); },
    [](journal_builder& j) { j.timer(9, 1, 2); },
    [](journal_builder& j) { j.delivered(9, "k", ""); },
    [](journal_builder& j) { j.failed(9, 1, "e"); },
    [](journal_builder& j) { j.undone(0, 9, 1, ""); },
    [](journal_builder& j) { j.finished(9, pb::SUCCESS); },
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    journal_builder j(1);
    j.submitted(1, 0, "r0");
    bad[i](j);
    j.step(1, 1, 2, "r1");
    auto t = j.fold();
    EXPECT_EQ(t.corrupt, "record at lsn 2 names unknown procedure 9") << "case " << i;
    EXPECT_EQ(t.find(9), nullptr) << "case " << i;
    EXPECT_FALSE(t.failed) << "case " << i;
  }
}

TEST(tree_image_test, first_corruption_is_kept) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(7, 1, 2, "x");
  j.raw(std::string("\xff\xff\xff\xff", 4));
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "record at lsn 2 names unknown procedure 7");
}

// Found by the journal_record fuzzer: a Step for a child placed on another node was folded in
// as a committed step here, so the rollback plan ordered an undo nobody would run.
/// A Submitted record of procedure `id` (child of `parent`) placed on node `node`.
pb::JournalRecord placed_on(uint64_t id, uint64_t parent, const std::string& node) {
  pb::JournalRecord r;
  r.set_format(1);
  auto* s = r.mutable_submitted();
  s->set_proc_id(id);
  s->set_parent_id(parent);
  s->set_type("t.demo");
  s->set_state(1);
  s->set_node(node);
  return r;
}

TEST(tree_image_test, step_of_a_child_on_another_node_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1", {2});
  j.add(placed_on(2, 1, "b"));
  j.step(2, 1, 2, "a1");
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "Step at lsn 4 for procedure 2, which runs on node b");
  ASSERT_NE(t.find(2), nullptr);
  EXPECT_TRUE(t.find(2)->steps.empty());
  for (const auto& u : rollback_plan(t))
    EXPECT_FALSE(u.proc_id == 2 && !u.remote) << "undo of a remote child's step planned here";
}

// Found by the journal_record fuzzer: a second Submitted for a procedure that had committed
// steps replaced it with a placeholder on another node, and the rollback plan then held both
// the fragment's undo and the step's, for a procedure the check counted once.
TEST(tree_image_test, second_submitted_for_a_procedure_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.submitted(2, 1, "a0");
  j.step(2, 1, 2, "a1");
  j.add(placed_on(2, 1, "b"));
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "second Submitted for procedure 2 at lsn 4");
  ASSERT_NE(t.find(2), nullptr);
  EXPECT_FALSE(t.find(2)->remote()) << "the first Submitted stays";
  EXPECT_EQ(t.find(2)->steps.size(), 1u);
}

TEST(tree_image_test, empty_record_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  pb::JournalRecord empty;
  empty.set_format(1);
  j.add(empty);
  EXPECT_EQ(j.fold().corrupt, "empty record at lsn 2");
}

TEST(tree_image_test, missing_root_submitted_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(2, 1, "a0");
  j.step(2, 1, 2, "a1");
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "tree has no Submitted record for its root");
  EXPECT_EQ(fold_tree(1, {}).corrupt, "tree has no Submitted record for its root");
}

}  // namespace
}  // namespace proctor
