// The timeout actor (docs/concepts.md, "The timeout actor"): every deadline of a node in one
// deadline_queue, under one CAF timer set to the earliest of them.
//
// An actor arms a deadline with a message: at the deadline the timeout actor sends that
// message to it. A deadline is named by its owner (a procedure or tree id, an event's LSN)
// and its kind; arming a name again replaces its deadline, and a cancel removes it. Due
// deadlines are sent in deadline order (ties in arm order), a batch at a time, so a million
// due in the same second neither stall the actor nor reorder.
//
// Deadlines are wall-clock milliseconds since the epoch, as the journal keeps them: a
// restarted node re-arms what its journal holds, and one that passed while it was down is
// due at once.
#pragma once

#include <cstdint>

#include <caf/all.hpp>

namespace proctor {

using timeout_arm_atom = caf::atom_constant<caf::atom("tmoarm")>;
using timeout_cancel_atom = caf::atom_constant<caf::atom("tmocancel")>;
using timeout_stats_atom = caf::atom_constant<caf::atom("tmostats")>;

/// What a deadline is for; with its owner it names the deadline (at most one per name).
enum class timeout_kind : uint8_t {
  wait = 1,       ///< a procedure's event or call deadline, or its wait(duration) wake-up
  passivate,      ///< a root's passivate_after: try to passivate its tree
  call_retry,     ///< back-off of a call to a service that failed in transport
  restart,        ///< supervision back-off before children restart (owner: the parent)
  undo_retry,     ///< back-off of an undo that threw
  tree_wake,      ///< a passivated tree's earliest deadline (owner: its root)
  root_restart,   ///< back-off before a crashed root restarts
  event_ttl,      ///< a kept event expires (owner: its LSN)
  node_loss,      ///< a remote child's node-loss deadline
  schedule,       ///< the recurring schedules' next firing (owner 0: one for them all)
  task,           ///< a task's lease or retry delay (owner: the procedure waiting for it)
  children_wake,  ///< the earliest wake-up of a parent's passivated children (owner: the parent)
};

/// The timeout actor's figures (for metrics and proctor-bench).
struct timeout_stats {
  uint64_t armed = 0;  ///< deadlines armed now
  uint64_t bytes = 0;  ///< memory held for them (queue and index)
  uint64_t fired = 0;  ///< deadlines sent since start
  /// Lateness of the deadlines sent (from the deadline to the send), in ms: exact to 1 ms
  /// below 10 s.
  int64_t late_p50_ms = 0;
  int64_t late_p99_ms = 0;
  int64_t late_max_ms = 0;
};

/// Spawns the timeout actor. Its protocol:
///   (timeout_arm_atom, uint64_t owner, uint8_t kind, int64_t deadline_ms, caf::message msg)
///       arms (or re-arms) the deadline (owner, kind) for the sender: `msg` goes to it then;
///   (timeout_cancel_atom, uint64_t owner, uint8_t kind) removes it, if armed;
///   (timeout_stats_atom) -> timeout_stats.
caf::actor spawn_timeout(caf::actor_system& sys);

/// Arms (owner, kind) to send `msg` to `self` at `deadline_ms`.
template <class Self, class... Ts>
void arm_timeout(Self* self, const caf::actor& timeout, uint64_t owner, timeout_kind kind,
                 int64_t deadline_ms, Ts&&... msg) {
  self->send(timeout, timeout_arm_atom::value, owner, static_cast<uint8_t>(kind), deadline_ms,
             caf::make_message(std::forward<Ts>(msg)...));
}

/// Removes (owner, kind), if armed.
template <class Self>
void cancel_timeout(Self* self, const caf::actor& timeout, uint64_t owner, timeout_kind kind) {
  self->send(timeout, timeout_cancel_atom::value, owner, static_cast<uint8_t>(kind));
}

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::timeout_stats)
