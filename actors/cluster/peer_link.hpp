// A node's link to one peer (docs/cluster.md): a CAF broker holding one persistent TCP
// connection to the peer's --listen address, over which every request this node sends the
// peer travels multiplexed (wire.proto Request.tag): the outbox's deliveries, heartbeats,
// and the queries this node forwards. The peer's own broker (client_server.hpp) answers a
// tagged request as soon as its executor does, so a slow request holds up no other. The
// connection is TLS when the actor system was configured for it (tls/caf_tls.hpp).
//
// Liveness. The link pings the peer every heartbeat_interval; the executor there answers
// (not only its socket), so a node that is hung, stopped (SIGSTOP) or deadlocked stops
// answering. A ping unanswered for heartbeat_timeout, a closed connection or a failed
// connect makes the peer *down*: every request in flight fails at once, new ones are refused
// at once ("node b unreachable since …"), and the link reconnects with back-off (connects
// run on a detached helper, bounded by connect_timeout, so the multiplexer never blocks).
// The peer is *up* again at the first answered ping on a new connection. Each change goes
// to the link's parent as (peer_status_atom, peer_status). Nothing else makes it down: an
// answer the link cannot read or match to a request (no tag) is logged and dropped, and the
// request it answered fails at its deadline, saying so; the frames stay in step (each
// frame's length was read).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/base/peer_status.hpp"

namespace proctor {

/// One address a peer may be reached at.
struct peer_endpoint {
  std::string host;
  uint16_t port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

struct peer_link_config {
  std::string self_name;
  std::string peer_name;
  /// Where the peer may answer: its active process and its standbys (docs/standby.md).
  /// The link connects to one at a time and moves to the next when it cannot connect, the
  /// connection ends or the process there does not answer as the peer.
  std::vector<peer_endpoint> addresses;
  std::chrono::milliseconds heartbeat_interval{500};
  /// A ping unanswered this long makes the peer down (and the connection is dropped).
  std::chrono::milliseconds heartbeat_timeout{3'000};
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds backoff_max{2'000};
  size_t max_reply_bytes = size_t{64} << 20;
  caf::actor parent;  ///< gets (peer_status_atom, peer_status) on each change
};

/// Spawns the link (a broker in CAF's multiplexer). Protocol: (peer_request_atom, name,
/// serialized pb::Request, timeout_ms) -> serialized pb::Response, or an error at once when
/// the peer is down; (peer_status_atom) -> peer_status.
caf::actor spawn_peer_link(caf::actor_system& sys, peer_link_config cfg);

}  // namespace proctor
