// The one-shot actor that makes a procedure's call to a service (outcome::call) on its
// behalf. The executor spawns it (executor_calls.cpp) and gets the reply from it, so the
// procedure that made the call needs no actor while it waits: it waits for the reply as for
// an event under the call's id, and passivates like any event waiter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/all.hpp>

namespace proctor {

struct node_env;

/// Caller -> executor: (call id, ok, text) the reply (ok) or why the call failed, after which
/// the caller is gone. A call that fails in transport is sent again with back-off, up to 10
/// attempts; an error reply, an unknown service or a malformed address fails it at once.
using call_done_atom = caf::atom_constant<caf::atom("calldone")>;

/// What one call sends: `service` names a service of this node ("billing") or of another
/// ("host:port/billing"); `call_id` goes with the request, for the service to deduplicate.
struct call_spec {
  uint64_t proc_id = 0;  ///< the procedure that made the call (its logs, its back-off's name)
  uint64_t root_id = 0;  ///< its tree's root (its logs)
  std::string call_id;
  std::string service;
  std::string request;
};

/// Spawns the caller of `spec`, which answers `reply_to` with call_done_atom and quits. An
/// exit stops it (a call to another node stops waiting for its answer within 100 ms).
caf::actor spawn_caller(caf::actor_system& sys, std::shared_ptr<node_env> env, caf::actor reply_to,
                        call_spec spec);

}  // namespace proctor
