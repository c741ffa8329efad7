// Internal: what the two files of the task queues share (executor_tasks.cpp: queues, polls,
// leases, timers, recovery; executor_task_reports.cpp: heartbeats, completes, fails, and a
// task's end or next attempt). Their state is tasks_part.hpp's.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <proctor/journal.pb.h>
#include <proctor/wire.pb.h>

#include "actors/executor/internal/executor_fwd.hpp"
#include "actors/executor/internal/executor_types.hpp"
#include "actors/executor/internal/tasks_part.hpp"
#include "persistence/journal.hpp"

namespace proctor::exec_detail {

constexpr size_t max_ended_tasks = 10'000;

/// "<key without call:>.<attempt>": what a worker sends back.
std::string token_of(const task_entry& t);
/// "[proc ID root ROOT]", for logs.
std::string proc_text(executor_actor* self, uint64_t id);
/// True while procedure `id` waits under `key` (an event handed to it ends that).
bool still_waits(executor_actor* self, const task_entry& t);
/// Remembers how task `key` ended (the last max_ended_tasks).
void note_ended(tasks_part& tp, const std::string& key, ended_task e);
/// Out of its queue's ready tasks; into them (at the back).
void unready(tasks_part& tp, const task_entry& t);
void make_ready(tasks_part& tp, task_entry& t);
/// Its lease's or retry delay's timer (task_timer_atom), and its disarming.
void arm_task_timer(executor_actor* self, task_entry& t, int64_t at_ms);
void disarm_task_timer(executor_actor* self, task_entry& t);
/// The lease's end: its start-to-close from the poll, or its heartbeat's bound, the earlier.
int64_t lease_end(const task_entry& t);
/// Erases task `key` (its timer disarmed, out of its queue).
void drop_task(executor_actor* self, const std::string& key);
/// Deletes a record of the meta range (none: nothing).
void delete_meta(journal_batch& b, uint64_t lsn);
/// Its TaskState record at `attempt`, leased to `worker` ("": queued).
pb::JournalRecord state_record(const task_entry& t, uint32_t attempt, const std::string& worker,
                               const std::string& details);
/// Hands ready tasks to the polls that wait for them.
void serve_polls(executor_actor* self);
/// How many tasks of `queue` a poll may take now, at most `want` (its limits: leased at once,
/// rate); taken_from() once it took them; held_back() when its limits held a ready task back.
uint32_t queue_allowance(executor_actor* self, const std::string& queue, uint32_t want);
void taken_from(executor_actor* self, const std::string& queue, uint32_t n);
void held_back(executor_actor* self, const std::string& queue);
/// A lease of a limited queue ended (its task ended, was queued again or withdrawn): a poll
/// may take its place.
void slot_freed(executor_actor* self, const std::string& queue);
/// What a poll answers of it.
void fill_info(executor_actor* self, const task_entry& t, pb::TaskInfo* out);

// -- executor_task_reports.cpp -----------------------------------------------------------------
/// The key and attempt a worker's token names; false if it names none.
bool parse_token(const std::string& token, std::string* key, uint32_t* attempt);
/// A heartbeat, complete or fail: answered once journaled (or refused, changing nothing).
void handle_report(executor_actor* self, const pb::TaskRequest& req, promise_t rp);
/// The reports that waited for a write of a task to end, answered now.
void replay(executor_actor* self, std::vector<std::pair<pb::TaskRequest, promise_t>> reports);
/// Attempt `t.attempt` is over without a result (`why`): the next one, or the task fails
/// (answers `rp`, if any).
void attempt_failed(executor_actor* self, task_entry& t, const std::string& why, bool retryable,
                    promise_t* rp);

}  // namespace proctor::exec_detail
