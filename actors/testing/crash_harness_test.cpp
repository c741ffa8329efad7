// The crash harness on demo.ledger trees with concurrent children (succeeding, and failing so
// they roll back), on the determinism of its matrix, and on a procedure that is not
// crash-safe (the harness must catch it at every boundary where it breaks, and say so).
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include <proctor/crash_harness.hpp>

#include "tests/support/crash_harness_fixture.hpp"

namespace proctor::testing {
namespace {

using crash_fixture::crash_harness_test;
using crash_fixture::files_in;
using crash_fixture::has;
using crash_fixture::labels;
using crash_fixture::ledger_tree;

TEST_F(crash_harness_test, a_ledger_tree_with_concurrent_children_survives_every_boundary) {
  auto o = options("demo.ledger", ledger_tree(ledger_, R"(,"steps":2)"));
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state());
    auto n = files_in(ledger_);
    return n == 6 ? "" : "ledger holds " + std::to_string(n) + " files, want 6";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(rep.unreached.empty()) << rep.summary();
  // Every procedure's submit and step commits are boundaries of their own (the root's last
  // step commits with the tree's summary).
  for (const char* b : {"root: submitted #1", "root: step #1 (LEDGER_STEP)", "tree: summary #1",
                        "root/0: submitted #1", "root/0: step #2 (LEDGER_STEP)",
                        "root/1: submitted #1", "root/1: step #2 (LEDGER_STEP)"})
    EXPECT_TRUE(has(rep.boundary_labels, b)) << b << " is not a boundary\n" << labels(rep);
  EXPECT_EQ(rep.runs, 2 * rep.boundaries + 2);
}

// A parent that spawns twice sees, at each join, exactly the children of the spawn just before
// it, and none after a step that spawned nothing, whatever boundary its node crashed at (read
// back from its journal, a restarted parent saw the children of every earlier spawn too).
TEST_F(crash_harness_test, a_parent_that_spawns_twice_sees_each_spawns_children_exactly) {
  auto o = options("test.spawns_twice", R"({"ledger_dir":")" + ledger_ + "\"}");
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    auto n = files_in(ledger_);
    return n == 5 ? "" : "ledger holds " + std::to_string(n) + " files, want 5";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(rep.unreached.empty()) << rep.summary();
  EXPECT_TRUE(has(rep.boundary_labels, "root: step #3 (LEDGER_JOIN)")) << labels(rep);
}

TEST_F(crash_harness_test,
       a_failing_ledger_tree_with_concurrent_children_rolls_back_whatever_crashes) {
  auto o = options("demo.ledger", ledger_tree(ledger_, R"(,"steps":3,"fail_at":2)"));
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::ROLLEDBACK)
      return "ended " + pb::ProcState_Name(r.root.state());
    auto n = files_in(ledger_);
    return n == 0 ? "" : "ledger holds " + std::to_string(n) + " files after the rollback";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(rep.unreached.empty()) << rep.summary();
  EXPECT_TRUE(has(rep.boundary_labels, "root/1: undone #3 (LEDGER_STEP)")) << rep.summary();
  EXPECT_GT(rep.crashes, 0u);
}

TEST_F(crash_harness_test, the_matrix_of_a_tree_with_concurrent_children_is_the_same_every_run) {
  // Only clean runs: what the matrix would visit, not the crashes themselves.
  auto o =
    options("demo.ledger", R"({"steps":2,"children":4,"depth":1,"ledger_dir":")" + ledger_ + "\"}");
  o.crash_before = o.crash_after = o.chained = false;
  auto first = run_crash_matrix(o);
  ASSERT_TRUE(first.ok()) << first.summary();
  ASSERT_GE(first.boundaries, 5u * 3);  // five procedures: submit and two steps each
  for (int i = 0; i < 4; ++i) {
    auto again = run_crash_matrix(o);
    ASSERT_TRUE(again.ok()) << again.summary();
    EXPECT_EQ(again.boundary_labels, first.boundary_labels) << "clean run " << i + 2;
  }
}

TEST_F(crash_harness_test, it_reports_every_boundary_where_a_step_that_is_not_idempotent_breaks) {
  auto o = options("test.appender", R"({"steps":3,"ledger_dir":")" + ledger_ + "\"}");
  o.chained = false;
  o.check = [this](const crash_run&) -> std::string {
    std::ifstream in(ledger_ + "/log");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all == "step 0\nstep 1\nstep 2\n" ? "" : "the log holds '" + all + "'";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_FALSE(rep.ok());
  // A crash just before a step's commit always re-runs the step (it ran before its commit
  // was refused): three boundaries certainly fail, each is reported. A crash just after the
  // write before a step may too, when the step starts before the node notices its store
  // froze; nothing else may fail.
  std::vector<std::string> certain{"crash before root: step #1 (LEDGER_STEP)",
                                   "crash before root: step #2 (LEDGER_STEP)",
                                   "crash before tree: summary #1"};
  std::vector<std::string> possible = certain;
  for (const char* b : {"crash after root: submitted #1", "crash after root: step #1 (LEDGER_STEP)",
                        "crash after root: step #2 (LEDGER_STEP)"})
    possible.push_back(b);
  for (const auto& b : certain) {
    EXPECT_TRUE(has(rep.failing_boundaries, b)) << b << " not reported\n" << rep.summary();
    EXPECT_NE(rep.summary().find(b), std::string::npos) << rep.summary();
  }
  for (const auto& b : rep.failing_boundaries)
    EXPECT_TRUE(has(possible, b)) << b << " should not fail\n" << rep.summary();
  EXPECT_NE(rep.summary().find("crash before root: step #2 (LEDGER_STEP): the log holds "
                               "'step 0\nstep 1\nstep 1\nstep 2\n'"),
            std::string::npos)
    << rep.summary();
}

TEST_F(crash_harness_test, failures_name_a_state_by_its_name) {
  auto o = options("test.brancher", R"({"ledger_dir":")" + ledger_ + "\"}");
  o.chained = false;
  auto rep = run_crash_matrix(o);
  EXPECT_FALSE(rep.ok());
  EXPECT_NE(rep.summary().find("crash before root: step #1 (LEDGER_STEP): test.brancher state "
                               "LEDGER_JOIN (data "),
            std::string::npos)
    << rep.summary();
  EXPECT_EQ(rep.summary().find(" state 2 "), std::string::npos) << rep.summary();
}

// A procedure that waits for a payment is crashed at every boundary, the event's arrival and
// its delivery included: the harness posts the event whenever the procedure waits for it.
TEST_F(crash_harness_test, an_event_is_posted_when_the_procedure_waits_for_it_in_every_run) {
  auto o = options("demo.wait_event", R"({"key":"payment:o8","timeout_ms":60000})");
  o.events = {{"payment:o8", R"({"paid":12})"}};
  o.run_timeout = std::chrono::seconds{20};
  o.check = [](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    return r.root.result_json() == R"({"paid":12})" ? "" : "woken by " + r.root.result_json();
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(rep.unreached.empty()) << rep.summary();
  for (const char* b : {"root: suspended #1", "tree: event #1 (payment:o8)", "root: delivered #1"})
    EXPECT_TRUE(has(rep.boundary_labels, b)) << b << " is not a boundary\n" << labels(rep);
  EXPECT_EQ(rep.runs, 2 * rep.boundaries + 2);
}

// A procedure whose steps run in an external worker (docs/workers.md) is crashed at every
// boundary of its tasks (the dispatch, the lease, the result, its delivery): each step's result
// is journaled exactly once and the procedure ends with both, whatever the crash cut.
TEST_F(crash_harness_test, a_procedure_whose_steps_run_in_a_worker_survives_every_boundary) {
  auto o = options("demo.dispatch", R"({"queue":"crash.q","steps":2,"start_to_close_ms":300})");
  o.tasks = {{"crash.q", R"({"ok":1})", ""}};
  o.run_timeout = std::chrono::seconds{30};
  o.check = [](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    return r.root.result_json() == R"({"results":[{"ok":1},{"ok":1}]})"
             ? ""
             : "ended with " + r.root.result_json();
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  for (const char* b : {"root: suspended #1", "root: task #1", "root: event #1 (task result)",
                        "root: delivered #1", "root: task #2", "root: delivered #2"})
    EXPECT_TRUE(has(rep.boundary_labels, b)) << b << " is not a boundary\n" << labels(rep);
}

// A task its worker fails for good fails its procedure with the task's reason, whatever the
// crash cut: a restart between its delivery and the Failed record reads the reason back from
// the EventDelivered record (not a generic "timed out waiting for an event").
TEST_F(crash_harness_test, a_task_failed_for_good_fails_its_procedure_with_its_reason_every_run) {
  auto o = options("demo.dispatch",
                   R"({"queue":"crash.f","steps":1,"start_to_close_ms":300,"max_attempts":1})");
  o.tasks = {{"crash.f", "", "the worker refuses"}};
  o.run_timeout = std::chrono::seconds{30};
  o.check = [](const crash_run& r) -> std::string {
    if (r.root.state() != pb::ROLLEDBACK)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    return r.root.error().find("failed on attempt 1 of 1 (not retryable): worker "
                               "'crash-harness': the worker refuses")
               != std::string::npos
             ? ""
             : "rolled back for " + r.root.error();
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(has(rep.boundary_labels, "root: delivered #1")) << labels(rep);
}

// A procedure that fails after its tasks, whose undos are tasks too (context::dispatch_undo),
// is crashed at every boundary of its rollback (each undo's dispatch, lease, result and the
// RollbackStepDone that consumes it): the rollback resumes the undo where the crash cut it and
// the tree ends ROLLEDBACK every time.
TEST_F(crash_harness_test, a_rollback_whose_undos_run_in_a_worker_survives_every_boundary) {
  auto o = options("demo.dispatch", R"({"queue":"crash.u","steps":2,"start_to_close_ms":300,)"
                                    R"("undo_on_queue":true,"fail_at_end":true})");
  o.tasks = {{"crash.u", R"({"ok":1})", ""}};
  o.run_timeout = std::chrono::seconds{30};
  o.check = [](const crash_run& r) -> std::string {
    if (r.root.state() != pb::ROLLEDBACK)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    return r.root.error().find("fails after its last task") != std::string::npos
             ? ""
             : "rolled back for " + r.root.error();
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  for (const char* b : {"root: undo_dispatched #1", "root: undo_dispatched #2",
                        "root: undone #2 (DISPATCH_SEND)", "root: event #4 (task result)"})
    EXPECT_TRUE(has(rep.boundary_labels, b)) << b << " is not a boundary\n" << labels(rep);
}

// Two events of one key go in their order, each once, whichever of them a crash cut.
TEST_F(crash_harness_test, events_of_one_key_are_posted_in_order_each_once) {
  auto o = options("test.waits_twice", R"({"key":"k"})");
  o.events = {{"k", "1"}, {"k", "2"}};
  o.run_timeout = std::chrono::seconds{20};
  o.check = [](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    return r.root.result_json() == "12" ? "" : "woken by " + r.root.result_json();
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(has(rep.boundary_labels, "tree: event #2 (k)")) << labels(rep);
}

// A tree with one child on this node and one on b: every record of both nodes is a boundary,
// and a crash at one restarts that node alone while the other goes on.
TEST_F(crash_harness_test, a_tree_across_two_nodes_survives_every_boundary_of_each) {
  auto o = options("demo.ledger", ledger_tree(ledger_, R"(,"steps":2,"spread":true)"));
  o.nodes = {"a", "b"};
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state()) + ": " + r.root.error();
    auto n = files_in(ledger_);
    return n == 6 ? "" : "ledger holds " + std::to_string(n) + " files, want 6";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(rep.unreached.empty()) << rep.summary();
  // The child on b: its placeholder on a, its fragment on b, its end journaled back on a.
  for (const char* b : {"a: root: step #1 (LEDGER_STEP)", "a: root/0: step #2 (LEDGER_STEP)",
                        "a: root/1: submitted #1", "b: root/1: submitted #1",
                        "b: root/1: step #2 (LEDGER_STEP)", "a: root/1: finished #1"})
    EXPECT_TRUE(has(rep.boundary_labels, b)) << b << " is not a boundary\n" << labels(rep);
  EXPECT_EQ(rep.runs, 2 * rep.boundaries + 2);
}

TEST_F(crash_harness_test, a_failing_tree_across_two_nodes_rolls_back_on_both_whatever_crashes) {
  auto o = options("demo.ledger", ledger_tree(ledger_, R"(,"steps":3,"fail_at":2,"spread":true)"));
  o.nodes = {"a", "b"};
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::ROLLEDBACK)
      return "ended " + pb::ProcState_Name(r.root.state());
    auto n = files_in(ledger_);
    return n == 0 ? "" : "ledger holds " + std::to_string(n) + " files after the rollback";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_TRUE(has(rep.boundary_labels, "b: root/1: undone #3 (LEDGER_STEP)")) << labels(rep);
  EXPECT_GT(rep.crashes, 0u);
}

// The crashes on b are real: a child there that is not idempotent is caught at b's boundaries.
TEST_F(crash_harness_test, it_catches_a_step_that_is_not_idempotent_on_the_other_node) {
  auto o = options("test.remote_parent", R"({"steps":2,"ledger_dir":")" + ledger_ + "\"}");
  o.nodes = {"a", "b"};
  o.chained = false;
  o.check = [this](const crash_run&) -> std::string {
    std::ifstream in(ledger_ + "/log");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all == "step 0\nstep 1\n" ? "" : "the log holds '" + all + "'";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_FALSE(rep.ok());
  EXPECT_TRUE(has(rep.failing_boundaries, "crash before b: root/0: step #1 (LEDGER_STEP)"))
    << rep.summary();
  for (const auto& b : rep.failing_boundaries)
    EXPECT_EQ(b.rfind("crash before b: ", 0) == 0 || b.rfind("crash after b: ", 0) == 0, true)
      << b << ": only b's crashes re-run the child's steps\n"
      << rep.summary();
}

TEST_F(crash_harness_test, an_unknown_type_is_reported) {
  auto rep = run_crash_matrix(options("no.such", "{}"));
  EXPECT_FALSE(rep.ok());
  EXPECT_NE(rep.summary().find("not registered"), std::string::npos);
}

}  // namespace
}  // namespace proctor::testing
