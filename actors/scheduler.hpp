// The scheduler actor: the only place that decides which step runs next. It owns the run
// slots (the concurrency limit, one worker thread each), orders ready procedures by
// priority, and within a priority round-robins between roots so that one huge tree cannot
// starve the others. A yielded procedure goes to the back of its root's queue.
//
// Messages:
//   (ready_atom, step_job)   queue a step; it runs when a slot is free and its turn comes
//   (slot_atom)              a worker finished a job
//   (stats_atom)             -> scheduler_stats
#pragma once

#include <cstddef>

#include <caf/all.hpp>

namespace proctor {

struct scheduler_stats {
  size_t queued = 0;
  size_t running = 0;
  size_t slots = 0;
  uint64_t dispatched = 0;
};

/// Spawns the scheduler with `workers` run slots.
caf::actor spawn_scheduler(caf::actor_system& sys, size_t workers);

} // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::scheduler_stats)
