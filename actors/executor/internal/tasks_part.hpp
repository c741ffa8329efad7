// Internal: the node's task queues for external workers (docs/workers.md;
// executor_tasks.cpp owns this part). A task is a procedure's wait for a dispatch
// (outcome::dispatch): queued when its procedure waits for it (executor_calls.cpp hands it
// here), leased to the worker that polls it, and ended by the event that carries its result
// or why it failed, journaled under its key as any event is (executor_events.cpp delivers it).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include <proctor/journal.pb.h>
#include <proctor/policy.hpp>
#include <proctor/wire.pb.h>

#include "actors/executor/executor.hpp"
#include "actors/executor/internal/executor_fwd.hpp"
#include "actors/executor/internal/executor_types.hpp"

namespace proctor::exec_detail {

/// One task of a queue, while its procedure waits for it.
struct task_entry {
  std::string key;  ///< the call key its procedure waits under
  uint64_t proc_id = 0;
  pb::TaskSpec spec;
  uint32_t attempt = 1;
  std::string worker;  ///< leased to (""): queued
  uint64_t seq = 0;    ///< its place in its queue (the order tasks are handed out in)
  int64_t queued_at_ms = 0;
  int64_t not_before_ms = 0;  ///< a retry's delay: not handed out before
  int64_t leased_at_ms = 0;
  int64_t beat_at_ms = 0;  ///< its lease's last heartbeat (or its start)
  int64_t lease_until_ms = 0;
  uint64_t state_lsn = 0;  ///< its TaskState record (0: none)
  std::string details;     ///< the last heartbeat's details
  uint64_t timer = 0;      ///< the token of its lease or retry-delay timer
  bool busy = false;       ///< a record of it is being written (lease, heartbeat, end, requeue)
  bool leasing = false;    ///< its lease is being written (counts as leased for the limits)
  bool stopped = false;    ///< its procedure stopped waiting while it was busy
  std::string ending;      ///< busy with its end: the result (or failure) being written
  std::vector<promise_t> end_waiters;  ///< the same complete sent again meanwhile
  /// Reports that came while it was busy: each is answered once the write ends, as if it came
  /// then (so a heartbeat racing a complete is not refused for the race).
  std::vector<std::pair<pb::TaskRequest, promise_t>> deferred;
};

/// A poll that found nothing and waits (up to its bound) for a task of its queues.
struct task_poll {
  std::vector<std::string> queues;
  std::string worker;
  uint32_t max = 1;
  promise_t rp;
  uint64_t token = 0;
};

/// How a task ended, for a complete (or heartbeat) that comes again after it did.
struct ended_task {
  uint32_t attempt = 0;
  std::string result;      ///< the result it was completed with
  std::string why;         ///< failed, or its procedure stopped waiting: why
  bool cancelled = false;  ///< its procedure stopped waiting (an abort, a deadline)
};

/// A queue's figures since the node started.
struct queue_figures {
  uint64_t dispatched = 0;
  uint64_t completed = 0;
  uint64_t failed = 0;
  uint64_t timed_out = 0;
  std::map<std::string, int64_t> last_poll;  ///< by worker (at most 64, the oldest dropped)
};

/// An operator's limits of one queue (`proctor limits set queue:NAME`) and its rate's bucket.
struct queue_limit {
  type_limits limits;  ///< max_running: tasks leased at once; rate: handed out per `per`
  int64_t set_at_ms = 0;
  double tokens = 0;
  int64_t refilled_ms = 0;
  uint64_t throttled = 0;  ///< polls that found a ready task held back, since start
  bool wake_armed = false;
};

struct tasks_part {
  std::unordered_map<std::string, task_entry> tasks;  ///< by key
  std::unordered_map<uint64_t, std::string> by_proc;  ///< each task's key by its procedure
  /// The tasks each queue may hand out now, in the order they were queued (by seq).
  std::map<std::string, std::map<uint64_t, std::string>> ready;
  uint64_t next_seq = 0;
  std::deque<task_poll> polls;
  uint64_t poll_token = 0;
  uint64_t timer_token = 0;
  /// TaskState records read back, by task key, until their task is queued again.
  std::unordered_map<std::string, recovered_task> recovered;
  /// Tasks that ended lately, by key (at most max_ended, the oldest dropped).
  std::unordered_map<std::string, ended_task> ended;
  std::deque<std::string> ended_order;
  std::map<std::string, queue_figures> figures;
  std::map<std::string, queue_limit> limits;  ///< by queue (executor_task_limits.cpp)
};

/// Procedure `id` waits for the task `key` (a dispatch's: service "queue:" + its queue,
/// request its TaskSpec): it is queued, unless it is already.
void task_awaited(executor_actor* self, const std::string& key, uint64_t id,
                  const std::string& service, const std::string& request);
/// Procedure `id` no longer waits for its task (an abort, a deadline, a quarantine).
void task_stopped(executor_actor* self, uint64_t id);
/// A worker's request (wire TaskRequest): poll, heartbeat, complete, fail, queues.
void handle_task_request(executor_actor* self, const pb::TaskRequest& req, promise_t rp);
/// A task's lease or retry delay passed (its timer `token`).
void on_task_timer(executor_actor* self, const std::string& key, uint64_t token);
/// Each queue's figures now (`proctor queues`, the metrics).
void fill_queues(executor_actor* self, google::protobuf::RepeatedPtrField<pb::QueueInfo>* out);
/// A poll's bound passed with nothing for it.
void on_task_poll_expired(executor_actor* self, uint64_t token);
/// The TaskState records read back (recover_part), and the end of the take-over: records of
/// procedures that no longer wait are deleted (executor_task_recovery.cpp).
void tasks_recovered(executor_actor* self, std::vector<recovered_task>& tasks);
void tasks_recovery_end(executor_actor* self);

/// The limits of `queue` (nullopt or none: no limit), set by an operator or read back.
void set_queue_limit(executor_actor* self, const std::string& queue,
                     const std::optional<type_limits>& limits, int64_t at_ms);
/// True while `id`'s wait is for an undo's task (the rollback waits for it on its behalf:
/// the procedure's own status does not end it).
bool waits_for_undo_task(executor_actor* self, uint64_t id);
/// True for a limits name that names a task queue ("queue:NAME").
bool is_queue_limit_name(const std::string& name);
/// Each limited queue as `proctor limits` lists it (type "queue:NAME").
void fill_queue_limits(executor_actor* self, pb::Response& r);
/// A queue held back by its rate may hand out a task again.
void on_queue_limit_wake(executor_actor* self, const std::string& queue);

using task_limit_wake_atom = caf::atom_constant<caf::atom("tasklimw")>;
using task_timer_atom = caf::atom_constant<caf::atom("tasktimer")>;
using task_poll_expire_atom = caf::atom_constant<caf::atom("taskpollx")>;

}  // namespace proctor::exec_detail
