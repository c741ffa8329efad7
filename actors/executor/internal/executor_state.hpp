// Internal: the executor's state. Split by concern, as RocksDB splits DBImpl: each part is a
// struct of its own, in its own header, whose opening comment says which files own it —
// events and calls (events_part.hpp), schedules, limits, retention, trees across nodes
// (remote_part.hpp), recovery and passivated roots; the peers' progress (peer_progress.hpp)
// and event ids (event_ids.hpp). What is left here is the table of procedures and roots every
// file reads. The functions the executor's files share are declared by concern in
// executor_bookkeeping.hpp, executor_deliveries.hpp, executor_trees.hpp and
// executor_operations.hpp, which see only executor_fwd.hpp (no include cycle); this header
// includes them, so that a file of the executor includes this one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include <proctor/procedure.hpp>
#include <proctor/wire.pb.h>

#include "actors/base/incremental_map.hpp"
#include "actors/base/messages.hpp"
#include "actors/cluster/peer_link.hpp"
#include "actors/executor/executor.hpp"
#include "actors/executor/internal/audit_part.hpp"
#include "actors/executor/internal/event_ids.hpp"
#include "actors/executor/internal/events_part.hpp"
#include "actors/executor/internal/executor_bookkeeping.hpp"
#include "actors/executor/internal/executor_deliveries.hpp"
#include "actors/executor/internal/executor_operations.hpp"
#include "actors/executor/internal/executor_trees.hpp"
#include "actors/executor/internal/executor_types.hpp"
#include "actors/executor/internal/limits_part.hpp"
#include "actors/executor/internal/nonce_handoff.hpp"
#include "actors/executor/internal/passivated_roots_part.hpp"
#include "actors/executor/internal/peer_progress.hpp"
#include "actors/executor/internal/proc_record.hpp"
#include "actors/executor/internal/recovery_part.hpp"
#include "actors/executor/internal/remote_part.hpp"
#include "actors/executor/internal/retention_part.hpp"
#include "actors/executor/internal/schedules_part.hpp"
#include "actors/executor/internal/tasks_part.hpp"
#include "actors/executor/metrics.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/counted_actor.hpp"
#include "persistence/journal.hpp"

namespace proctor::placement {
class table;
}  // namespace proctor::placement

namespace proctor::exec_detail {

struct executor_state {
  static inline const char* name = "proctor.executor";
  std::shared_ptr<node_env> env;
  executor_config cfg;
  // The tables that grow with the number of procedures (live, waiting, or finished and kept
  // until their result expires) must not stop the executor to rehash: incremental_map.hpp.
  incremental_map<uint64_t, proc_record> procs;
  name_table type_names;  ///< the records' type names
  incremental_map<uint64_t, root_entry> roots;
  std::unordered_map<uint64_t, std::vector<waiter>> waiters;
  uint64_t wait_token = 0;
  incremental_map<std::string, uint64_t> nonces;
  // -- the parts, each in its own header ------------------------------------------------------
  events_part events;                 ///< events and calls (events_part.hpp)
  schedules_part schedules;           ///< recurring schedules (schedules_part.hpp)
  limits_part limits;                 ///< per-type limits (limits_part.hpp)
  audit_part audit;                   ///< the acts audited (audit_part.hpp)
  retention_part retention;           ///< ended trees' results and history (retention_part.hpp)
  remote_part remote;                 ///< trees across nodes (remote_part.hpp)
  recovery_part recovery;             ///< the take-over at start (recovery_part.hpp)
  passivated_roots_part passivation;  ///< passivated roots (passivated_roots_part.hpp)
  peer_progress_part progress;        ///< the peers' progress, and this node's as they saw it
  event_ids_part event_ids;           ///< the ids of events sent with one
  nonce_handoff_part handoff;         ///< nonces handed over when slots move
  tasks_part tasks;                   ///< task queues for external workers (tasks_part.hpp)
  /// Placement by key (executor_placement.cpp): the table, and the members it was built from.
  struct {
    std::shared_ptr<const std::vector<std::string>> names;
    std::shared_ptr<const placement::table> table;
  } placement;
  /// Submits with a nonce whose Submitted record is not durable yet.
  std::unordered_map<std::string, std::vector<caf::typed_response_promise<std::string>>>
    nonce_pending;
  type_metrics metrics;
  size_t live = 0;     ///< procedures live here (proc_record::live_since_ns set)
  size_t waiting = 0;  ///< procedures WAITING or WAITING_TIMEOUT
  /// Roots whose Submitted record is on its way to the journal (not in `roots` yet).
  std::unordered_set<uint64_t> submitting;
  uint64_t append_tag = 0;
  std::unordered_map<uint64_t, std::function<void(uint64_t)>> appends;  ///< by tag
  std::vector<pb::Quarantined> quarantined;
  std::unordered_set<uint64_t> rolling_back;  ///< roots running their tree's rollback
  uint64_t undos = 0;                         ///< undos done
  /// Heartbeats from nodes not in --peers, or expecting another node at this address.
  uint64_t misdirected_pings = 0;
  /// `tree` views that lack the parts of a node that did not answer.
  uint64_t incomplete_views = 0;
  uint64_t undo_failures = 0;  ///< undos that threw (each is retried)
  uint64_t retries = 0;        ///< operators' retries (since the node started)
  uint64_t resubmits = 0;      ///< operators' resubmits (since the node started)
  /// Operators' resubmits of ROLLEDBACK trees (executor_resubmit.cpp): old root -> new root,
  /// and back, from the new roots' Submitted records (or summaries) this node holds.
  std::unordered_map<uint64_t, uint64_t> resubmitted_as;
  std::unordered_map<uint64_t, uint64_t> resubmitted_from;
  /// The new root's Submitted record's LSN (0: unknown, a summary only), for `history`.
  std::unordered_map<uint64_t, uint64_t> resubmit_lsn;
};

}  // namespace proctor::exec_detail
