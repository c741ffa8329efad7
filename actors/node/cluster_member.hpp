// A node's member of the cluster group (docs/cluster-group.md): it opens the node's member
// of the group in DATA/cluster-group once the node serves clients (under the node's
// incarnation as Raft id and its name as label), founds the cluster (--cluster-init or
// `proctor cluster init`) or joins it through a seed (--seeds), runs the cluster_keeper (which
// acts on the group's leader only), and serves the client protocol's ClusterRequest from an
// actor (node_env::cluster_member).
//
// Joining: the node opens its member as a joiner (a member of no group, waiting to be added)
// and sends a JoinCluster command to a seed's client port. The seed's member proposes it if
// it leads, and otherwise hands the request on, once, to the leader's node (the member whose
// incarnation is the Raft leader's id, at its client address), or answers NOT_LEADER naming
// it; the joiner tries again (another seed, the named leader) until the group decides. The
// keeper on the leader then adds the node to the Raft group and makes it active once it caught
// up. A join the group refuses (an incarnation that was forgotten, a name another incarnation
// holds) is final: `on_refused` is told why, and the node stops.
//
// While it takes part, the node reports how far its ids and journal went (RaiseIdFloor): the
// group's floor for its name, which a later incarnation begins above (node_options::id_floor).
//
// The members that take part become the node's peers (links, heartbeats, placement): the
// executor is told of each change, and DIR/peers keeps the last list for the next start.
//
// Threading: each request is served by a detached actor of its own (a proposal blocks up to
// the group's write timeout, a request handed on up to its reply timeout, and a request handed
// on may come back here, so they must not wait for each other); the joiner is a thread of its
// own. Every wait is bounded, and closing (the destructor) stops the joiner and ends the
// waits of the requests under way.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "tls/tls_in_use.hpp"
#include "tls/tls_options.hpp"

namespace proctor {

/// The file in a member's directory that keeps the peers the group last named.
std::string cluster_peers_file(const std::string& dir);

/// What a node that joins with a new journal learns from a seed before it starts.
struct seed_answer {
  /// The active and draining members but itself (name -> client HOST:PORT): it links to
  /// them from its start, so that it learns from them where its name's ids ended
  /// (docs/cluster.md, "Procedure ids") before it hands one out.
  std::map<std::string, std::string> members;
  /// The group's id floor for its name (0: none): its ids begin above it.
  uint64_t id_floor = 0;
};

/// Asks `seeds` in turn (`cluster nodes`) until one answers with a founded cluster or
/// `bound` passes; false with the last reason then.
bool ask_seeds(const std::vector<std::string>& seeds, const tls_options& tls,
               const std::string& self, std::chrono::milliseconds bound, seed_answer* out,
               std::string* error);

struct cluster_member_setup {
  std::string dir;  ///< the member's directory: DATA/cluster-group
  std::string node_name;
  uint64_t incarnation = 0;  ///< the node's: its member's Raft id
  uint16_t number = 0;       ///< the number the node's ids carry
  /// The HOST:PORT clients and peers reach the node at (its --listen, port resolved).
  std::string client_address;
  /// The HOST:PORT of its member of the group (an IPv4 address: libraft's TCP transport).
  std::string group_address;
  /// Running nodes' client addresses (HOST:PORT) to send the join to (--seeds).
  std::vector<std::string> seeds;
  bool init = false;  ///< --cluster-init: found the cluster on this node if not founded yet
  tls_options tls;    ///< the node's: on the group's port, and to seeds and leaders
  /// Where a reload (SIGHUP) puts the node's new TLS context for the group's port (null: none).
  std::shared_ptr<tls_context_slot> tls_reload;
  /// A node run as replicas (docs/cluster-group.md, "A node run as replicas"): it has no
  /// member of the group's Raft (group_address is ""), joins through the seeds and follows
  /// the group's state by asking its members (cluster_follower.hpp).
  bool follow = false;
  /// Where its peers reach the node, when not only at client_address: every replica's client
  /// address, "HOST:PORT|HOST:PORT" (its ClusterMember.peer_address, as a --peers entry).
  std::function<std::string()> peer_address;
  unsigned election_timeout_ms = 1000;
  std::chrono::milliseconds keeper_period{250};
  /// How far the node's ids and journal went: reported to the group (RaiseIdFloor) every
  /// 2^16 ids or 10 s when they moved, so that a later incarnation of the name begins above.
  std::function<uint64_t()> next_id;
  std::function<uint64_t()> durable_lsn;
  /// The procedures the node holds that have not ended: `node remove` waits for none.
  std::function<uint64_t()> live;
  /// "" once every active member holds this draining node's nonces (docs/cluster-group.md,
  /// "Nonces when slots move"), else why not: `node remove` waits for it too.
  std::function<std::string()> nonces_handed;
  /// Told of the members that take part (active or draining) whenever they change, as
  /// (cluster_peers_atom, std::vector<cluster_peer>): the node's executor, which links to
  /// those it does not know. They are also written to DIR/peers (NAME=HOST:PORT lines, as a
  /// --peers-file), which the node reads at its next start: its peers before the group
  /// speaks.
  caf::actor executor;
  /// Called once, from the joiner's thread, when the group refused this node for good (the
  /// reason, for the operator): the node should stop.
  std::function<void(const std::string& why)> on_refused;
};

class cluster_member {
public:
  /// Spawns the actor, which answers that the node is starting until start().
  explicit cluster_member(caf::actor_system& sys);
  ~cluster_member();
  cluster_member(const cluster_member&) = delete;
  cluster_member& operator=(const cluster_member&) = delete;

  /// Serves ClusterRequest: (rpc_atom, bytes of a pb::Request) -> bytes of a pb::Response.
  caf::actor actor() const { return actor_; }

  /// Call once, once the node serves clients, with what it is. Opens the member if its directory holds Raft state,
  /// or to found (`init`) or join (`seeds`) the cluster; without any of them it stays closed
  /// until `proctor cluster init`. False with a one-line `error` when it cannot open, or
  /// cannot found a cluster (the group refused, no leadership within the bound).
  bool start(cluster_member_setup setup, std::string* error);

  struct core;  // shared with the actor and the joiner (cluster_member.cpp)

private:
  std::shared_ptr<core> core_;
  caf::actor actor_;
};

}  // namespace proctor
