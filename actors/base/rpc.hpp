// The executor's request entry point. Clients (the proctor CLI, other nodes' procedures) reach it
// through the node's client protocol broker (client_server.hpp, proto/WIRE.md), which forwards each
// frame as
//     (rpc_atom, std::string request)   request  = a serialized pb::Request (wire.proto)
// and writes back the one std::string it gets, a serialized pb::Response. Only atoms and strings
// cross the wire, so no CAF type registration can disagree between nodes; malformed bytes are
// answered with BAD_REQUEST.
#pragma once

#include <caf/all.hpp>

namespace proctor {

using rpc_atom = caf::atom_constant<caf::atom("rpc")>;

}  // namespace proctor
