// Counters per procedure type and node gauges, rendered in Prometheus text format.
// prometheus-cpp holds the counters and writes the text (escaping label values and HELP).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <proctor/proc_state.hpp>

#include "actors/scheduling/step_scheduler.hpp"
#include "persistence/journal.hpp"

namespace proctor {

/// One peer as this node sees it, for the per-peer families (proctor_peer_*{peer="NAME"}).
struct peer_sample {
  std::string name;
  bool up = false;
  int64_t rtt_us = 0;  ///< the last heartbeat's round trip
  size_t outbox = 0;   ///< messages for it not acknowledged yet
  uint64_t downs = 0;  ///< times it went down after being up (link flaps)
};

/// One recurring schedule, for the per-schedule families (proctor_schedule_*{schedule="NAME"});
/// its counts are journaled with it, so they run on across restarts.
struct schedule_sample {
  std::string name;
  uint64_t fired = 0;        ///< fire times submitted
  uint64_t triggered = 0;    ///< runs an operator triggered
  uint64_t skipped = 0;      ///< fire times skipped (overlap, or not submittable)
  uint64_t missed = 0;       ///< fire times missed while the node was down (catch-up)
  int64_t next_fire_ms = 0;  ///< 0: none (paused)
  bool paused = false;
};

/// A task queue's figures (docs/workers.md).
struct queue_sample {
  std::string name;
  uint64_t depth = 0;
  uint64_t leased = 0;
  uint64_t pollers = 0;
  int64_t oldest_age_ms = 0;
  uint64_t dispatched = 0;
  uint64_t completed = 0;
  uint64_t failed = 0;
  uint64_t timed_out = 0;
};

/// The executor's own gauges.
struct executor_gauges {
  size_t waiting = 0;           ///< procedures WAITING or WAITING_TIMEOUT
  size_t passivated = 0;        ///< of those, roots without an actor
  size_t procedures = 0;        ///< known (live or retained)
  size_t quarantined = 0;       ///< trees
  size_t rolling_back = 0;      ///< trees whose rollback runs
  uint64_t undos = 0;           ///< counter: undos done
  uint64_t undo_failures = 0;   ///< counter: undos that threw (and are retried)
  uint64_t retries = 0;         ///< counter: operators' retries of failed steps (`proctor retry`)
  uint64_t resubmits = 0;       ///< counter: operators' resubmits of ROLLEDBACK trees
  uint64_t epoch = 0;           ///< the data directory's epoch this process holds
  int64_t active_since_ms = 0;  ///< wall clock: since when this process is the active one
  int64_t takeover_ms = 0;      ///< how long its takeover took (0: started without one)
  uint64_t passivation_attempts = 0;  ///< counter: trees asked whether they only wait
  int64_t passivated_procedures = 0;  ///< held passivated by a live parent, without an actor
  size_t calls_in_flight = 0;         ///< calls made for waiting procedures, not answered yet
  uint64_t compactions = 0;           ///< counter: trees' journals compacted into one record
  uint64_t refused_requests = 0;      ///< counter: requests the authoriser refused
  uint64_t actors_started = 0;        ///< counter: procedure actors started (this process)
  uint64_t compacted_records = 0;     ///< counter: records those compactions replaced
  uint64_t cancelled_children = 0;    ///< counter: children cancelled by a join policy
  uint64_t contained_failures = 0;    ///< counter: children's failures a join policy contained
  uint64_t queued_wakes = 0;          ///< counter: wake-ups that waited for a sibling to go down
  uint64_t misdirected_pings = 0;     ///< counter: heartbeats from non-peers or for another name
  uint64_t peer_refusals = 0;         ///< counter: peers' answers refusing this node or misnamed
  uint64_t peer_stray_answers = 0;    ///< counter: peers' answers no request could be found for
  uint64_t incomplete_views = 0;      ///< counter: tree views lacking a node's parts
  std::vector<peer_sample> peers;     ///< each peer (none without --peers)
  std::vector<schedule_sample> schedules;  ///< each recurring schedule (not deleted)
  std::vector<queue_sample> queues;        ///< each task queue used since the node started
};

class type_metrics {
public:
  type_metrics();
  ~type_metrics();
  type_metrics(type_metrics&&) noexcept;
  type_metrics& operator=(type_metrics&&) noexcept;

  /// A procedure of `type` entered the node (submitted or spawned).
  void submitted(const std::string& type);

  /// A procedure of `type` ended in `state` after `runtime`.
  void ended(const std::string& type, proc_state state,
             std::chrono::milliseconds runtime = std::chrono::milliseconds{-1});

  /// A procedure of `type` that had ended FAILED (counted by ended()) and was made live again
  /// by an operator's retry ended again in `state`. Counted apart, so that each procedure is
  /// counted once in succeeded + failed + rolledback (issue 46.10).
  void ended_after_retry(const std::string& type, proc_state state);

  /// A procedure of `type` was flagged for making no progress.
  void no_progress(const std::string& type);

  /// Prometheus text exposition of the counters and the gauges passed in.
  std::string render(const step_scheduler_stats& s, const journal_stats& j,
                     const executor_gauges& g) const;

  /// Upper bounds (seconds) of the runtime histogram's buckets.
  static constexpr std::array<double, 10> buckets{0.001, 0.005, 0.01, 0.05, 0.1,
                                                  0.5,   1,     5,    30,   300};

private:
  struct families;  // prometheus-cpp's registry, kept out of this header
  std::unique_ptr<families> families_;
};

}  // namespace proctor
