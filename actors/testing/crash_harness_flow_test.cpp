// The crash harness on flow control (docs/flow-control.md): a self-compacting loop and a
// join::any whose loser is cancelled end as their clean runs did, whatever crashes.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include <proctor/crash_harness.hpp>

#include "tests/support/crash_harness_fixture.hpp"

namespace proctor::testing {
namespace {

namespace fs = std::filesystem;
using crash_fixture::crash_harness_test;
using crash_fixture::files_in;
using crash_fixture::has;
using crash_fixture::labels;

// Self-compacting trees (docs/flow-control.md): a crash at every boundary of a loop whose tree
// is compacted every few steps recovers from the snapshot plus what follows it, and ends as
// the clean run did; failing, it still undoes every step it committed.
TEST_F(crash_harness_test, a_loop_whose_tree_compacts_survives_every_boundary) {
  auto o = options("test.compacting_loop", R"({"steps":14,"ledger_dir":")" + ledger_ + "\"}");
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state());
    auto n = files_in(ledger_);
    return n == 14 ? "" : "ledger holds " + std::to_string(n) + " files, want 14";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(rep.unreached.empty()) << rep.summary();
  EXPECT_TRUE(has(rep.boundary_labels, "root: step #13 (LEDGER_STEP)")) << labels(rep);
}

TEST_F(crash_harness_test, a_failing_loop_whose_tree_compacted_undoes_every_step_whatever_crashes) {
  auto o =
    options("test.compacting_loop", R"({"steps":14,"fail_at":12,"ledger_dir":")" + ledger_ + "\"}");
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::ROLLEDBACK)
      return "ended " + pb::ProcState_Name(r.root.state());
    auto n = files_in(ledger_);
    return n == 0 ? "" : "ledger holds " + std::to_string(n) + " files after the rollback";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(rep.unreached.empty()) << rep.summary();
  EXPECT_TRUE(has(rep.boundary_labels, "root: undone #12 (LEDGER_STEP)")) << labels(rep);
}

// Join policies (docs/flow-control.md): a crash at every boundary of a join::any whose loser
// is cancelled (its Cancelled record, its undo, its end) ends as the clean run did: the
// winner's success kept, the loser's file undone, the join seeing both as they ended.
TEST_F(crash_harness_test, a_cancelled_sibling_is_undone_whatever_crashes) {
  auto o = options("test.race_parent", R"({"ledger_dir":")" + ledger_ + "\"}");
  o.events = {{"race.go", "1"}};
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    return fs::exists(ledger_ + "/loser") ? "the cancelled loser's file is still there" : "";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(has(rep.boundary_labels, "root: cancelled #1")) << labels(rep);
  EXPECT_TRUE(has(rep.boundary_labels, "root/1: undone #2 (LEDGER_STEP)")) << labels(rep);
}

// The same with a loser whose step changes its data: where a crash cuts it mid-step, its state
// is undone as a partly run one, with the data it started with; in the clean run, as a
// committed step, with the data it committed. Both are the undo of the same state: undos are
// compared by state, not by data (before, "undo ... ran 0 time(s), the clean run 1").
TEST_F(crash_harness_test, a_cancelled_sibling_that_changed_its_data_is_undone_whatever_crashes) {
  auto o = options("test.race_parent_data", R"({"ledger_dir":")" + ledger_ + "\"}");
  o.events = {{"race.go", "1"}};
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    return fs::exists(ledger_ + "/loser") ? "the cancelled loser's file is still there" : "";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
}

}  // namespace
}  // namespace proctor::testing
