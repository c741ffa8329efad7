// proctord's options of the cluster group (docs/cluster-group.md) as run_node reads them:
// --group-port, --seeds and --cluster-init, checked against the rest of the command line, and
// turned into the peers the node knows at its start and the setup of its member of the group.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/cluster/peer_transport.hpp"
#include "actors/node/cluster_member.hpp"
#include "tls/tls_options.hpp"

namespace proctor {

class node;

struct cluster_options {
  uint16_t group_port = 0;  ///< 0: no member of the group's Raft (none at all, or `follow`)
  std::string seeds_text;
  bool init = false;
  std::vector<std::string> seeds;  ///< from seeds_text, by check_cluster_options

  /// Set by check_cluster_options for a node run as replicas given --seeds: it takes part
  /// with no Raft member of its own (cluster_follower.hpp).
  bool follow = false;

  bool enabled() const noexcept { return group_port != 0 || follow; }
  /// DATA/cluster-group: the member's directory.
  static std::string dir(const std::string& data_dir) { return data_dir + "/cluster-group"; }
};

void add_cluster_options(CLI::App& app, cluster_options* o);

/// Splits the seeds and checks that the options go with the rest of the command line (a
/// name; --listen on an IPv4 address others reach; with --replica, --seeds alone, which sets
/// `follow`). "" when they do; else the one line to print before exit 64.
std::string check_cluster_options(cluster_options* o, const std::string& name, bool replica,
                                  const std::string& listen_host);

/// Adds to `peers` (--peers win for a name in both) the members the cluster group named last
/// (DIR/peers) and, for a member that joins now, the active members a seed names: a journal
/// that is new then learns from them where its name's ids ended before it hands one out;
/// `id_floor` gets the group's floor for the name (node_options::id_floor). False with a
/// one-line `error` when no seed answered within 30 s. A node that follows the group asks
/// the seeds only if its journal is new, once it leads (floor_of_seeds).
bool add_cluster_peers(const cluster_options& o, const std::string& data_dir,
                       const std::string& name, const tls_options& tls,
                       std::map<std::string, peer_address>* peers, uint64_t* id_floor,
                       std::string* error);

/// For a node that follows the group (o.follow; else empty), node_options::ask_id_floor: the
/// group's id floor for `name` from the first seed that answers within 30 s.
std::function<bool(uint64_t* id_floor, std::string* error)>
floor_of_seeds(const cluster_options& o, const std::string& name, const tls_options& tls);

/// The setup of node `n`'s member (it serves clients at `client_address`).
cluster_member_setup member_setup(const cluster_options& o, const node& n,
                                  const std::string& data_dir, const std::string& client_address,
                                  const std::string& listen_host, const tls_options& tls);

}  // namespace proctor
