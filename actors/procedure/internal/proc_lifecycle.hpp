// Internal: a procedure actor's life cycle, shared by its files: its behavior
// (procedure_actor.cpp), its status, its steps and their commits (proc_steps.cpp), the
// journal, its children's spawns, restarts and stops (proc_start.cpp, proc_supervision.cpp),
// its tree's end and compaction (tree_compaction.cpp), and an operator's bypass and retry.
// Waiting and passivation are in proc_waits.hpp; rollback and cancellation in
// proc_rollback.hpp.
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

/// The actor's behavior (procedure_actor.cpp).
caf::behavior procedure_actor(proc_actor* self, proc_start start);

/// Sets its status; a change starts its since_ms at `at_ms` (the time of the journal record
/// that changed it), or now when no record did (0).
void set_status(proc_actor* self, proc_state s, int64_t at_ms);

/// This procedure's status as the executor keeps it (since_ms included).
proc_update current_update(proc_actor* self);
/// Sends the executor this procedure's current status. What it waits for is journaled
/// (children, an event, a timer, a reply; "": nothing), so the executor shows since_ms;
/// a `passing` wait (a lock, a retry's back-off), which a restart does not read back,
/// leaves the executor to time it.
void publish(proc_actor* self, std::string waiting_for = {}, bool passing = false);

/// Queues the next step on the scheduler. With `now` (the actor is handling a message and
/// nothing is in flight), a step that needs no turn from the scheduler runs right here.
void schedule(proc_actor* self, bool now = false);

/// Appends `batch`; runs `then` once it is durable. A journal error means fail-stop.
void journal_append(proc_actor* self, journal_batch batch, std::function<void()> then);

/// Appends `batch`; runs `then(last_lsn, batch_size)` once it is durable (the batch's
/// entries have the consecutive LSNs ending at last_lsn).
void journal_append_lsn(proc_actor* self, journal_batch batch,
                        std::function<void(uint64_t, size_t)> then);

/// Sets the actor's state from its procedure's entry in `s.image` and makes its instance
/// (proc_start.cpp); false if it cannot (not in the image, unknown type, unloadable data).
bool init_from_image(proc_actor* self, proc_start& s);

/// Spawns (watched: watch_child) the actor of child `cid` from `image`; `fresh`: its spawn was just
/// committed, nothing of it ran yet; `timer_due`: see proc_start::timer_due; `entry`: its
/// entry in `image`, if at hand (else looked up).
void spawn_child(proc_actor* self, const std::shared_ptr<const tree_image>& image, uint64_t cid,
                 bool fresh = false, bool timer_due = false, const proc_image* entry = nullptr);

/// Respawns the children `ids` from the journal's current image of the tree.
void restart_children(proc_actor* self, std::vector<uint64_t> ids);

/// Handles the end of a watched actor (watch_child, watch_children): a child that went
/// otherwise than by saying its end or its stop, or the parent (proc_supervision.cpp).
void on_down(proc_actor* self, caf::down_msg& msg);

/// Attaches to `child` the functor that sends this actor a down_msg when the child goes
/// down for a reason other than normal; a child that quits normally has said its end
/// (subtree_done) or its stop (stopped_atom) just before, whose handlers call child_went.
void watch_child(proc_actor* self, const caf::actor& child);

/// Child `cid`'s actor, which sent the message being handled, quits next: what a down
/// message after it did (its slot let go, a live place for a queued wake-up, a stop
/// answered) is done now. Nothing if the message came from an actor the slot no longer holds.
void child_went(proc_actor* self, uint64_t cid);

/// Makes st.child_addrs and attaches to this actor the functor that, when it goes down for
/// whatever reason, sends each child still live a down_msg of this actor with that reason:
/// a child goes down with its parent (on_down). Once per actor, at its first child's spawn
/// (proc_supervision.cpp).
void watch_children(proc_actor* self);

/// Stops this actor's subtree at a step boundary. A child then reports to its parent
/// (stopped_atom, with the procedures of its subtree whose current state never started)
/// and quits; a failing root rolls its tree back.
void stop_subtree(proc_actor* self);
void maybe_finish_stop(proc_actor* self);

/// A child asked to stop did (`clean`: what it reported), or went down (nullptr).
void child_stopped(proc_actor* self, child_slot& c, const std::vector<uint64_t>* clean);

/// The procedures of this (stopped) subtree whose current state never started, this one
/// included when that holds for it.
std::vector<uint64_t> stopped_clean(proc_actor* self);

/// Fragment root: its last step returned done: journal it with the end for the parent's
/// node, then quit (the fragment's records stay until released).
void finish_fragment(proc_actor* self, pb::JournalRecord step, std::string result_json,
                     std::function<void()> after_commit);

/// Counts the records `batch` adds to this procedure's tree; past the tree's threshold, asks
/// the root to compact it (tree_compaction.cpp).
void count_tree_records(proc_actor* self, const journal_batch& batch);

/// Root: folds its tree's journal into one record, if it may (tree_compaction.cpp).
void compact_tree(proc_actor* self);

/// A WAITING parent whose last spawned children all ended runs again.
void maybe_join(proc_actor* self);

/// The root's summary of a finished tree, to the executor; then the root quits.
void finish_tree(proc_actor* self, std::vector<proc_update> procs, bool rolled_back);

/// After a commit: carry on, or stop if a stop was requested meanwhile.
void proceed(proc_actor* self);

/// A step (not an undo) finished: commit its outcome and act on it (proc_steps.cpp).
void on_step_done(proc_actor* self, step_result& r);

/// A business failure of the step of `state` (retry, roll back, or retry forward).
void on_business_failure(proc_actor* self, int32_t state, const std::string& error);

/// An operator's bypass on its way to (or at) its procedure (proc_bypass.cpp): answers ""
/// once the Bypassed record is durable, else why it was refused.
caf::result<std::string> on_bypass(proc_actor* self, bypass_order& order);

/// An operator's retry on its way to (or at) its procedure (proc_retry.cpp): answers "" once
/// the Retried record is durable (the step is scheduled again), else why it was refused.
caf::result<std::string> on_operator_retry(proc_actor* self, retry_order& order);

/// Whether the step of `state` (its undo, if `undo`) of `inst` runs on its actor instead of
/// a worker thread: its type (`type`, null if unknown) is declared nonblocking, or the
/// procedure says so for that state (procedure::never_blocks).
inline bool runs_on_actor(const procedure_type* type, const procedure& inst, int32_t state,
                          bool undo) {
  return (type != nullptr && type->nonblocking) || inst.never_blocks(state, undo);
}

}  // namespace proctor
