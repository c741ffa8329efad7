// The scheduler actor: the only place that decides which step runs next. It owns the run
// slots (the concurrency limit, one worker thread each), orders ready procedures by
// priority, and within a priority round-robins between roots so that one huge tree cannot
// starve the others. A yielded procedure goes to the back of its root's queue.
//
// Messages:
//   (ready_atom, step_job)   queue a step; it runs when a slot is free and its turn comes
//   (slot_atom, ticket)      the job dispatched under `ticket` (step_job::ticket) ended
//   (proc_gone_atom, addr)   a procedure's actor is gone: its jobs here are dropped, and
//                            one sent back to run on the actor gives its slot back
//   (stats_atom)             -> step_scheduler_stats
//   (unlock_atom, id)        a procedure ended: release its locks
//   (unlock_tree_atom, root) a tree ended: release the locks of all its procedures
//   (restore_locks_atom, id, root, lock_set)  recovery: locks held before the crash
//   (cancel_atom, id)        -> bool  drops the procedure's queued step (false: it runs)
//   (locks_atom)             -> std::string  a serialized pb::Response whose `locks` lists
//                               the held locks, then those awaited by blocked steps
//   (limits_set_atom, type_limit_change)  an operator's change of a type's limits (journaled)
//   (limits_atom)            -> std::vector<type_limit_view>
// A job whose locks conflict waits (its procedure is told: lock_wait_atom, "lock NAME") and is
// retried whenever locks are released. A forward step of a type whose limits (type_limits) do not
// let it run now is held back (its procedure is told why: lock_wait_atom, "type limit x: 10 of 10
// running") until a step of its type ends or its next token comes (a delayed message to itself):
// every such wait has its wake-up. A running step slower than `stuck_after` is reported once (log
// and the stuck_steps gauge).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/scheduling/type_limiter.hpp"

namespace proctor {

struct step_scheduler_stats {
  size_t queued = 0;
  size_t running = 0;
  size_t slots = 0;
  uint64_t dispatched = 0;
  size_t lock_waiting = 0;             ///< jobs waiting for a lock
  size_t lock_owners = 0;              ///< procedures holding locks
  size_t stuck = 0;                    ///< running steps older than stuck_after
  size_t limit_waiting = 0;            ///< jobs held back by their type's limits
  std::vector<type_limit_view> types;  ///< each type's limits and load
};

/// Spawns the scheduler with `workers` run slots. `declared`: the limits each registered
/// type declares (registry; types without limits too, so that their steps are counted).
/// `locks_taken` (node_env::locks_taken) is set, for good, before the first lock is held
/// here (taken by a step or restored at recovery): while it is false no tree holds one, and
/// a tree's end need not tell the scheduler.
caf::actor spawn_step_scheduler(caf::actor_system& sys, size_t workers,
                                std::chrono::milliseconds stuck_after = std::chrono::seconds{30},
                                std::map<std::string, type_limits> declared = {},
                                std::shared_ptr<std::atomic<bool>> locks_taken = nullptr);

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::step_scheduler_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::type_limit_change)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<proctor::type_limit_view>)
