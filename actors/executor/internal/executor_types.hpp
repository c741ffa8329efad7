// Internal: the executor's messages to itself, and what it keeps per root and per waiter
// (executor_state.hpp holds them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "supervision/restart_tracker.hpp"

namespace proctor::exec_detail {

using wait_timeout_atom = caf::atom_constant<caf::atom("waittmo")>;
using event_expire_atom = caf::atom_constant<caf::atom("evexpire")>;
using restart_root_atom = caf::atom_constant<caf::atom("rootrst")>;
using wake_root_atom = caf::atom_constant<caf::atom("rootwake")>;
using orphan_retry_atom = caf::atom_constant<caf::atom("orphretry")>;
using schedule_tick_atom = caf::atom_constant<caf::atom("schedtick")>;

using promise_t = caf::typed_response_promise<std::string>;

struct waiter {
  caf::typed_response_promise<std::string> rp;
  uint64_t token = 0;
};

struct root_entry {
  caf::actor handle;
  restart_tracker restarts;
  bool finished = false;
  /// Passivated: no actor; the root waits for an event and is restarted from the journal
  /// when the event, its deadline or an abort comes (wake_root).
  bool passivated = false;
  bool waking = false;             ///< its tree is being read back
  uint64_t passivation_token = 0;  ///< the deadline message of an older sleep carries another
  int requests_in_flight = 0;      ///< sent to its actor, unanswered: it may not passivate
  /// Wake-ups routed into the live tree (events, ends of children on other nodes): a
  /// passivation asked for at another epoch is refused (proc_passivate_tree.cpp).
  uint64_t wake_epoch = 0;
  std::vector<std::string> remote_nodes;         ///< passivated: where its remote children run
  std::vector<std::function<void()>> when_live;  ///< run once the woken actor exists
  /// Passivated with a deadline: its procedures, counted in executor_state::wake_volume under
  /// the second of wake_deadline_ms (0: not counted).
  uint64_t wake_procs = 0;
  int64_t wake_deadline_ms = 0;  ///< passivated: the earliest deadline it is read back ahead of
  /// Read back ahead of this deadline: it does not passivate again while that deadline is its
  /// earliest (it would be read back at once, and again, until the deadline).
  int64_t woken_for_ms = 0;
  std::string nonce;
};

}  // namespace proctor::exec_detail
