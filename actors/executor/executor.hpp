// The executor: a node's front door (the seeds' ProcedureExecutor). It answers the wire
// requests (rpc.hpp), assigns procedure ids, deduplicates submits by nonce, keeps every
// procedure's status and finished results until released or their TTL runs out, routes
// external events to the procedures suspended on them, supervises the root actors, and
// starts the trees recovered from the journal.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/base/node_env.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

struct executor_config {
  /// How long a finished tree's result is kept (then its journal range is deleted).
  std::chrono::milliseconds result_ttl{std::chrono::minutes{15}};
  /// A finished tree's records other than its summary are deleted within this time, with
  /// those of the trees that end meanwhile (executor_retention.cpp).
  std::chrono::milliseconds collect_after{50};
  /// The ended trees whose whole history (every step, retry, undo) is kept until their
  /// result expires or is released, counted in journal records: the most recently ended
  /// ones that fit. Older ones, and a tree larger than this alone, keep their summary only
  /// (docs/concepts.md, "History"). 0: every ended tree keeps its summary only.
  uint64_t history_keep_records = 200'000;
  /// How long an event is kept for procedures that suspend on its key later.
  std::chrono::milliseconds event_ttl{std::chrono::minutes{5}};
  /// Largest accepted args JSON.
  size_t max_args_bytes = 1 << 20;
  /// Procedures (live or retained) beyond which submits are refused.
  size_t max_procedures = 2'000'000;
  /// A root that has waited this long for an event, with no child running, gives up its
  /// actor (passivates): the executor keeps its status and its place among the event's
  /// waiters and restarts it from the journal when the event, its deadline or an abort
  /// comes. Trees found so at recovery start passivated. Negative: never.
  std::chrono::milliseconds passivate_after{std::chrono::seconds{1}};
  /// A tree whose journal holds this many records is compacted into one record (0: never;
  /// a root's type's compact_after overrides it; docs/flow-control.md).
  uint64_t compact_after = 100'000;
  /// What reading a passivated tree back costs per procedure (the journal's read and fold,
  /// the actors' start, the deadlines armed again), for how early it is read back: half a
  /// second before its earliest deadline, plus this for each procedure of the passivated
  /// trees due in the two seconds up to that deadline, its own included. A million waiters
  /// in 100 trees due in the same second then come back over the 3 s before it, not all in
  /// the last half second (proctor-bench (j): about 1.5 to 2 us each on 2 cores).
  std::chrono::microseconds wake_read_per_proc{3};
  /// A procedure is *stuck* (`proctor bypass` needs no --force) when it has not ended, is
  /// not waiting for its children, and has waited (for an event, a timer, a retry, a lock,
  /// a node) or retried in the same state for at least this long.
  std::chrono::milliseconds stuck_after{std::chrono::seconds{60}};
  /// Submits are audited too (docs/security.md, "Audit"); the other acts always are.
  bool audit_submits = false;
  /// An audit record is dropped this long after its act (--audit-keep-days).
  std::chrono::hours audit_keep{24 * 90};
};

/// An event kept in the journal's node range.
struct recovered_event {
  uint64_t lsn = 0;
  std::string key;
  std::string payload_json;
  int64_t arrived_at_ms = 0;
  std::string failure;  ///< a task's end that fails its wait (journal.proto EventArrived)
};

/// Where a task of the node's queues stood, as the journal holds it (journal.proto TaskState).
struct recovered_task {
  uint64_t lsn = 0;  ///< of its record (deleted when the next is written, or the task ends)
  pb::TaskState rec;
};

/// What recovery hands the executor.
/// An operator's limits for a type as the journal holds them (journal.proto TypeLimits).
struct recovered_limit {
  uint64_t lsn = 0;                   ///< of its record (deleted when the next is written)
  std::optional<type_limits> limits;  ///< nullopt: cleared, back to the code's
  int64_t at_ms = 0;
  bool from_cluster = false;  ///< as the cluster group holds it (docs/flow-control.md)
};

/// A TypeLimits record (journal.proto) at `lsn`, read back.
recovered_limit limit_of(uint64_t lsn, const pb::TypeLimits& rec);

/// A recurring schedule as the journal holds it (journal.proto Schedule): its last record.
struct recovered_schedule {
  uint64_t lsn = 0;  ///< of its record (deleted when the next is written)
  pb::Schedule rec;  ///< a tombstone (rec.deleted()) too
};

/// An event id seen, as the journal holds it (journal.proto EventIdSeen).
struct recovered_event_id {
  uint64_t lsn = 0;
  std::string key;
  std::string id;
  int64_t at_ms = 0;
};

/// What a peer said of its progress, as the journal holds it (journal.proto PeerProgress).
struct recovered_peer_progress {
  uint64_t lsn = 0;  ///< of its record (deleted when the next is written)
  pb::PeerProgress rec;
};

/// A nonce taken over from another node, as the journal holds it (journal.proto NonceTaken).
struct recovered_nonce {
  uint64_t lsn = 0;
  pb::NonceTaken rec;
};

/// An audited act, as the journal holds it (journal.proto AuditEntry).
struct recovered_audit {
  uint64_t lsn = 0;
  pb::AuditEntry rec;
};

struct recovered_state {
  std::vector<tree_image> trees;
  std::vector<recovered_event> events;
  std::map<std::string, recovered_limit> limits;                 ///< by type (in the last part)
  std::map<std::string, recovered_schedule> schedules;           ///< by name (in the last part)
  std::map<std::string, recovered_peer_progress> peer_progress;  ///< by peer (in the last part)
  std::vector<recovered_event_id> event_ids;  ///< (in the first part, with the events)
  std::vector<recovered_nonce> nonces_taken;  ///< (in the first part)
  std::vector<recovered_task> tasks;          ///< (in the first part)
  std::vector<recovered_audit> audit;         ///< (in the first part)
};

/// Spawns the executor; it fills `env->executor` with itself before starting any tree.
caf::actor spawn_executor(caf::actor_system& sys, std::shared_ptr<node_env> env,
                          executor_config cfg, recovered_state recovered);

/// (audit_outside_atom, std::string request, caf::actor doer) -> std::string: a request the
/// executor audits (docs/security.md, "Audit") but another actor does — a replica group's
/// `replicas add` or `remove`, done by its front. Journaled with who asked, then asked of
/// `doer` as (rpc_atom, request), its answer journaled as the outcome, then returned; a
/// request not audited goes to `doer` as it is.
using audit_outside_atom = caf::atom_constant<caf::atom("auditout")>;

using recover_part_atom = caf::atom_constant<caf::atom("recpart")>;
using recover_done_atom = caf::atom_constant<caf::atom("recdone")>;

/// Spawns the executor before the journal is scanned (node::start), to take the trees over
/// while the scan folds the next ones (on two cores, the take-over of a million passivated
/// waiters then no longer follows the scan: proctor-bench (j)). Its protocol until serving:
///   (recover_part_atom, std::shared_ptr<recovered_state>): trees read back (and, in the
///       first part, every event: they precede the trees in the journal);
///   (recover_done_atom): the scan is complete, and env->journal, env->outbox and the id
///       floor are set: it starts, arms and wakes what the trees need, then serves.
/// It handles nothing else meanwhile: other messages wait in its mailbox.
caf::actor spawn_recovering_executor(caf::actor_system& sys, std::shared_ptr<node_env> env,
                                     executor_config cfg);

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<proctor::recovered_state>)
