// Messages between the actors of one node. None of them crosses the wire (see rpc.hpp), so
// they are plain C++ types made sendable with CAF_ALLOW_UNSAFE_MESSAGE_TYPE.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <proctor/context.hpp>
#include <proctor/outcome.hpp>
#include <proctor/procedure.hpp>

namespace proctor {

// -- atoms ------------------------------------------------------------------------------------
using ready_atom = caf::atom_constant<caf::atom("ready")>;  // proc -> scheduler
/// Worker (or proc) -> scheduler: (ticket) the job the scheduler dispatched under `ticket`
/// (step_job::ticket) ended: its run slot, and its type's count, are given back.
using slot_atom = caf::atom_constant<caf::atom("slot")>;
/// Proc -> scheduler: (its actor's address) the actor is gone with a job at the scheduler: a
/// queued job of that actor (a step, or a root's undo) is dropped, and one sent back to run on
/// the actor (run_inline) gives its slot back. By address, not by procedure id: a restarted
/// procedure's new actor, and a root's undos of its descendants, are other actors' jobs.
using proc_gone_atom = caf::atom_constant<caf::atom("procgone")>;
using step_done_atom = caf::atom_constant<caf::atom("stepdone")>;  // worker -> proc
using child_done_atom = caf::atom_constant<caf::atom("childdone")>;
using tree_fail_atom = caf::atom_constant<caf::atom("treefail")>;  // proc -> root
using stop_atom = caf::atom_constant<caf::atom("stop")>;           // parent -> child
using abort_atom = caf::atom_constant<caf::atom("abort")>;         // executor -> root
using no_return_atom = caf::atom_constant<caf::atom("noreturn")>;  // proc -> root
using update_atom = caf::atom_constant<caf::atom("update")>;       // proc -> executor
using restart_atom = caf::atom_constant<caf::atom("restart")>;
using tree_done_atom = caf::atom_constant<caf::atom("treedone")>;  // root -> executor
/// A root's actor, as it exits other than normally -> executor: (root id, its actor's address,
/// the exit reason); what a monitor's down message would say (spawn_root).
using root_down_atom = caf::atom_constant<caf::atom("rootdown")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using wake_atom = caf::atom_constant<caf::atom("wake")>;  // its event's deadline -> proc
/// Executor -> proc: (key, payload, failure, event_lsn, consume) what it waits for under `key`
/// came: an event's payload, or a call's reply (failure empty) or why the call failed. A
/// delivery for another key than the one it waits for now is late (it stopped waiting) and
/// dropped. An event (event_lsn: its EventArrived record; 0 for a call) is answered: taken
/// once its EventDelivered is durable (with the event's record deleted in the same batch when
/// `consume`: its only taker), or declined if dropped (docs/concepts.md, "Events").
using delivered_atom = caf::atom_constant<caf::atom("delivered")>;
/// Proc -> executor: (event_lsn, proc id) it took the event handed to it: its EventDelivered
/// is durable.
using event_taken_atom = caf::atom_constant<caf::atom("evtaken")>;
/// Proc -> executor: (event_lsn, proc id) it dropped the event handed to it without
/// journaling it (it no longer waited for it): the event goes to another waiter, or is kept.
using event_declined_atom = caf::atom_constant<caf::atom("evdecline")>;
/// Proc (or the parent of a passivated child) -> executor: (call id, proc id, handle, via,
/// service, request) it waits for the reply of this call, as for an event under the call id;
/// the executor has it made unless it is under way already (executor_calls.cpp).
using wait_call_atom = caf::atom_constant<caf::atom("waitcall")>;
/// A call waits under the key call_key_prefix + "<procedure id>:<ms>:<n>". Such keys
/// are reserved: no event may be posted under one (it would pass for the call's reply), and
/// no step may suspend on one.
inline const std::string call_key_prefix = "call:";
inline bool is_call_key(const std::string& key) {
  return key.compare(0, call_key_prefix.size(), call_key_prefix) == 0;
}
/// The procedure whose call (or task) key `key` is ("call:<id>:..."); 0 if it names none.
inline uint64_t call_key_proc(const std::string& key) {
  if (!is_call_key(key))
    return 0;
  uint64_t id = 0;
  const char* from = key.data() + call_key_prefix.size();
  const char* to = key.data() + key.size();
  auto [end, ec] = std::from_chars(from, to, id);
  return ec == std::errc{} && end != from && end != to && *end == ':' ? id : 0;
}
/// Why event key `key` (is_call_key) cannot be posted or waited for.
inline std::string call_key_refusal(const std::string& key) {
  return "event key '" + key + "' is reserved: keys beginning with '" + call_key_prefix
         + "' name the replies of calls, which only their services give";
}
using arm_atom = caf::atom_constant<caf::atom("arm")>;        // -> timer
using disarm_atom = caf::atom_constant<caf::atom("disarm")>;  // -> timer
using expire_atom = caf::atom_constant<caf::atom("expire")>;
using collect_atom = caf::atom_constant<caf::atom("collect")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using lock_wait_atom = caf::atom_constant<caf::atom("lockwait")>;  // scheduler -> proc
using unlock_atom = caf::atom_constant<caf::atom("unlock")>;       // proc -> scheduler
using unlock_tree_atom = caf::atom_constant<caf::atom("unlocktree")>;
using restore_locks_atom = caf::atom_constant<caf::atom("relock")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;           // proc -> scheduler
using run_inline_atom = caf::atom_constant<caf::atom("runinline")>;    // scheduler -> proc
using no_progress_atom = caf::atom_constant<caf::atom("noprogress")>;  // proc -> executor
using passivate_atom = caf::atom_constant<caf::atom("passivate")>;     // root -> executor
using rollback_atom = caf::atom_constant<caf::atom("rollback")>;       // root -> executor
using undo_atom = caf::atom_constant<caf::atom("undo")>;               // root -> executor
using locks_atom = caf::atom_constant<caf::atom("locks")>;             // executor -> scheduler
using limits_atom = caf::atom_constant<caf::atom("limits")>;           // executor -> scheduler
using limits_set_atom = caf::atom_constant<caf::atom("limitset")>;     // executor -> scheduler
using bypass_atom = caf::atom_constant<caf::atom("bypass")>;           // executor -> procs
using op_retry_atom = caf::atom_constant<caf::atom("opretry")>;        // executor -> procs
// Passivation of a tree that only waits (proc_passivate_tree.cpp).
using passivate_query_atom = caf::atom_constant<caf::atom("psvquery")>;     // parent -> child
using passivate_answer_atom = caf::atom_constant<caf::atom("psvanswer")>;   // child -> parent
using passivation_refused_atom = caf::atom_constant<caf::atom("psvthaw")>;  // parent -> child
using passivate_hint_atom = caf::atom_constant<caf::atom("psvhint")>;       // proc -> root
using passivate_begin_atom = caf::atom_constant<caf::atom("psvbegin")>;     // root -> executor
using passivate_late_atom = caf::atom_constant<caf::atom("psvlate")>;       // timeout -> root

/// One step (or one undo) to run on a worker thread. The procedure instance belongs to the
/// job while it runs; the procedure actor touches it again only after the result arrives.
struct step_job {
  caf::actor proc;
  std::shared_ptr<procedure> inst;
  context ctx;
  int32_t state = 0;
  bool undo = false;
  uint64_t tag = 0;  ///< echoed in the result (the undo's LSN)
  int32_t priority = 0;
  std::string type;  ///< for logs and metrics
  /// Locks to hold before the step runs (kept until unlock); empty: none needed.
  lock_set locks;
  std::vector<uint64_t> ancestors;  ///< whose locks this procedure may use
  /// Run on the procedure actor's thread (procedure_type::nonblocking, or
  /// procedure::never_blocks for this state) instead of a worker:
  /// the scheduler sends the job back as (run_inline_atom, step_job) when its turn comes.
  bool run_inline = false;
  /// Run inline without asking the scheduler first (nonblocking, no locks): there is no
  /// run slot to give back.
  bool direct = false;
  /// The procedure's first step (it has committed none): counted by its type's rate.
  bool first = false;
  /// The scheduler's: the procedure was told its type's limits hold this job back.
  bool limit_told = false;
  /// The scheduler's: let go by its type's limits, ahead of that type's newer jobs.
  bool limit_released = false;
  /// The scheduler's: set when it dispatches the job, echoed by (slot_atom, ticket) when
  /// the job ended. A procedure's next job may reach the scheduler before the slot of its
  /// last one (a worker thread sends the slot, the procedure the next job): tickets keep the
  /// two apart, so that neither's run slot nor its type's count is lost.
  uint64_t ticket = 0;
  /// What ctx.nodes() points into while the step runs (cluster_view::node_names(): without
  /// the nodes an operator forgot).
  std::shared_ptr<const std::vector<std::string>> nodes;
};

/// What a worker reports back.
struct step_result {
  enum class kind : uint8_t { ok, failed, crashed };
  kind what = kind::ok;
  std::optional<outcome> out;  ///< forward steps that returned
  std::string error;           ///< failed / crashed
  std::string data;            ///< the procedure's data after the handler, serialized
  int32_t state = 0;
  bool undo = false;
  uint64_t tag = 0;
  std::chrono::microseconds took{0};
};

/// A procedure's externally visible status, sent to the executor on every change.
struct proc_update {
  uint64_t id = 0;
  uint64_t root_id = 0;
  uint64_t parent_id = 0;
  std::string type;
  proc_state state = proc_state::runnable;
  std::vector<uint64_t> children;
  std::string error;
  std::string result_json;
  std::string waiting_for;
  std::string nonce;
  /// Non-empty: the procedure runs on that node (this node holds a placeholder).
  std::string node{};
  /// The procedure has ended (SUCCESS, ROLLEDBACK, or FAILED for good). A FAILED procedure
  /// whose tree is still rolling back has not.
  bool ended = false;
  /// Timing (wall clock ms): submitted, in this state and waiting_for since, ended. Those
  /// the journal records (proc_image: its Submitted, the record that put it in its state,
  /// its end) come from there, so that a restart shows the same; 0 leaves the executor to
  /// time it (a wait the journal does not hold, such as for a lock).
  int64_t started_at_ms = 0;
  int64_t since_ms = 0;
  int64_t ended_at_ms = 0;
  bool bypassed = false;  ///< an operator's bypass ended it
};

/// An operator's bypass of procedure path.back(), executor -> root -> ... -> the procedure:
/// `path` runs from the root of the tree (fragment) down to it.
struct bypass_order {
  std::vector<uint64_t> path;
  std::string waiting_for;  ///< what it waited for, as the executor saw it (journaled)
  bool forced = false;
};

/// An operator's retry of procedure path.back()'s failed step, executor -> root -> ... -> the
/// procedure (as bypass_order goes).
struct retry_order {
  std::vector<uint64_t> path;
};

/// The end of a tree, root -> executor, with every procedure's final status.
struct tree_done {
  uint64_t root_id = 0;
  std::vector<proc_update> procs;
  std::string summary;  ///< the tree's summary record (a serialized pb::JournalRecord)
  /// A fragment whose parent's node an operator forgot: nothing will release it, so it
  /// expires as a root's result does.
  bool orphan = false;
  /// The tree's journal records, about (what its history costs to keep: keep_history).
  uint64_t records = 0;
};

/// A subtree's answer to passivate_query_atom (passivate_answer_atom, the query's tag, the
/// child's id, this): whether every procedure in it only waits (for
/// an event, a timer, or children that only wait), and what the executor must keep to wake
/// it once its actors are gone.
/// To a parent (from the timeout actor, or the executor for an event): its passivated child's
/// wake-up is due, spawn it (proc_passivated_children.cpp).
using wake_child_atom = caf::atom_constant<caf::atom("wakechild")>;
/// The timeout actor to a parent: the earliest wake-up of its passivated children is due;
/// it spawns every one due by now and arms the next (proc_passivated_children.cpp).
using wake_children_atom = caf::atom_constant<caf::atom("wakekids")>;
/// Parent to executor: (key, child id, parent) its passivated child waits for event `key`;
/// the event wakes the child through its parent.
using wait_event_via_atom = caf::atom_constant<caf::atom("waitevvia")>;
/// Child to parent: (child id, its image) it only waits for its timer or event and offers
/// to give up its actor while its tree runs (proc_passivate_waiter.cpp); the parent answers with
/// passivate_reply_atom (bool: accepted), and the child that then quits with errc::passivated
/// is held passivated.
using passivate_offer_atom = caf::atom_constant<caf::atom("sleepoffer")>;
using passivate_reply_atom = caf::atom_constant<caf::atom("sleepreply")>;
/// Child to parent: (child id) accepted, it cannot go after all (something came meanwhile).
using passivate_undo_atom = caf::atom_constant<caf::atom("sleepundo")>;
/// Child to executor: (key, child id, parent) its event is to wake it through its parent
/// from now on; true if it was still registered (so no event is on its way to its actor).
using passivate_via_atom = caf::atom_constant<caf::atom("sleepvia")>;

/// A tree whose earliest deadline is nearer than this stays awake: bringing it back from the
/// journal costs more than keeping it (a wide tree with timers due every few ms would be read
/// back again and again).
constexpr int64_t passivation_min_sleep_ms = 1'000;
/// A passivated tree is brought back this long before its earliest deadline (at most half
/// of the shortest sleep), so that reading it back does not make that deadline late: the
/// timeout actor then sends its procedures' wake-ups on time, in deadline order across trees.
constexpr int64_t passivation_wake_lead_ms = passivation_min_sleep_ms / 2;

struct passivation_answer {
  bool idle = true;
  int64_t deadline_ms = 0;                ///< the earliest deadline in the subtree (0: none)
  std::vector<uint64_t> event_waiters;    ///< procedures waiting for an event
  std::vector<std::string> remote_nodes;  ///< nodes its children on other nodes run on
  /// Declined because deadlines are due too soon to be worth it: the latest of them (the
  /// root tries again after it rather than asking the whole tree again and again).
  int64_t retry_at_ms = 0;
  uint64_t procs = 0;  ///< procedures that answered (each counts itself)

  void merge(const passivation_answer& o) {
    idle = idle && o.idle;
    procs += o.procs;
    retry_at_ms = std::max(retry_at_ms, o.retry_at_ms);
    if (o.deadline_ms > 0 && (deadline_ms == 0 || o.deadline_ms < deadline_ms))
      deadline_ms = o.deadline_ms;
    event_waiters.insert(event_waiters.end(), o.event_waiters.begin(), o.event_waiters.end());
    remote_nodes.insert(remote_nodes.end(), o.remote_nodes.begin(), o.remote_nodes.end());
  }
};

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::passivation_answer)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::step_job)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::step_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::proc_update)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::tree_done)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::bypass_order)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::retry_order)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::child_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::lock_set)
