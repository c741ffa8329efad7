// The JSON of the operator views (`proctor tree --json`, `history --json`, `locks --json`):
// one line each, keys always in the order shown. Times are UTC text ("2026-11-25T06:40:12Z"
// style, as `nodes`), null when not known; durations in ms.
#pragma once

#include <cstdint>
#include <string>

#include <google/protobuf/repeated_field.h>

#include <proctor/wire.pb.h>

namespace proctor {

/// A tree as `tree` answers it (root first, depth first) as one nested object:
///   {"id":5,"type":"demo.tree","state":"WAITING","waiting_for":"children","node":"",
///    "parent_id":0,"error":"","result":null,"started_at":"…","since":"…","ended_at":null,
///    "duration_ms":1200,"bypassed":false,"done":1,"total":2,"children":[{…},{…}]}
/// `done`/`total`: its direct children that ended, of all; `duration_ms`: from its submit
/// to its end (to `now_ms` while it runs). Children not in the list are left out.
std::string tree_to_json(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs,
                         int64_t now_ms);

/// A history as {"status":{status_to_json},"note":"","entries":[{"lsn":12,"kind":"step",
/// "state":2,"state_name":"DEBIT","next_state":3,"next_state_name":"CREDIT","attempt":1,
/// "at":"…","at_ms":1764052812345,"took_us":2100,"since_previous_ms":12,"detail":""}, …]}.
/// `since_previous_ms`: from the previous entry with a time to this one (null when either
/// is not known).
std::string history_to_json(const pb::History& h);

/// Locks as [{"resource":"ns/t","mode":"exclusive","proc_id":5,"root_id":5,"held":true,
/// "blocked_by":""}, …]: the held ones, then the awaited ones.
std::string locks_to_json(const google::protobuf::RepeatedPtrField<pb::LockInfo>& xs);

/// `limits`: a JSON array, one object per type: {type, max_running, rate, per_ms, source
/// ("code" or "operator"), running, waiting, throttled, code: {max_running, rate, per_ms},
/// set_at_ms (operator only)}.
/// `proctor audit --json`, GET /api/audit: the acts audited, oldest first (docs/security.md).
std::string audit_to_json(const google::protobuf::RepeatedPtrField<pb::AuditEntry>& xs);
/// The task queues (`proctor queues --json`, GET /api/queues: docs/workers.md):
/// {"queues":[{"name","depth","leased","pollers","oldest_age_ms","dispatched","completed",
/// "failed","timed_out","workers":[{"worker","last_poll_ms"}]}]}.
std::string queues_to_json(const google::protobuf::RepeatedPtrField<pb::QueueInfo>& xs);

std::string limits_to_json(const google::protobuf::RepeatedPtrField<pb::TypeLimitInfo>& xs);

/// `schedule list` / `show`: a JSON array, one object per schedule: {name, cron, zone, type,
/// args (the JSON), priority, overlap ("skip", "buffer-one", "allow"), catch_up ("none",
/// "one", "all"), catch_up_window_ms, jitter_ms, paused, created_at, next_fire_at (null:
/// none), next_fire_ms, buffered_fire_at (null: none), fired, skipped, missed, cluster (the
/// cluster group's: fired by its slot's owner; fired, skipped, missed and runs count what this
/// node decided), runs: [{fire_at,
/// fire_ms, id, manual, state (null: released), ended}, ...] oldest first}.
std::string schedules_to_json(const google::protobuf::RepeatedPtrField<pb::ScheduleInfo>& xs);

/// "skip", "buffer-one", "allow"; and "none", "one", "all" (as the CLI and the API take them).
const char* overlap_name(pb::Schedule::Overlap o);
const char* catch_up_name(pb::Schedule::CatchUp c);

/// A procedure's end time in a `tree` answer: ended_at_ms, or 0 while it runs.
inline bool has_ended(const pb::ProcStatus& s) {
  return s.ended_at_ms() != 0;
}

}  // namespace proctor
