// The node's front door for clients (the proctor CLI, other nodes' procedures): a CAF broker
// serving the client protocol of proto/WIRE.md on the node's --listen address. Each frame
// holds a serialized pb::Request, forwarded to the executor as (rpc_atom, std::string);
// the executor's answer goes back as one frame.
//
// Over TLS when the actor system was configured for it (tls/caf_tls.hpp): a client without a
// certificate from the CA is refused and logged. Clients are TCP peers, not CAF nodes: a
// short-lived client leaves nothing behind in the node once its connection is closed, and an answer
// can only go to the connection that asked (each connection carries a generation number; a late
// answer for a connection that is gone is dropped, even when a new connection got the same handle).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <caf/all.hpp>

#include "actors/base/auth_policy.hpp"

namespace proctor {

struct client_server_config {
  /// Larger frames are answered BAD_REQUEST and the connection closed.
  size_t max_frame_bytes = size_t{2} << 20;
  /// Bound on the executor's answer to anything but `wait`.
  std::chrono::milliseconds request_timeout{60'000};
  /// A `wait` is answered by the executor at its timeout_ms; the broker gives it this more.
  std::chrono::milliseconds wait_grace{5'000};
  /// A `wait` without a timeout (0), or a longer one, is sent on with this one: the
  /// executor then answers TIMEOUT and the client polls again (as the CLI does).
  uint64_t max_wait_ms = 600'000;
  /// The --auth-policy in force (none: the authoriser's defaults).
  std::shared_ptr<auth_policy_slot> policy = std::make_shared<auth_policy_slot>();
  /// Counts the requests the authoriser refused (proctor_refused_requests_total).
  std::shared_ptr<std::atomic<uint64_t>> refused_requests =
    std::make_shared<std::atomic<uint64_t>>(0);
  /// Submits are audited (--audit-submits): the door says who sent them (actors/base/audit.hpp).
  bool audit_submits = false;
};

/// The frame limit for a node whose submits may carry `max_args_bytes` of args JSON: that
/// plus 1 MiB for the rest of a request, at most max_frame_bytes (wire_frame.hpp).
size_t client_frame_limit(size_t max_args_bytes);

/// Listens on host:port (port 0: any free port) and serves clients for `executor` until
/// sent an exit. Returns the broker and the port it listens on, or why it cannot listen.
caf::expected<std::pair<caf::actor, uint16_t>>
spawn_client_server(caf::actor_system& sys, caf::actor executor, const std::string& host,
                    uint16_t port, client_server_config cfg);

}  // namespace proctor
