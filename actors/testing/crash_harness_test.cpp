// The crash harness on demo.ledger trees with concurrent children (succeeding, and failing so
// they roll back), on the determinism of its matrix, and on a procedure that is not
// crash-safe (the harness must catch it at every boundary where it breaks, and say so).
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include <proctor/crash_harness.hpp>
#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "procedures/demo.hpp"

namespace proctor::testing {
namespace {

namespace fs = std::filesystem;

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
    ++n;
  return n;
}

/// Not idempotent: each of its `steps` steps appends a line, so a re-run after a crash
/// leaves two lines where one was meant.
class appender : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  appender() { on(pb::LEDGER_STEP, &appender::append, &appender::nothing); }

private:
  outcome append(pb::LedgerData& d, context&) {
    std::ofstream(d.ledger_dir() + "/log", std::ios::app) << "step " << d.step() << "\n";
    d.set_step(d.step() + 1);
    return d.step() >= d.steps() ? done() : next(pb::LEDGER_STEP);
  }
  void nothing(pb::LedgerData&, context&) {}
};

/// Not crash-safe in another way: its first step leaves a mark, and a re-run that finds the
/// mark skips LEDGER_JOIN, so a crash before the first commit loses a state's run.
class brancher : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  brancher() {
    on(pb::LEDGER_STEP, &brancher::mark, &brancher::nothing);
    on(pb::LEDGER_JOIN, &brancher::join, &brancher::nothing);
  }

private:
  outcome mark(pb::LedgerData& d, context&) {
    auto mark = d.ledger_dir() + "/mark";
    if (fs::exists(mark))
      return done();
    std::ofstream(mark) << "x";
    return next(pb::LEDGER_JOIN);
  }
  outcome join(pb::LedgerData&, context&) { return done(); }
  void nothing(pb::LedgerData&, context&) {}
};

/// Spawns twice: one demo.ledger child of one step, then two of two steps each; each join
/// checks that ctx.children() holds exactly the children of the spawn just before it, and the
/// step after the second join that it sees none. A mismatch fails the tree.
class spawns_twice : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  spawns_twice() {
    on(pb::LEDGER_STEP, &spawns_twice::step, &spawns_twice::nothing);
    on(pb::LEDGER_JOIN, &spawns_twice::join, &spawns_twice::nothing);
  }

private:
  static std::string seen(const context& ctx) {
    std::string out;
    for (const auto& c : ctx.children())
      out += std::to_string(c.id) + ":" + c.result_json + " ";
    return out;
  }
  std::vector<child_spec> kids(const pb::LedgerData& d, int n, int steps) {
    pb::LedgerData c;
    c.set_ledger_dir(d.ledger_dir());
    c.set_steps(steps);
    std::vector<child_spec> out;
    for (int i = 0; i < n; ++i)
      out.push_back(child("demo.ledger", c));
    return out;
  }
  outcome step(pb::LedgerData& d, context& ctx) {
    if (d.step() == 3)
      return ctx.children().empty() ? done() : fail("after a plain step, children " + seen(ctx));
    d.set_step(1);
    return spawn(kids(d, 1, 1), pb::LEDGER_JOIN);
  }
  outcome join(pb::LedgerData& d, context& ctx) {
    const size_t want = d.step() == 1 ? 1 : 2;
    const std::string result = d.step() == 1 ? R"({"steps":1})" : R"({"steps":2})";
    if (ctx.children().size() != want)
      return fail("join " + std::to_string(d.step()) + " sees children " + seen(ctx));
    for (const auto& c : ctx.children())
      if (c.state != proc_state::success || c.result_json != result)
        return fail("join " + std::to_string(d.step()) + " sees children " + seen(ctx));
    if (d.step() == 1) {
      d.set_step(2);
      return spawn(kids(d, 2, 2), pb::LEDGER_JOIN);
    }
    d.set_step(3);
    return next(pb::LEDGER_STEP);
  }
  void nothing(pb::LedgerData&, context&) {}
};

/// Waits for two events of one key, and ends with their payloads one after the other.
class waits_twice : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  waits_twice() {
    on(pb::WAIT_EVENT_SUSPEND, &waits_twice::wait, &waits_twice::nothing);
    on(pb::WAIT_EVENT_RESUME, &waits_twice::woken, &waits_twice::nothing);
  }

private:
  outcome wait(pb::WaitEventData& d, context&) { return suspend(d.key(), pb::WAIT_EVENT_RESUME); }
  outcome woken(pb::WaitEventData& d, context& ctx) {
    bool first = d.payload_json().empty();
    d.set_payload_json(d.payload_json() + ctx.event_payload());
    return first ? suspend(d.key(), pb::WAIT_EVENT_RESUME) : done(d.payload_json());
  }
  void nothing(pb::WaitEventData&, context&) {}
};

/// Spawns one test.appender child on node b, with its own data.
class remote_parent : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  remote_parent() {
    on(pb::LEDGER_STEP, &remote_parent::spawn_on_b, &remote_parent::nothing);
    on(pb::LEDGER_JOIN, &remote_parent::join, &remote_parent::nothing);
  }

private:
  outcome spawn_on_b(pb::LedgerData& d, context&) {
    std::vector<child_spec> kids;
    kids.push_back(child("test.appender", d).on_node("b"));
    return spawn(std::move(kids), pb::LEDGER_JOIN);
  }
  outcome join(pb::LedgerData&, context&) { return done(); }
  void nothing(pb::LedgerData&, context&) {}
};

/// A loop of `steps` idempotent steps, each making a file its undo removes, failing at
/// `fail_at` (if set); registered with compact_after(6), so its tree is compacted every few
/// steps while it runs, and crashes fall on trees read back from their snapshots.
class compacting_loop : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  compacting_loop() { on(pb::LEDGER_STEP, &compacting_loop::step, &compacting_loop::undo); }

private:
  static std::string file(const pb::LedgerData& d, int s) {
    return d.ledger_dir() + "/step." + std::to_string(s);
  }
  outcome step(pb::LedgerData& d, context&) {
    if (d.has_fail_at() && d.step() == d.fail_at())
      return fail("failing at step " + std::to_string(d.step()) + " as asked");
    std::ofstream(file(d, d.step())) << "x";
    d.set_touched(d.step());
    d.set_step(d.step() + 1);
    return d.step() >= d.steps() ? done() : next(pb::LEDGER_STEP);
  }
  void undo(pb::LedgerData& d, context& ctx) {
    fs::remove(file(d, ctx.undo_of_committed_step() ? d.touched() : d.step()));
  }
};

/// Join policies (docs/flow-control.md): a parent spawning a winner, which waits for the
/// harness's event "race.go" and ends, and a loser, which makes a file its undo removes and
/// waits for an event that never comes; join::any cancels the loser once the winner ended.
/// The join step checks what it sees: the winner SUCCESS, the loser ROLLEDBACK, cancelled.
template <bool LoserChangesData>
class race_parent_of : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  race_parent_of() {
    on(pb::LEDGER_STEP, &race_parent_of::spawn_both, &race_parent_of::nothing);
    on(pb::LEDGER_JOIN, &race_parent_of::join, &race_parent_of::nothing);
  }

private:
  outcome spawn_both(pb::LedgerData& d, context&) {
    const char* loser = LoserChangesData ? "test.race_loser_data" : "test.race_loser";
    return spawn({child("test.race_winner", d), child(loser, d)}, pb::LEDGER_JOIN)
      .join(join::any());
  }
  outcome join(pb::LedgerData&, context& ctx) {
    const auto& c = ctx.children();
    if (c.size() != 2 || c[0].state != proc_state::success || c[1].state != proc_state::rolledback
        || !c[1].cancelled)
      return fail("the join saw the wrong ends");
    return done();
  }
  void nothing(pb::LedgerData&, context&) {}
};

class race_winner : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  race_winner() {
    on(pb::LEDGER_STEP, &race_winner::wait, &race_winner::nothing);
    on(pb::LEDGER_JOIN, &race_winner::end, &race_winner::nothing);
  }

private:
  outcome wait(pb::LedgerData&, context&) { return suspend("race.go", pb::LEDGER_JOIN); }
  outcome end(pb::LedgerData&, context&) { return done(); }
  void nothing(pb::LedgerData&, context&) {}
};

/// The loser; with `ChangesData`, its step changes its data before it suspends, so that its
/// undo's data differs between a committed step (the clean run) and a step cut mid-way (a
/// crash run).
template <bool ChangesData>
class race_loser_of : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  race_loser_of() {
    on(pb::LEDGER_STEP, &race_loser_of::mark, &race_loser_of::unmark);
    on(pb::LEDGER_JOIN, &race_loser_of::end, &race_loser_of::nothing);
  }

private:
  outcome mark(pb::LedgerData& d, context&) {
    if (ChangesData)
      d.set_step(d.step() + 1);
    std::ofstream(d.ledger_dir() + "/loser") << "x";
    return suspend("race.never", pb::LEDGER_JOIN);
  }
  void unmark(pb::LedgerData& d, context&) { fs::remove(d.ledger_dir() + "/loser"); }
  outcome end(pb::LedgerData&, context&) { return done(); }
  void nothing(pb::LedgerData&, context&) {}
};

class crash_harness_test : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/proctor-crash-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ledger_ = dir_ + "/ledger";
    fs::create_directories(ledger_);
    register_demo_procedures(types_);
    types_.add<appender>("test.appender");
    types_.add<brancher>("test.brancher");
    types_.add<waits_twice>("test.waits_twice");
    types_.add<remote_parent>("test.remote_parent");
    types_.add<compacting_loop>("test.compacting_loop").compact_after(6);
    types_.add<race_parent_of<false>>("test.race_parent");
    types_.add<race_winner>("test.race_winner");
    types_.add<race_loser_of<false>>("test.race_loser");
    types_.add<spawns_twice>("test.spawns_twice");
    types_.add<race_loser_of<true>>("test.race_loser_data");
    types_.add<race_parent_of<true>>("test.race_parent_data");
  }
  void TearDown() override { fs::remove_all(dir_); }

  crash_matrix_options options(const std::string& type, const std::string& args) {
    crash_matrix_options o;
    o.types = &types_;
    o.type = type;
    o.args_json = args;
    o.work_dir = dir_ + "/work";
    o.reset = [this] {
      fs::remove_all(ledger_);
      fs::create_directories(ledger_);
    };
    return o;
  }

  std::string dir_, ledger_;
  registry types_;
};

std::string ledger_tree(const std::string& ledger, const std::string& extra = "") {
  return R"({"children":2,"depth":1,"ledger_dir":")" + ledger + "\"" + extra + "}";
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string labels(const crash_report& rep) {
  std::string out = "boundaries:";
  for (const auto& l : rep.boundary_labels)
    out += "\n  " + l;
  return out;
}

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

namespace proctor::testing {
namespace {

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

}  // namespace
}  // namespace proctor::testing

namespace proctor::testing {
namespace {

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
