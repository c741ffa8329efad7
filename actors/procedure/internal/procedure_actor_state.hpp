// Internal: the state of a procedure actor, shared by its life cycle (procedure_actor.cpp),
// its steps and their outcomes (proc_steps.cpp), waiting (proc_waiting.cpp), its supervision
// of children (proc_supervision.cpp) and, for a root, the tree's rollback (tree_rollback.cpp).
// What concerns waiting and giving actors up is declared in proc_waits.hpp (included below).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/base/messages.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"
#include "actors/wire/wall_clock.hpp"
#include <proctor/journal.pb.h>
#include "persistence/journal.hpp"
#include "supervision/restart_tracker.hpp"

namespace proctor {

using subtree_done_atom = caf::atom_constant<caf::atom("subdone")>;
using stopped_atom = caf::atom_constant<caf::atom("stopped")>;  // child -> parent
using undo_retry_atom = caf::atom_constant<caf::atom("undoretry")>;
using compact_atom = caf::atom_constant<caf::atom("compact")>;  // -> the root
/// child -> parent whose join policy contains its failure: (id, state, error, undone);
/// answers whether the tree rolls back, as the root's tree_fail_atom does. For a child on
/// another node whose fragment rolled back there (`undone`): whether the policy contains it
/// (its placeholder then reports it ended; else the placeholder fails the tree itself).
using child_failed_atom = caf::atom_constant<caf::atom("childfail")>;

/// How a child ended, with the final status of every procedure in its subtree (so the root
/// can write the tree's summary without reading the journal).
struct subtree_done {
  child_result result;
  std::vector<proc_update> procs;
};

/// The live actors of a procedure's children, actor -> child id.
using live_children = std::unordered_map<caf::actor_addr, uint64_t>;

struct child_slot {
  uint64_t id = 0;
  caf::actor handle;  ///< invalid while the child is down (awaiting restart) or ended
  bool ended = false;
  bool restarting = false;
  bool awaited = false;  ///< spawned by the last spawn step: the parent waits for it
  /// Asked to stop; ends with its stopped_atom or, whatever else happens to it, its down
  /// message (the parent monitors it), so a stop never waits for an answer that cannot come.
  bool stop_pending = false;
  /// Its last stop report: the procedures of its subtree whose current state never started
  /// (cleared when it is spawned again).
  std::vector<uint64_t> stopped_clean;
  child_result result;
  int64_t ended_at_ms = 0;  ///< when it ended, as its journal records say (0: not known)
  /// Passivated: read back waiting for a timer (wait(duration)), with nothing of its own
  /// running, and not spawned: the parent holds its wake-up with the timeout actor under
  /// the child's own name, and spawns it from the parent's image when it is due (or when
  /// a bypass is on its way to it). A tree woken from passivation, or restarted, so brings
  /// back only the procedures whose time has come, in deadline order (proc_passivated_children.cpp).
  bool passivated = false;
  bool passivated_event = false;  ///< a passivated child waiting for an event (else a timer)
  int64_t wake_at_ms = 0;      ///< of a passivated child: its timer, or its event's deadline (0: none)
  /// Of a passivated child: its entry in the image it sleeps in (spawned from it when woken).
  const proc_image* passivated_entry = nullptr;
  /// Of a passivated child: the procedures it stands for, itself included (more than one when
  /// it is a parent waiting for its children, passivated with its subtree), and those of them
  /// below it waiting for an event or a reply, or placed on another node, registered
  /// through this parent.
  uint32_t passivated_procs = 0;
  std::vector<uint64_t> passivated_waiters;
  /// It offered to give up its actor and was told yes: passivated once its actor is gone
  /// (proc_passivate_waiter.cpp), live again if it takes the offer back.
  bool passivate_pending = false;
  /// Cancelled by this parent (its Cancelled record is durable): stopped, then its subtree
  /// undone; never spawned again (proc_cancel.cpp).
  bool cancelling = false;
  bool cancel_failed = false;  ///< its own failure, contained: it ends FAILED
  /// Its Cancelled record is durable: only then is anything of it undone (a crash before
  /// leaves it uncancelled, so nothing of it may be undone yet).
  bool cancel_journaled = false;
  std::string cancel_reason;
};

/// Children to restart after the back-off once every one of them stopped.
struct restart_batch {
  std::vector<uint64_t> ids;
  std::chrono::milliseconds backoff{0};
};

struct proc_actor_state {
  static inline const char* name = "proctor.procedure";

  /// An actor gone without releasing its passivated children (it crashed) leaves the gauge
  /// right: they are gone with it.
  ~proc_actor_state() {
    if (!env)
      return;
    // Gone with a job (a step or an undo) at the scheduler, queued or sent back to run here:
    // it is let go there, so that its run slot and its type's count are not lost with this
    // actor. (Told too when its job was on a worker or had run: the scheduler finds nothing.)
    if ((job_queued || busy) && env->scheduler && self_addr)
      caf::anon_send(env->scheduler, proc_gone_atom::value, self_addr);
    if (passivated_children == 0)
      return;
    int64_t n = 0;
    for (const auto& c : children)
      if (c.passivated)
        n += static_cast<int64_t>(c.passivated_procs);
    env->passivated_procedures.fetch_sub(n, std::memory_order_relaxed);
  }

  // -- identity -----------------------------------------------------------------------------
  env_ptr env;
  caf::actor_addr self_addr;  ///< this actor's (its jobs at the scheduler carry it)
  const procedure_type* ptype = nullptr;
  uint64_t id = 0;
  uint64_t root_id = 0;
  /// The root of the whole tree, as its steps see it (ctx.root_id()): root_id, except in a
  /// fragment, whose tree's root runs on another node.
  uint64_t tree_root_id = 0;
  uint64_t parent_id = 0;
  std::string type;
  int32_t priority = 0;
  std::string nonce;
  /// A root's submit, for its tree's summary (`proctor resubmit` of a ROLLEDBACK tree): its
  /// Submitted data and type version, and the root it was resubmitted from (0: none).
  std::string args;
  uint32_t args_version = 0;
  uint64_t resubmitted_from = 0;
  caf::actor parent;  ///< invalid for the root
  caf::actor root;    ///< the root's actor (self for the root)
  std::vector<uint64_t> ancestors;
  lock_set locks;  ///< what the procedure declared; held from its first step to its end
  /// Its tree's records in the journal (shared by the tree's actors; tree_compaction.cpp).
  std::shared_ptr<tree_journal_count> tree_records;

  // -- the procedure --------------------------------------------------------------------------
  std::shared_ptr<procedure> inst;
  std::string committed_data;  ///< data as of the last journaled step
  int32_t state = 0;           ///< the state that runs next
  proc_state status = proc_state::runnable;
  /// When it entered `status`, from the journal: the time of the record that put it there
  /// (tree_image.hpp, proc_image::since_ms), so that what the executor shows is what a
  /// restart reads back. Set with set_status.
  int64_t since_ms = 0;
  int64_t submitted_at_ms = 0;  ///< its Submitted's time
  int attempt = 1;              ///< runs of `state` so far, this one included
  bool started = false;  ///< it committed a step (its type's rate counts its first)
  /// `state` has started since the last commit (or may have, before a crash), so a rollback
  /// must undo it as a partly run state; false when it certainly never started.
  bool ran_partly = false;
  bool ran_partly_by_queue = false;  ///< set by the job still queued (a cancel clears it)
  int32_t same_state_commits = 0;
  std::vector<child_result> child_results;  ///< handed to the next step
  std::string event_key;
  std::string call_service;  ///< WAITING for the reply of a call to this service
  std::string call_request;
  std::string event_payload;
  bool event_timed_out = false;
  /// The current wait's on_timeout state (outcome::on_timeout), if its step gave one.
  std::optional<int32_t> timeout_state;
  uint64_t timer_token = 0;       ///< stale timer/retry messages carry an older token
  int64_t deadline_ms = 0;        ///< of the event wait (0: none)
  int64_t timer_at_ms = 0;        ///< of the armed wait timer (event deadline or wake-up)
  bool wait_timer_armed = false;  ///< the timeout actor holds a wait deadline for us
  /// Root: trying to passivate its tree (asking it, then the executor); no answer yet.
  bool passivating = false;
  bool passivate_armed = false;    ///< root: its passivate_after deadline is armed
  uint64_t passivate_token = 0;    ///< root: of the armed passivate_after deadline
  int passivate_failures = 0;      ///< root: attempts that found its tree not only waiting
  bool passivate_hinted = false;   ///< root: a procedure began to wait during an attempt
  uint64_t passivate_attempt = 0;  ///< root: the attempt under way (or the last)
  /// Root: no attempt before this (wall ms): the last one found deadlines due before it,
  /// or took long.
  int64_t passivate_not_before = 0;
  int64_t passivate_started_ms = 0;  ///< root: when the attempt under way began
  /// Root: when its tree was last seen active (a procedure began to wait, a child ended).
  int64_t tree_active_ms = 0;
  /// Its tree is asked to passivate and it said it only waits: what would wake it is held
  /// (run on resume; lost with the actor if the executor agrees, which it does only when
  /// nothing it routes reached the tree, while the earliest deadline wakes the tree).
  bool passivation_held = false;
  std::vector<std::function<void()>> held;
  /// Its subtree's answer being gathered (proc_passivate_tree.cpp). Children are asked with a
  /// tagged message and answer with one, not a request each: CAF 0.17 keeps an actor's
  /// pending requests in a vector searched and erased linearly, so a parent of 10,000
  /// children spent O(n^2) per attempt (most of proctor-bench (j)'s time, perf).
  struct passivation_query {
    uint64_t tag = 0;
    std::unordered_set<uint64_t> asked;  ///< children that have not answered
    passivation_answer acc;
    std::function<void(passivation_answer)> done;
  };
  std::unique_ptr<passivation_query> query;
  uint64_t query_tag = 0;  ///< of the last query this procedure sent its children
  /// Run with the executor's answer (agreed or not) to the passivation asked for: an
  /// operator's bypass that arrived meanwhile waits for it.
  std::vector<std::function<void(bool agreed)>> on_passivation_decided;
  bool bypassing = false;  ///< an operator's bypass is being journaled: nothing runs
  /// Its step failed and waits for its next attempt (a retry policy's back-off): an
  /// operator's retry may run it now (proc_retry.cpp).
  bool backing_off = false;
  bool retrying = false;  ///< an operator's retry is being journaled
  std::string last_failure;  ///< the error of its step's last failed attempt

  // -- children (this actor supervises them) -----------------------------------------------
  std::vector<child_slot> children;                  ///< every child, in spawn order
  std::unordered_map<uint64_t, size_t> child_index;  ///< id -> children[i]
  /// Live actor -> id; made at the first child's spawn and shared with the functor that
  /// tells those actors when this one goes down (watch_children, proc_supervision.cpp).
  std::shared_ptr<live_children> child_addrs;
  std::vector<uint64_t> waiting_on;           ///< children of the last spawn step
  size_t waiting_left = 0;                    ///< of those, how many have not ended
  size_t ended_children = 0;                  ///< children with `ended`
  std::vector<proc_update> finished_subtree;  ///< final statuses reported by ended children
  /// Children on other nodes found failed there at start, their tree not failed yet.
  std::vector<std::pair<uint64_t, std::string>> remote_failed;
  restart_tracker restarts;
  /// The join policy of its last spawn (proc_cancel.cpp): children that must succeed (0:
  /// all of them), and whether a failed child lets its siblings end first.
  uint32_t join_at_least = 0;
  bool join_wait = false;
  /// Its parent's join policy handles its failure (proc_start::failure_contained).
  bool failure_contained = false;
  /// Undoing cancelled children: the children whose subtrees the current plan undoes (it
  /// runs with the rollback's fields, plan to rb_image, as a root's rollback does).
  bool cancel_running = false;
  std::vector<uint64_t> cancel_batch;

  // -- activity -------------------------------------------------------------------------------
  bool busy = false;        ///< a step runs or its commit is in flight
  /// The ctx.cancelled() of its steps that run on a worker thread: set when a stop comes
  /// while one runs (its outcome will not be used), cleared for the next. Made at the first
  /// such step (a procedure whose steps all run on its actor has none).
  std::shared_ptr<std::atomic<bool>> cancel_flag;
  bool job_queued = false;  ///< a step job is with the scheduler (queued or running)
  bool parked = false;      ///< failed; waiting for the root's rollback to stop us
  bool stopping = false;
  size_t stops_pending = 0;  ///< children with stop_pending
  /// Children journaled while stopping, never started (the children's own reports are in
  /// their slots).
  std::vector<uint64_t> stopped_clean;
  std::vector<restart_batch> pending_restarts;
  /// The image passivated children are spawned from, while any is left (proc_passivated_children.cpp).
  std::shared_ptr<const tree_image> passivated_image;
  size_t passivated_children = 0;
  /// Waiters inside the subtree of a passivated child, mapped to that child: the executor's
  /// wake-up for one of them (wake_child_atom) spawns the child, which puts its own
  /// children to sleep again and so gets the wake-up sent again (proc_passivated_children.cpp).
  std::unordered_map<uint64_t, uint64_t> passivated_routes;
  /// Wake-ups of passivated children that came while max_live_children of its children had
  /// actors, oldest first from wakes_head: each spawns its child when one of those goes
  /// down (on_wake_child, wake_queued; proc_passivated_children.cpp).
  std::vector<uint64_t> wakes_due;
  size_t wakes_head = 0;
  /// The images of children that gave up their actors while live (offered, or passivated since),
  /// each spawned from its own (proc_passivate_waiter.cpp).
  std::unordered_map<uint64_t, std::shared_ptr<const tree_image>> passivated_images;
  /// This procedure offered its parent to give up its actor: what wakes it is held until
  /// the answer (proc_passivate_waiter.cpp).
  bool passivate_offered = false;
  /// A parent resumed while its children were still giving up their actors: it offers to
  /// give up its own once the last of them did (proc_passivate_waiter.cpp).
  bool passivate_wanted = false;
  /// Appends sent to the journal and not yet durable, oldest first: (tag, what runs then).
  struct pending_append {
    uint64_t tag = 0;
    std::function<void()> then;
    std::function<void(uint64_t, size_t)> then_lsn;  ///< instead of `then` (outbox records)
    size_t entries = 0;
  };
  std::vector<pending_append> appends;
  uint64_t last_append_tag = 0;

  // -- root only ------------------------------------------------------------------------------
  bool is_root = false;
  /// Its end (summary, or a fragment's end) is being written: an abort comes too late.
  bool finishing = false;
  bool failing = false;              ///< the tree failed; stopping it, then rolling back
  int64_t failed_at_ms = 0;          ///< its Failed record's time
  bool busy_failure_record = false;  ///< the Failed record is not durable yet
  /// Aborts answered once the Failed record is durable (nothing is acknowledged before).
  std::vector<caf::typed_response_promise<bool>> failure_acks;
  bool past_no_return = false;
  std::string failure;
  std::vector<undo_item> plan;
  size_t plan_pos = 0;
  size_t undone_before = 0;     ///< undos done before this plan (an earlier incarnation's)
  int undo_attempt = 1;         ///< of the plan's current undo
  std::string undo_state_name;  ///< of the plan's current undo, for status and logs
  std::shared_ptr<const tree_image> rb_image;
  /// Fragments on other nodes ordered rolled back by this incarnation, and those that
  /// reported being rolled back before the plan got to them.
  std::unordered_set<uint64_t> remote_ordered;
  std::unordered_set<uint64_t> remote_rolled_back;

  // -- fragment root only (its parent runs on another node) --------------------------------
  std::string parent_node;
  uint64_t parent_root_id = 0;
  bool is_fragment() const noexcept { return is_root && !parent_node.empty(); }
  /// A fragment's Submitted LSN: its end is not sent to a parent's node an operator forgot
  /// after it (cluster_view::lost; nothing there waits for it any more).
  uint64_t fragment_lsn = 0;
  /// Fragments of the rollback plan on a forgotten node whose end was asked for as lost.
  std::unordered_set<uint64_t> remote_lost_asked;
  /// Fragments whose end came FAILED during this rollback (lost with their node, or past a
  /// point of no return there), with the error: they stay FAILED in the tree's summary.
  std::unordered_map<uint64_t, std::string> rb_remote_failed;
  bool parent_lost() const noexcept;

  // -- helpers --------------------------------------------------------------------------------
  child_slot* child(uint64_t cid) {
    auto i = child_index.find(cid);
    return i == child_index.end() ? nullptr : &children[i->second];
  }
  child_slot* child_by_addr(const caf::actor_addr& a) {
    if (!child_addrs)
      return nullptr;
    auto i = child_addrs->find(a);
    return i == child_addrs->end() ? nullptr : child(i->second);
  }
  child_slot& add_child(uint64_t cid, bool awaited) {
    child_index[cid] = children.size();
    child_slot c;
    c.id = cid;
    c.awaited = awaited;
    children.push_back(std::move(c));
    if (awaited)
      ++waiting_left;
    return children.back();
  }
  /// Records how a child ended (once), and when (`at_ms`: 0 when not known).
  void child_ended(child_slot& c, child_result r, int64_t at_ms) {
    if (c.ended)
      return;
    c.ended = true;
    c.ended_at_ms = at_ms;
    ++ended_children;
    c.result = std::move(r);
    if (c.awaited && waiting_left > 0)
      --waiting_left;
  }
};

using proc_actor = caf::stateful_actor<proc_actor_state>;

// -- shared between the files of the procedure actor ------------------------------------------

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

/// Spawns (monitored) the actor of child `cid` from `image`; `fresh`: its spawn was just
/// committed, nothing of it ran yet; `timer_due`: see proc_start::timer_due; `entry`: its
/// entry in `image`, if at hand (else looked up).
void spawn_child(proc_actor* self, const std::shared_ptr<const tree_image>& image, uint64_t cid,
                 bool fresh = false, bool timer_due = false, const proc_image* entry = nullptr);

/// Respawns the children `ids` from the journal's current image of the tree.
void restart_children(proc_actor* self, std::vector<uint64_t> ids);

/// Handles the end of a monitored actor: a child, or the parent (proc_supervision.cpp).
void on_down(proc_actor* self, caf::down_msg& msg);

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

/// Root: the tree failed (tree_rollback.cpp). Returns false when the tree is past its point
/// of no return, i.e. the failure must be retried forward.
bool begin_tree_failure(proc_actor* self, uint64_t proc_id, int32_t state,
                        const std::string& error);

/// Root: run the rollback of `image` (after every actor of the tree stopped).
void run_rollback(proc_actor* self, std::shared_ptr<const tree_image> image);

/// Root: shows how far the rollback got (or why it is stuck) in the root's status.
void publish_rollback(proc_actor* self, std::string waiting_for);

/// Root: while its rollback waits for a fragment on another node, shows which (and since
/// when that node is unreachable, if it is).
void show_remote_wait(proc_actor* self);

/// Root: a fragment on another node reported its end (remote_end_atom, journaled by the
/// executor already) while the tree rolls back.
void on_remote_end_in_rollback(proc_actor* self, const std::string& bytes);

/// Fragment root: its last step returned done: journal it with the end for the parent's
/// node, then quit (the fragment's records stay until released).
void finish_fragment(proc_actor* self, pb::JournalRecord step, std::string result_json,
                     std::function<void()> after_commit);

/// Counts the records `batch` adds to this procedure's tree; past the tree's threshold, asks
/// the root to compact it (tree_compaction.cpp).
void count_tree_records(proc_actor* self, const journal_batch& batch);

/// Root: folds its tree's journal into one record, if it may (tree_compaction.cpp).
void compact_tree(proc_actor* self);

// -- join policies and cancellation (proc_cancel.cpp) -------------------------------------------

/// The last spawn's policy is not join::all with cancel_siblings: children's failures come
/// here.
inline bool joins_tolerantly(const proc_actor_state& st) {
  return st.join_at_least != 0 || st.join_wait;
}

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

/// The records saying that the procedures `clean` (those of them `in_scope` accepts, if given)
/// stopped before their current state started: nothing partly run of them to undo, so that
/// a crash during the undos does not undo what never ran either. Marks them so in `image`.
journal_batch never_started_undos(proc_actor* self, tree_image& image,
                                  const std::vector<uint64_t>& clean,
                                  const std::function<bool(uint64_t)>& in_scope);

/// Root: every actor of the failing tree stopped; read the tree back and roll it back.
void rollback_after_stop(proc_actor* self);

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

#define PLOG(level, self, fmt_, ...)                                                               \
  spdlog::level("[proc {} root {}] " fmt_, (self)->state.id, (self)->state.root_id, ##__VA_ARGS__)

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::subtree_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<const proctor::tree_image>)

// The declarations of waiting and of giving actors up (they use proc_actor, above).
#include "actors/procedure/internal/proc_waits.hpp"
