// Internal: a failed tree's rollback, run by its root (tree_rollback.cpp; its fragments on
// other nodes: tree_rollback_remote.cpp), and a parent's join policies and the cancellation
// of its children (proc_cancel.cpp), whose undos run the same way. Their state is
// rollback_part (proc_rollback_part.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <proctor/journal.pb.h>

#include "actors/base/messages.hpp"
#include "actors/procedure/internal/proc_actor_fwd.hpp"
#include "actors/procedure/internal/proc_children.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"
#include "persistence/journal.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

/// Root: the tree failed (tree_rollback.cpp). Returns false when the tree is past its point
/// of no return, i.e. the failure must be retried forward.
bool begin_tree_failure(proc_actor* self, uint64_t proc_id, int32_t state,
                        const std::string& error);

/// Root: run the rollback of `image` (after every actor of the tree stopped).
void run_rollback(proc_actor* self, std::shared_ptr<const tree_image> image);

/// Root: shows how far the rollback got (or why it is stuck) in the root's status.
void publish_rollback(proc_actor* self, std::string waiting_for);

/// "rolling back: N of M undone", for the root's status.
std::string rollback_progress(const proc_actor_state& st);

/// Root: the rollback plan reached fragment `p` on another node: orders its rollback (once)
/// and waits for its end (tree_rollback_remote.cpp).
void order_remote_rollback(proc_actor* self, const proc_image& p);

/// Root: while its rollback waits for a fragment on another node, shows which (and since
/// when that node is unreachable, if it is).
void show_remote_wait(proc_actor* self);

/// Root: a fragment on another node reported its end (remote_end_atom, journaled by the
/// executor already) while the tree rolls back.
void on_remote_end_in_rollback(proc_actor* self, const std::string& bytes);

/// A child whose failure this parent's join policy contains reports it (child_failed_atom).
caf::result<bool> on_child_failed(proc_actor* self, uint64_t cid, int32_t state,
                                  const std::string& error, bool undone);

/// A child ended SUCCESS (or the parent started again): with enough successes, cancels its
/// siblings still running; a join that can no longer be met fails at once (cancel_siblings).
void join_after_success(proc_actor* self);

/// Whether the join of the last spawn is met once every awaited child ended; "" when it is,
/// else why not.
std::string join_unmet(const proc_actor_state& st);

/// The join cannot be met (`why`): the tree fails (and rolls back) from this procedure.
void fail_join(proc_actor* self, const std::string& why);

/// Journals the cancellation of children `ids`, then stops them; their subtrees are undone
/// once they stopped (run_cancellations).
void cancel_children(proc_actor* self, std::vector<uint64_t> ids, std::string reason, bool failed);

/// Starts undoing the subtrees of cancelled children that stopped, if no plan runs.
void run_cancellations(proc_actor* self);

/// The cancellation's plan ran to its end: journal its children's ends, tell the join.
void finish_cancellation(proc_actor* self);

/// Stops a cancelled child (at a step boundary; a passivated one is dropped).
void stop_cancelled_child(proc_actor* self, child_slot& c);

/// Shows how far the cancellation got (`detail`: what it waits for) as this parent's wait.
void publish_cancellation(proc_actor* self, const std::string& detail);

/// A stop came: the cancellation's plan stops at its boundary (a restart, or the tree's
/// rollback, carries it on from the journal).
void abandon_cancellation(proc_actor* self);

/// Root: an undo job finished.
void on_undo_done(proc_actor* self, step_result& r);

/// The undo at plan_pos failed (`why`): it runs again after a back-off, for ever.
void retry_undo(proc_actor* self, const std::string& why);

/// The version of the data of `item`'s procedure (its type's, as registered now): what an
/// undo's data is journaled with.
uint32_t undone_data_version(const proc_actor_state& st, const undo_item& item);

/// The undo at plan_pos is done, leaving the procedure's `data` (of `data_version`): its
/// RollbackStepDone is journaled (with the delete of event `event_lsn`, the end of its task,
/// if not 0), then the plan goes on.
void finish_undo(proc_actor* self, std::string data, uint32_t data_version, uint64_t event_lsn);

// -- undo_tasks.cpp: undos run by external workers (context::dispatch_undo) --------------------

/// The undo `item` (at plan_pos) was handed to a task queue by an earlier run of its handler
/// (its UndoDispatched, no RollbackStepDone yet): waits for that task again. False if not.
bool resume_undo_task(proc_actor* self, const undo_item& item);

/// The handler of the undo at plan_pos handed it to a task queue (`r.out`, a dispatch):
/// journals that, then waits for the task.
void dispatch_undo_task(proc_actor* self, step_result& r);

/// The end of the task the undo at plan_pos waits for (an event under its key) came: a
/// result ends the undo, a failure retries it.
void on_undo_task_end(proc_actor* self, const std::string& payload, const std::string& failure,
                      uint64_t event_lsn, bool consume);

/// The records saying that the procedures `clean` (those of them `in_scope` accepts, if given)
/// stopped before their current state started: nothing partly run of them to undo, so that
/// a crash during the undos does not undo what never ran either. Marks them so in `image`.
journal_batch never_started_undos(proc_actor* self, tree_image& image,
                                  const std::vector<uint64_t>& clean,
                                  const std::function<bool(uint64_t)>& in_scope);

/// Root: every actor of the failing tree stopped; read the tree back and roll it back.
void rollback_after_stop(proc_actor* self);

}  // namespace proctor
