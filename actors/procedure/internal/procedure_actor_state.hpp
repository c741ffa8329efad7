// Internal: the state of a procedure actor. It is split by concern, as RocksDB splits DBImpl:
// the children it supervises (proc_children.hpp), its part in passivation
// (proc_passivation_part.hpp: only the passivation files change it) and a root's rollback
// (proc_rollback_part.hpp: tree_rollback.cpp and proc_cancel.cpp change it) are their own
// structs; what is left here is the procedure itself, its activity and its journal appends.
// The functions the actor's files share are declared by concern in proc_lifecycle.hpp,
// proc_rollback.hpp and proc_waits.hpp, which see only proc_actor_fwd.hpp (no include cycle);
// this header includes them, so that a file of the actor includes this one.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <proctor/journal.pb.h>

#include "actors/base/messages.hpp"
#include "actors/procedure/internal/proc_actor_fwd.hpp"
#include "actors/procedure/internal/proc_children.hpp"
#include "actors/procedure/internal/proc_lifecycle.hpp"
#include "actors/procedure/internal/proc_passivation_part.hpp"
#include "actors/procedure/internal/proc_rollback.hpp"
#include "actors/procedure/internal/proc_rollback_part.hpp"
#include "actors/procedure/internal/proc_waits.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"
#include "persistence/counted_actor.hpp"
#include "persistence/journal.hpp"
#include "supervision/restart_tracker.hpp"

namespace proctor {

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
    if (passivation.passivated_children == 0)
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
  uint32_t placement_slot = 0;  ///< Submitted.placement_slot (its nonce's handoff slot)
  caf::actor parent;            ///< invalid for the root
  caf::actor root;              ///< the root's actor (self for the root)
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
  bool started = false;         ///< it committed a step (its type's rate counts its first)
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
  std::string event_failure;  ///< read back from EventDelivered.failure (a restart's reason)
  /// The current wait's on_timeout state (outcome::on_timeout), if its step gave one.
  std::optional<int32_t> timeout_state;
  uint64_t timer_token = 0;       ///< stale timer/retry messages carry an older token
  int64_t deadline_ms = 0;        ///< of the event wait (0: none)
  int64_t timer_at_ms = 0;        ///< of the armed wait timer (event deadline or wake-up)
  bool wait_timer_armed = false;  ///< the timeout actor holds a wait deadline for us
  /// Its part in passivation (proc_passivation_part.hpp).
  passivation_part passivation;
  bool bypassing = false;  ///< an operator's bypass is being journaled: nothing runs
  /// Its step failed and waits for its next attempt (a retry policy's back-off): an
  /// operator's retry may run it now (proc_retry.cpp).
  bool backing_off = false;
  bool retrying = false;     ///< an operator's retry is being journaled
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
  bool busy = false;  ///< a step runs or its commit is in flight
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
  /// Its tree's failure and rollback (proc_rollback_part.hpp); a parent's cancellation of
  /// children runs its plan with it too.
  rollback_part rollback;
  // -- fragment root only (its parent runs on another node) --------------------------------
  std::string parent_node;
  uint64_t parent_root_id = 0;
  bool is_fragment() const noexcept { return is_root && !parent_node.empty(); }
  /// A fragment's Submitted LSN: its end is not sent to a parent's node an operator forgot
  /// after it (cluster_view::lost; nothing there waits for it any more).
  uint64_t fragment_lsn = 0;
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

/// The last spawn's policy is not join::all with cancel_siblings: children's failures come
/// here.
inline bool joins_tolerantly(const proc_actor_state& st) {
  return st.join_at_least != 0 || st.join_wait;
}

#define PLOG(level, self, fmt_, ...)                                                               \
  spdlog::level("[proc {} root {}] " fmt_, (self)->state.id, (self)->state.root_id, ##__VA_ARGS__)

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<const proctor::tree_image>)
