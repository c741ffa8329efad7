// proctord's flags checked together before anything is opened (docs/command-line.md): the
// combinations of --replica, --replicas, --join, --standby, --restore-from, --recover-group
// and --listen, and the peers that --peers, --peers-file and the cluster group's seeds name.
// run_node prints what is wrong and exits (64: the command line; 1: what it names cannot
// be read).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "actors/cluster/peer_transport.hpp"
#include "actors/node/node_flags.hpp"
#include "actors/node/replica_group.hpp"

namespace proctor {

/// Checks the flags that go together or exclude each other; fills `group` from --replicas
/// and, left empty, --listen from this replica's address there. "" when they go together;
/// else the line to print before exit 64.
std::string check_flag_combinations(node_flags& f, std::vector<replica_member>* group);

/// The peers this node talks to: --peers, the lines of --peers-file and, in a cluster
/// group, its seeds' members (`group_id_floor`: the group's id floor for this name). 0, or
/// the exit code (64: a flag is wrong; 1: the cluster group's state cannot be read) with
/// what to print in `err`.
int read_peers(const node_flags& f, std::map<std::string, peer_address>* peers,
               uint64_t* group_id_floor, std::string* err);

}  // namespace proctor
