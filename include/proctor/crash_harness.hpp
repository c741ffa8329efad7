// The crash harness: a public testing API that runs a procedure with a crash at every
// journal boundary, forward and in rollback, and checks what every run left behind.
//
// HBase tests its procedures by killing the executor before every store update; Proctor
// hands the same tool to every procedure author:
//
//   TEST(create_table, survives_a_crash_at_every_boundary) {
//     proctor::registry types;
//     types.add<create_table>("acme.create_table");
//     proctor::testing::crash_matrix_options o;
//     o.types = &types;
//     o.type = "acme.create_table";
//     o.args_json = R"({"name":"t1"})";
//     o.work_dir = my_temp_dir;
//     o.reset = [&] { fake_catalog.clear(); };
//     o.check = [&](const proctor::testing::crash_run& r) -> std::string {
//       return fake_catalog.has("t1") ? "" : "t1 missing after " + r.label;
//     };
//     auto report = proctor::testing::run_crash_matrix(o);
//     EXPECT_TRUE(report.ok()) << report.summary();
//   }
//
// A clean run first lists the journal records of the procedure's whole life (its tree, its
// rollback if it fails). Each record is a boundary, named by what it is, not by when it
// was written (crash_boundary.hpp): the position of its procedure in the tree, its kind,
// and its occurrence (the procedure's n-th step commit). A tree with concurrent children
// merges and interleaves its writes differently in every run, but writes the same records,
// so the matrix is the same in every run. For every boundary, one run crashes just before
// the write that carries its record and one just after it: the journal's store freezes as
// a killed process would leave it, the node is torn down, a new node recovers from the same
// directory and runs the procedure to its end. Every run must end in the clean run's final
// state; every step (and undo) the clean run executed must have executed at least once and
// at most twice; and `check` must accept what the run left. A chained run (HBase's "double
// execution") then crashes at the second write of every incarnation until the procedure
// ends. Every run is made and judged, whatever the earlier ones did: the report lists every
// failing boundary, not only the first.
//
// A procedure that waits for an event (`suspend`) gets it from the harness: list it in
// `events`, and every run posts it when the tree waits for it. A tree whose children run on
// other nodes is crashed on each of them: list the nodes in `nodes`. Failures name a step by its
// type and its state's name (procedure::state_name: a state_machine's enum value names,
// "shop.order state RESERVE").
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <proctor/registry.hpp>
#include <proctor/wire.pb.h>

namespace proctor::testing {

/// How a step ran: its procedure's type, its state, undo or not, and the data its handler
/// saw (a step: the data it started with; an undo: the data its step committed, or for a
/// partly run state the data that state started with). Two runs are compared by these, not
/// by procedure ids.
struct step_key {
  std::string type;
  int32_t state = 0;
  bool undo = false;
  std::string data;

  auto operator<=>(const step_key&) const = default;
};

/// What one run did.
struct crash_run {
  std::string label;    ///< "clean", "crash before root/1: step #2 (LEDGER_STEP)", "chained"
  pb::ProcStatus root;  ///< the root's final status
  std::map<step_key, int> executions;
  int crashes = 0;
  uint64_t journal_writes = 0;  ///< writes that became durable, over all incarnations
};

/// An external event the harness posts, as `proctor event KEY PAYLOAD` would.
struct crash_event {
  std::string key;
  std::string payload_json;  ///< the payload (JSON text) the woken step sees
};

/// A task the harness runs as an external worker would (docs/workers.md): every task of
/// `queue` it polls, it completes with `result_json`.
struct crash_task {
  std::string queue;
  std::string result_json;
  std::string fail_error;  ///< if set, each task is failed (not retryable) with it instead
};

struct crash_matrix_options {
  const registry* types = nullptr;  ///< the procedure's type and every type it spawns
  std::string type;
  std::string args_json;
  std::string work_dir;  ///< scratch directory; each run gets its own data directory in it
  size_t workers = 2;
  std::chrono::milliseconds run_timeout{std::chrono::seconds{60}};
  /// Before every run: put the world back as it was (empty the ledger, ...).
  std::function<void()> reset;
  /// After every run: "" if the world is as it must be, otherwise what is wrong.
  std::function<std::string(const crash_run&)> check;
  bool crash_before = true;
  bool crash_after = true;
  bool chained = true;
  /// Events to post in every run, in this order, each once: when a procedure of the tree
  /// waits for its key (its suspend is durable). A crash before the event was durable posts
  /// it again once the restarted node waits for it again, as a client would. The event's
  /// arrival ("tree: event #1 (KEY)") and the delivery that consumes it ("root: delivered
  /// #1") are boundaries like any other: the matrix crashes before and after each.
  std::vector<crash_event> events;
  /// Queues the harness works as a worker: it polls them (on every node) while the tree runs
  /// and completes each task it gets. A complete that a crash left unanswered is sent again
  /// once the node is back, as a worker retries (the node answers the same, or that the task
  /// ended); a task whose lease was journaled but whose poll's answer a crash lost waits for
  /// its lease to run out (give the dispatch a short start_to_close). The lease, the task's
  /// end and its delivery are boundaries like any other ("root: task #1", "root: event #1
  /// (task result)", "root: delivered #1").
  std::vector<crash_task> tasks;
  /// The names of the nodes of an in-process cluster to run the tree on; the root is submitted
  /// to the first, and `child(...).on_node(name)` places a child on another (ctx.nodes() lists
  /// them). Each node has its own directory and journal; requests between them go straight to
  /// the named node. The boundaries are every node's records, named with their node
  /// ("b: root/1: step #2 (LEDGER_STEP)"); a crash at one stops that node alone and starts it
  /// again from its directory while the others go on, as a killed process on one machine is
  /// restarted while its peers keep running; the chained run crashes every node at the second
  /// write of each of its incarnations. Events are posted to the node whose procedure waits.
  /// Empty: one node without a name.
  std::vector<std::string> nodes;
};

struct crash_report {
  size_t boundaries = 0;  ///< distinct journal records of the clean run
  size_t runs = 0;
  size_t crashes = 0;
  /// The boundaries in the order the matrix visits them ("root/1: step #2 (LEDGER_STEP)").
  std::vector<std::string> boundary_labels;
  /// What went wrong, one line per finding ("crash before root/1: step #2 (...): ...").
  std::vector<std::string> failures;
  /// The runs with at least one failure ("crash before root/1: step #2 (...)", "chained").
  std::vector<std::string> failing_boundaries;
  /// Runs whose boundary never came: the tree did not write that record this time (a tree
  /// whose records depend on timing, e.g. a child failing while its siblings run).
  std::vector<std::string> unreached;

  bool ok() const { return failures.empty() && boundaries > 0; }
  std::string summary() const;
};

/// Runs the matrix described above. Blocking; starts and stops nodes in this process.
crash_report run_crash_matrix(const crash_matrix_options& opts);

}  // namespace proctor::testing
