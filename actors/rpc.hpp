// The node's wire entry point. A node publishes its executor on its listen address; a
// client (the proctor CLI, another node) sends
//     (rpc_atom, std::string request)   request  = a serialized pb::Request (wire.proto)
// and receives one std::string, a serialized pb::Response. Only atoms and strings cross the
// wire, so no CAF type registration can disagree between nodes; malformed bytes are
// answered with BAD_REQUEST.
#pragma once

#include <caf/all.hpp>

namespace proctor {

using rpc_atom = caf::atom_constant<caf::atom("rpc")>;

} // namespace proctor
