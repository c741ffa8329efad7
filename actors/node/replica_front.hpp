// What clients and peers reach on a replica's --listen address (docs/replication.md): the
// client protocol's broker (actors/cluster/client_server.hpp) sends each request to this
// actor as (rpc_atom, std::string), as it would to the executor. Until the replica leads, the
// front answers every request NOT_LEADER, naming the leader (but `replicas`, which every
// replica answers; a membership change only the leader makes); once sent
// (front_lead_atom, executor) it hands every request to that executor. A replica never goes
// back: one that stops leading re-executes its process (replica_node.hpp).
#pragma once

#include <functional>
#include <string>

#include <caf/all.hpp>

#include <proctor/wire.pb.h>

namespace proctor {

using front_lead_atom = caf::atom_constant<caf::atom("frontlead")>;

/// Why this replica does not serve, and the leader's HOST:PORT ("" when none is known).
struct not_leader_answer {
  std::string error;
  std::string leader;
  std::string leader_http;  ///< the leader's --http HOST:PORT ("" when unknown or none)
};

struct front_answers {
  std::function<not_leader_answer()> why_not;
  /// The answer to a `replicas` request (any replica answers it, leading or not).
  std::function<pb::ReplicasInfo()> replicas;
  /// Prometheus text appended to a leader's answer to `metrics` (the group's gauges).
  std::function<std::string()> metrics;
  /// A leader's answer to `replicas add` / `remove`: blocks until the membership change
  /// ended (the store bounds it), so the front runs it on a detached actor of its own.
  std::function<pb::Response(const pb::ReplicasRequest&)> change;
};

caf::actor spawn_replica_front(caf::actor_system& sys, front_answers answers);

/// The serialized NOT_LEADER response to the serialized request `request` (its tag kept).
std::string not_leader_response(const std::string& request, const not_leader_answer& why);

}  // namespace proctor
