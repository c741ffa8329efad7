// The folded state of one procedure tree, rebuilt from its journal records. Recovery folds
// every tree at start-up; a supervisor folds one tree again to restart a crashed subtree;
// a root folds its tree to plan a rollback. One fold, three uses.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <proctor/journal.pb.h>
#include <proctor/proc_state.hpp>

#include "persistence/journal_store.hpp"

namespace proctor {

/// A committed step, as rollback needs it.
struct step_entry {
  uint64_t lsn = 0;
  int32_t executed_state = 0;
  std::string data;        ///< the data the step committed (its undo sees it)
  bool no_return = false;  ///< executed_state does not support rollback
  bool undone = false;
  uint32_t data_version = 0;  ///< the type version `data` is of
};

struct proc_image {
  uint64_t id = 0;
  uint64_t parent_id = 0;
  std::string type;
  uint32_t type_version = 1;
  int32_t priority = 0;
  std::string nonce;
  uint32_t placement_slot = 0;  ///< Submitted.placement_slot (a root placed by a key)
  int64_t submitted_at_ms = 0;
  /// The LSN of its Submitted record (for a child just spawned: of the batch's last entry):
  /// a placeholder whose node an operator forgot after it is lost (cluster_view::lost).
  uint64_t submitted_lsn = 0;

  // Times (wall clock ms; 0 where the journal does not say, as older journals do not).
  /// When it entered its current status: the time of the record that put it there (for a
  /// parent whose children all ended, the last of their ends; after a timer, its wake-up).
  int64_t since_ms = 0;
  int64_t ended_at_ms = 0;      ///< when it ended (its final status's since_ms)
  int64_t committed_at_ms = 0;  ///< its last StepCommitted's (its Suspended / TimerSet's too)

  proc_state status = proc_state::runnable;
  int32_t state = 0;               ///< the state that runs next
  std::string data;                ///< data after the last committed step (or undo)
  uint32_t data_version = 0;       ///< the type version `data` is of (0 only for a summary's)
  std::vector<uint64_t> children;  ///< every child ever spawned, in spawn order
  /// Children of its last committed step, if that step spawned (else none): those it awaits,
  /// and those its next step sees (ctx.children()).
  std::vector<uint64_t> last_spawned;
  std::vector<step_entry> steps;  ///< committed steps, ascending LSN
  /// Committed steps a compaction left out of `steps` (undone, or past a point of no
  /// return: no rollback plan needs them; tree_snapshot.hpp).
  uint64_t steps_compacted = 0;
  /// It committed a step (kept in `steps` or compacted away).
  bool has_committed() const noexcept { return !steps.empty() || steps_compacted > 0; }

  std::string result_json;
  std::string error;
  bool failed = false;  ///< a Failed record names this procedure
  /// The state whose step failed; 0 when the failure came from outside a step (abort,
  /// escalation) or the failing step committed after all: then the current state is the
  /// one that may have run partly.
  int32_t failed_state = 0;
  /// Its steps ended (a step returned done while its tree was failing): no state of it may
  /// have run partly.
  bool steps_ended = false;
  /// The undo of its partly run state is done, or was not needed (the state never started).
  bool partial_undone = false;
  bool bypassed = false;  ///< an operator's Bypassed record ended it SUCCESS
  /// A root's Submitted data (its args as submitted), kept for `proctor resubmit`; empty for
  /// children, fragments' roots and summaries written before it was kept.
  std::string args;
  bool args_kept = false;         ///< `args` is the root's submit (not a summary that predates it)
  uint64_t resubmitted_from = 0;  ///< a root resubmitted by an operator: the old root

  // WAITING on an event / WAITING_TIMEOUT
  std::string event_key;
  int64_t deadline_ms = 0;
  int64_t wake_at_ms = 0;
  std::string event_payload;  ///< set once the event was delivered
  uint64_t wait_lsn = 0;      ///< the Suspended record of its current wait
  std::string call_service;   ///< WAITING for the reply to a call to this service
  std::string call_request;
  bool event_delivered = false;
  bool event_timed_out = false;
  std::string event_failure;  ///< EventDelivered.failure: why a timed-out wait fails it
  /// The wait's on_timeout state (Suspended.timeout_state), kept until the next step
  /// commits: the state a passed deadline runs, and that it may run.
  std::optional<int32_t> timeout_state;

  // Across nodes (docs/cluster.md).
  /// Non-empty: this procedure runs on that node; here it is a placeholder, ended by the
  /// RemoteEnd that node sends (folded as its Finished record, at remote_end_lsn).
  std::string node;
  /// Non-empty: this procedure is the root of a fragment whose parent runs on that node.
  std::string parent_node;
  uint64_t parent_root_id = 0;
  uint64_t tree_root_id = 0;  ///< fragment root: the whole tree's root (ctx.root_id())
  /// Fragment root: how its parent (on the other node) supervises it; null: by its own
  /// type's policy (a journal written before the parent's was carried).
  std::shared_ptr<const pb::Supervision> parent_supervision;
  // Join policies (docs/flow-control.md): of its last spawn, and as a cancelled child.
  uint32_t join_at_least = 0;  ///< children of the last spawn that must succeed (0: all)
  bool join_wait = false;      ///< child_failure::wait_for_siblings
  /// Its parent's Cancelled record names it and no Finished closed it yet: it is stopped,
  /// and its parent undoes its subtree (never run forward again).
  bool cancel_pending = false;
  bool cancelled = false;      ///< a Finished with `cancelled` ended it
  bool cancel_failed = false;  ///< the cancellation contains its own failure
  std::string cancel_reason;
  /// A parent whose last spawn has a policy other than join::all with cancel_siblings:
  /// its children's failures come to it, not to the root.
  bool joins_tolerantly() const noexcept { return join_at_least != 0 || join_wait; }
  uint64_t remote_end_lsn = 0;  ///< the Finished record of a placeholder (0: not ended)
  bool remote_undone = false;   ///< the placeholder's fragment is rolled back there
  bool remote() const noexcept { return !node.empty(); }
};

/// An undo its handler handed to a task queue (UndoDispatched) whose RollbackStepDone is not
/// written yet: the rollback waits for that task again rather than run the handler again.
struct undo_task_image {
  uint64_t proc_id = 0;
  uint64_t lsn = 0;  ///< the StepCommitted undone (0: the undo of a partly run state)
  int32_t state = 0;
  std::string key;   ///< the task's key (a call key)
  std::string spec;  ///< its TaskSpec, serialized
  std::string data;  ///< the procedure's data after the handler
  uint32_t data_version = 0;
};

struct tree_image {
  uint64_t root_id = 0;
  std::map<uint64_t, proc_image> procs;
  uint64_t last_lsn = 0;
  bool failed = false;       ///< rolling back (or rolled back)
  std::string failure;       ///< the first failure's message
  int64_t failed_at_ms = 0;  ///< when the first Failed record was written (0: not recorded)
  bool rolled_back = false;  ///< a RolledBack record closed the rollback
  bool finished = false;     ///< the root ended (summary or Finished of the root)
  bool summarized = false;   ///< held as one TreeSummary record
  int64_t finished_at_ms = 0;
  bool past_no_return = false;
  std::string corrupt;  ///< non-empty: a record could not be read; quarantined
  size_t records = 0;   ///< records folded (damaged ones included)
  /// The events (their EventArrived LSNs) its EventDelivered records consumed, in LSN order.
  std::vector<uint64_t> consumed_events;
  /// Compaction (tree_snapshot.hpp): the LSN of the TreeSnapshot folded (0: none), how
  /// often the tree was compacted, the records those compactions replaced in all, and the
  /// undone steps they left out (still counted as undone by undos_done).
  uint64_t snapshot_lsn = 0;
  uint32_t compactions = 0;
  uint64_t records_folded = 0;
  uint64_t undos_dropped = 0;
  /// Undos waiting for a worker's task, by (procedure, the LSN undone): the latest dispatch.
  std::map<std::pair<uint64_t, uint64_t>, undo_task_image> undo_tasks;

  const proc_image* find(uint64_t id) const {
    auto i = procs.find(id);
    return i == procs.end() ? nullptr : &i->second;
  }
  proc_image* find(uint64_t id) {
    auto i = procs.find(id);
    return i == procs.end() ? nullptr : &i->second;
  }
  const proc_image* root() const { return find(root_id); }
};

/// Folds records of one tree, in ascending LSN, into a tree_image.
class tree_folder {
public:
  explicit tree_folder(uint64_t root_id) { image_.root_id = root_id; }

  /// Adds one record. A value that does not parse marks the tree corrupt.
  void add(uint64_t lsn, std::string_view value);
  void add(uint64_t lsn, const pb::JournalRecord& rec);

  /// Finishes the fold (derives WAITING parents whose children all ended) and returns it.
  tree_image finish();

  /// The image folded so far, before finish(): what a TreeSnapshot holds.
  const tree_image& unfinished() const noexcept { return image_; }

private:
  /// Stack space a record is parsed in; journal records are mostly well under it.
  static constexpr size_t parse_block_size = 2048;

  tree_image image_;
};

/// Folds every record of one tree.
tree_image fold_tree(uint64_t root_id, const std::vector<stored_record>& records);

/// One undo of a rollback plan.
struct undo_item {
  uint64_t proc_id = 0;
  int32_t state = 0;
  uint64_t lsn = 0;  ///< the StepCommitted undone; 0 for the undo of a partly run state
  /// What the undo sees: the data the step committed (lsn != 0), or the data the partly
  /// run state started with (lsn == 0).
  std::string data;
  uint32_t data_version = 0;  ///< the type version `data` is of
  /// A child on another node: its whole fragment is rolled back there, by order (`lsn`:
  /// where it ended here, UINT64_MAX when it had not).
  bool remote = false;
  bool committed() const noexcept { return lsn != 0 && !remote; }
};

/// The task the undo `item` waits for (its UndoDispatched, no RollbackStepDone yet), or null.
const undo_task_image* undo_task_of(const tree_image& tree, const undo_item& item);

/// What remains to undo in a failed tree, in the order to run: first the states that may
/// have run partly (of every procedure that had not ended, unless it stopped before that
/// state started) and the fragments on other nodes that had not ended, then every committed
/// step that is not yet undone and every fragment that ended, by descending LSN (a fragment
/// at the LSN of its end here: every step here that could have seen its end is undone
/// before it, every step that spawned it after it). Steps past a point of no return are
/// left out.
std::vector<undo_item> rollback_plan(const tree_image& tree);

/// The undos of `tree`'s rollback already done (or found unnecessary), for progress.
size_t undos_done(const tree_image& tree);

/// The record of one procedure's summary for a finished tree.
pb::TreeSummary summarize(const tree_image& tree, int64_t finished_at_ms);

}  // namespace proctor
