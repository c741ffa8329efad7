// Internal: a procedure actor's children as it supervises them: one child_slot each (its actor,
// how it ended, whether it is passivated or cancelled), the messages a child sends its parent,
// and the restart batches of supervision. Touched by the files of the procedure actor;
// proc_actor_state (procedure_actor_state.hpp) holds them.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "actors/base/messages.hpp"
#include "actors/procedure/tree_status.hpp"
#include "persistence/tree_image.hpp"

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
  /// Asked to stop; ends with its stopped_atom or, whatever else happens to it, its end
  /// (subtree_done) or its down message (watch_child), so a stop never waits for an answer
  /// that cannot come.
  bool stop_pending = false;
  /// Its last stop report: the procedures of its subtree whose current state never started
  /// (cleared when it is spawned again).
  std::vector<uint64_t> stopped_clean;
  child_result result;
  int64_t ended_at_ms = 0;  ///< when it ended, as its journal records say (0: not known)
  /// Passivated: read back waiting for a timer (wait(duration)), with nothing of its own running,
  /// and not spawned: the parent holds its wake-up with the timeout actor under the child's own
  /// name, and spawns it from the parent's image when it is due (or when a bypass is on its way to
  /// it). A tree woken from passivation, or restarted, so brings back only the procedures whose
  /// time has come, in deadline order (proc_passivated_children.cpp).
  bool passivated = false;
  bool passivated_event = false;  ///< a passivated child waiting for an event (else a timer)
  int64_t wake_at_ms = 0;  ///< of a passivated child: its timer, or its event's deadline (0: none)
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

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::subtree_done)
