// A node's link to one peer (README "Across nodes"): a CAF broker holding one persistent TCP
// connection to the peer's --listen address, over which every request this node sends the
// peer travels multiplexed (wire.proto Request.tag): the outbox's deliveries, heartbeats,
// and the queries this node forwards. The peer's own broker (client_server.hpp) answers a
// tagged request as soon as its executor does, so a slow request holds up no other. The
// connection is TLS when the actor system was configured for it (actors/tls.hpp).
//
// Liveness. The link pings the peer every heartbeat_interval; the executor there answers
// (not only its socket), so a node that is hung, stopped (SIGSTOP) or deadlocked stops
// answering. A ping unanswered for heartbeat_timeout, a closed connection or a failed
// connect makes the peer *down*: every request in flight fails at once, new ones are refused
// at once ("node b unreachable since …"), and the link reconnects with back-off (connects
// run on a detached helper, bounded by connect_timeout, so the multiplexer never blocks).
// The peer is *up* again at the first answered ping on a new connection. Each change goes
// to the link's parent as (peer_status_atom, peer_status).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

namespace proctor {

using peer_status_atom = caf::atom_constant<caf::atom("peerstat")>;
/// (peer_subscribe_atom, caf::actor): the subscriber gets every peer's status now and each
/// change later, as (peer_status_atom, peer_status).
using peer_subscribe_atom = caf::atom_constant<caf::atom("peersub")>;

/// How this node sees one peer.
struct peer_status {
  std::string name;
  std::string address;  ///< HOST:PORT
  bool up = false;
  int64_t since_ms = 0;  ///< up, or down, since (wall clock; down since the link started)
  std::string reason;    ///< why it is down
  int64_t rtt_us = 0;    ///< the last heartbeat's round trip
  // From the peer's last answer to a heartbeat (wire.proto NodeInfo).
  uint16_t number = 0;
  uint64_t live = 0;
  int64_t started_at_ms = 0;
  std::vector<std::string> types;  ///< its registered procedure types (sorted)
  bool types_known = false;

  /// "node b unreachable since 2026-11-25T06:40:12Z (no answer to heartbeats for 3 s)".
  std::string unreachable_text() const;
};

/// One address a peer may be reached at.
struct peer_endpoint {
  std::string host;
  uint16_t port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

struct peer_link_config {
  std::string self_name;
  std::string peer_name;
  /// Where the peer may answer: its active process and its standbys (README "Standby").
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

} // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::peer_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<proctor::peer_status>)
