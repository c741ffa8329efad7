// How this node sees one peer (peer_status), as its peer link (actors/cluster/peer_link.hpp)
// reports it and the cluster view (cluster_view.hpp) keeps it. Protocol of a link's
// subscribers: (peer_subscribe_atom, caf::actor) -> every peer's status now, then
// (peer_status_atom, peer_status) at each change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

namespace proctor {

using peer_status_atom = caf::atom_constant<caf::atom("peerstat")>;
/// (peer_subscribe_atom, caf::actor): the subscriber gets every peer's status now and each
/// change later, as (peer_status_atom, peer_status).
using peer_subscribe_atom = caf::atom_constant<caf::atom("peersub")>;
/// (peer_expect_atom, std::map<std::string, uint64_t> incarnations, caf::actor journal) to
/// the transport, once the node recovered: each peer's incarnation as the journal knows it
/// (absent: not heard from yet), and the journal that records the first one heard. Until
/// then no link takes its peer for up (docs/cluster.md, "Incarnations").
using peer_expect_atom = caf::atom_constant<caf::atom("peerexp")>;
/// (peer_leaving_atom, uint32_t bound_ms) -> bool to the transport: this node stops in order;
/// tell every peer that is up (a ping with `leaving`), answered once all did or `bound_ms`
/// passed. (peer_left_atom, std::string name) to the transport: that peer said it leaves.
using peer_leaving_atom = caf::atom_constant<caf::atom("peerleav")>;
using peer_left_atom = caf::atom_constant<caf::atom("peerleft")>;
/// (peer_forget_atom, std::string name, uint64_t incarnation) to the transport: an operator
/// forgot that peer (journaled already): its link refuses that incarnation for good and
/// records the next other one it hears (docs/cluster.md, "Forgetting a node").
using peer_forget_atom = caf::atom_constant<caf::atom("peerfgt")>;
/// (peer_add_atom, std::string name, std::string address) to the transport: a node that joined
/// the cluster; a link to it from now on ("HOST:PORT", or "HOST:PORT|HOST:PORT" as --peers).
using peer_add_atom = caf::atom_constant<caf::atom("peeradd")>;

/// A member of the cluster as the cluster group says (actors/node/cluster_member.hpp).
struct cluster_peer {
  std::string name;
  uint16_t number = 0;
  std::string address;  ///< its client and peer HOST:PORT
  int state = 0;        ///< cluster.proto MemberState
  uint64_t incarnation = 0;
  int64_t since_ms = 0;  ///< when it entered that state (its proposer's clock)
  /// The group's log index of that change: the largest of the members' is the cluster's
  /// placement epoch (docs/cluster-group.md, "Nonces when slots move").
  uint64_t since_index = 0;
};
/// (cluster_peers_atom, std::vector<cluster_peer>) to the executor: every member of the
/// cluster group's state, this node among them: the executor adds the active and draining
/// ones it does not know as peers (cluster_view::add_peer) and links to them, places no new
/// work on those that are not active (cluster_view::set_placeable), and forgets those the
/// group forgot (executor_forget.cpp).
using cluster_peers_atom = caf::atom_constant<caf::atom("clpeers")>;
/// An operator's limits of one type as the cluster group holds them (cluster.proto
/// ClusterLimit): (cluster_limits_atom, std::vector<cluster_limit>) to the executor, every
/// type the group holds, whenever they change; each node journals and enforces them
/// (executor_limits.cpp).
struct cluster_limit {
  std::string type;
  uint32_t max_running = 0;
  uint32_t rate = 0;
  uint64_t per_ms = 0;
};
using cluster_limits_atom = caf::atom_constant<caf::atom("cllimits")>;
/// The cluster's schedules as the group holds them: (cluster_schedules_atom, std::string) to
/// the executor, the bytes of a cluster.proto ClusterState holding only its `schedules`,
/// whenever they change (a schedule's progress among them); sent before the members of the
/// same state, so that a node that becomes a schedule's owner knows how far it was decided
/// (executor_schedules_cluster.cpp).
using cluster_schedules_atom = caf::atom_constant<caf::atom("clsched")>;
/// (nonces_handed_atom) -> std::string to the executor of a draining node: "" once every
/// active member holds durably the nonces the node knows, else why not (`node remove` asks;
/// docs/cluster-group.md, "Nonces when slots move").
using nonces_handed_atom = caf::atom_constant<caf::atom("nhanded")>;

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
  /// A peer run as a replica group: its group as its leader last said (a serialized
  /// wire.proto ReplicasInfo), empty otherwise.
  std::string group;
  /// The peer's incarnation this node knows (journal.proto PeerIncarnation): 0 until it
  /// first answered. An answer from another incarnation makes the peer down.
  uint64_t incarnation = 0;
  /// From its last heartbeat answer (wire.proto NodeInfo): its next procedure id and its
  /// journal's last durable LSN; and what it heard of this node: the highest next id under any
  /// incarnation, and the highest LSN of incarnation `heard_incarnation` (docs/cluster.md,
  /// "Procedure ids" and "A journal restored from a copy"). `heard` once it answered.
  uint64_t next_id = 0;
  uint64_t journal_lsn = 0;
  uint64_t heard_next_id = 0;
  uint64_t heard_incarnation = 0;
  uint64_t heard_journal_lsn = 0;
  /// The incarnation of this node that the peer's operator forgot, and when (0: none).
  uint64_t heard_forgotten_incarnation = 0;
  int64_t heard_forgotten_at_ms = 0;
  bool heard = false;
  /// The nodes the peer places roots on by key (NodeInfo.members, sorted) as of its last
  /// answer: keyed submits wait for the nodes to agree (actors/base/placement.hpp).
  std::vector<std::string> members;
  /// The nodes the peer forgot (NodeInfo.forgotten) as of its last answer: this node forgets
  /// them too once they are down here (executor_forget.cpp).
  struct forgotten_node {
    std::string name;
    uint64_t incarnation = 0;
    int64_t at_ms = 0;
  };
  std::vector<forgotten_node> forgotten;
  /// Heartbeat answers from the peer's address that refused this node or named another node
  /// (a --peers mistake on one side), counted since the link started.
  uint64_t refusals = 0;
  /// Times the peer went down after being up, counted since the link started.
  uint64_t downs = 0;
  /// Answers the link could neither read nor match to a request (dropped; they fail no
  /// request at once and leave the peer up), counted since the link started.
  uint64_t stray_answers = 0;
  /// An operator forgot the peer (`node forget`): when (0: never), the journal record's LSN
  /// (fragments placed there before it are lost) and the incarnation forgotten. Kept by the
  /// cluster view, not by the link.
  int64_t forgotten_at_ms = 0;
  uint64_t forgotten_lsn = 0;
  uint64_t forgotten_incarnation = 0;

  /// "node b unreachable since 2026-11-25T06:40:12Z (no answer to heartbeats for 3 s)".
  std::string unreachable_text() const;
  /// The same without "node b ": "unreachable since ... (...)".
  std::string down_since_text() const;

  /// Forgotten, and not back as a new incarnation since: it takes no new work, and nothing
  /// asks it (a node started empty under the name after `node forget` is a new member).
  bool forgotten_now() const noexcept {
    return forgotten_at_ms != 0 && (incarnation == 0 || incarnation == forgotten_incarnation);
  }
};

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::peer_status)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<proctor::peer_status>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<proctor::cluster_peer>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<proctor::cluster_limit>)
