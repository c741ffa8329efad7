// Internal: the executor's part in events and calls (executor_events.cpp, executor_calls.cpp
// own it; executor_passivation.cpp and executor_recovery.cpp hand held events over): who waits
// under which key, the events kept for later waiters, the deliveries held for passivated
// procedures or still in flight, and the calls under way.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <caf/all.hpp>

#include "actors/base/incremental_map.hpp"

namespace proctor::exec_detail {

struct pending_event {
  uint64_t lsn = 0;
  std::string payload;
  int64_t arrived_at_ms = 0;
  /// A task's end that fails its wait (executor_tasks.cpp): why; its waiter resumes as from
  /// a failed call.
  std::string failure;
};

/// What wakes a procedure waiting under a key: an event's payload, or a call's reply, or why
/// the call failed.
struct event_delivery {
  std::string payload;
  std::string failure;  ///< a failed call: why (it resumes as from a passed deadline)
  /// An event: its EventArrived record (journal_keys::meta_root, this LSN); 0 for a call's
  /// reply. The procedure names it in its EventDelivered record and tells the executor whether
  /// it took it (event_taken_atom, event_declined_atom).
  uint64_t event_lsn = 0;
  /// The procedure is the event's only taker: it deletes the event's record in the batch of
  /// its EventDelivered, so that a crash leaves both or neither. Else (an event that woke
  /// several) the executor deletes it once each of them took it or declined it.
  bool consume = false;
};

/// A delivery held for a procedure whose actor is not there (a passivated tree, a passivated
/// child): given to it when it waits under `key` again.
struct held_event {
  std::string key;
  event_delivery d;
};

/// An event handed to procedures that have not all said yet whether they took it
/// (executor_events.cpp): neither kept for later waiters nor deleted meanwhile.
struct event_in_flight {
  std::string key;
  pending_event ev;
  std::vector<uint64_t> takers;  ///< handed to, not answered yet
  std::vector<uint64_t> took;    ///< took it (their EventDelivered is durable)
  bool consume = false;          ///< event_delivery::consume (one taker)
  bool was_kept = false;         ///< a later waiter's, kept until then (not woken by it)
  /// The live actor each taker got it from the executor directly (not held, not through its
  /// parent): should a new actor of that procedure wait under `key`, the old one went down
  /// before it answered (a supervision restart), and the new one gets the event.
  std::unordered_map<uint64_t, caf::actor> handed_to;
};

/// A call under way (executor_calls.cpp): its caller, and the procedure that waits for it.
struct call_entry {
  caf::actor caller;
  uint64_t proc_id = 0;
};

struct events_part {
  /// Who waits under each key: (procedure, the actor its delivery goes to).
  incremental_map<std::string, std::vector<std::pair<uint64_t, caf::actor>>> waiters;
  incremental_map<uint64_t, std::string> waiting_key;  ///< procedure -> its event key
  /// Events that found no waiter, kept under their key for a later one (until their TTL).
  incremental_map<std::string, std::vector<pending_event>> kept;
  /// Events for procedures of passivated trees, kept until their actors wait again.
  std::unordered_map<uint64_t, held_event> held;
  /// Events handed to procedures, until each said whether it took it, by LSN; and the
  /// procedures they were handed to, each to its event's LSN.
  std::unordered_map<uint64_t, event_in_flight> in_flight;
  std::unordered_multimap<uint64_t, uint64_t> handed;
  /// Calls under way, by call id (the key their procedure waits under).
  std::unordered_map<std::string, call_entry> calls;
  /// Event waiters registered by their parent (passivated children,
  /// proc_passivated_children.cpp): their event is held, and the parent told to spawn them.
  std::unordered_set<uint64_t> via_parent;
};

}  // namespace proctor::exec_detail
