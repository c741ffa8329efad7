// Carries the outbox's deliveries (and other node-to-node requests) to the peers named on
// the command line: (peer_request_atom, name, serialized pb::Request, timeout_ms) ->
// serialized pb::Response. Each round trip is the client protocol of proto/WIRE.md on the
// peer's --listen address (a PeerDeliver request), made by a one-shot detached actor, so a
// node reaches its peers the way the CLI reaches it, and a closed or refused connection
// is an error at once. The outbox sends each peer one delivery at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <caf/all.hpp>

namespace proctor {

struct peer_address {
  std::string host;
  uint16_t port = 0;
};

/// Parses "b=host:port,c=host:port" (also one entry per line, '#' comments, for a peers
/// file) into `out`; false with a one-line reason in `err`.
bool parse_peers(const std::string& text, const std::string& self_name,
                 std::map<std::string, peer_address>* out, std::string* err);

caf::actor spawn_peer_transport(caf::actor_system& sys,
                                std::map<std::string, peer_address> peers);

} // namespace proctor
