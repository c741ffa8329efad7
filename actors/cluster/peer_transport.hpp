// Carries the outbox's deliveries (and other node-to-node requests) to the peers named on
// the command line: (peer_request_atom, name, serialized pb::Request, timeout_ms) ->
// serialized pb::Response, over one persistent link per peer (peer_link.hpp: the client
// protocol of proto/WIRE.md, multiplexed, with heartbeats). A request to a peer that is
// down fails at once. Subscribers ((peer_subscribe_atom, actor): the node's executor) get
// each peer's status now and every change later; (peer_status_atom) ->
// std::vector<peer_status> lists them all.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include <caf/all.hpp>

#include "actors/cluster/peer_link.hpp"

namespace proctor {

/// Where a peer may answer: its active process's address, then its standbys'.
struct peer_address {
  std::vector<peer_endpoint> endpoints;
  /// "host:port|host:port"
  std::string text() const;
};

/// Parses "b=host:port,c=host:port" (also one entry per line, '#' comments, for a peers
/// file) into `out`; a peer with a standby has a list of addresses, "b=h1:p1|h2:p2". False
/// with a one-line reason in `err`.
bool parse_peers(const std::string& text, const std::string& self_name,
                 std::map<std::string, peer_address>* out, std::string* err);

struct peer_transport_config {
  std::string self_name;
  std::map<std::string, peer_address> peers;
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{3'000};
  std::chrono::milliseconds connect_timeout{2'000};
};

caf::actor spawn_peer_transport(caf::actor_system& sys, peer_transport_config cfg);

}  // namespace proctor
