// proctord's flags checked together before anything is opened (node_flags_check.hpp).
#include "actors/node/node_flags_check.hpp"

#include <fstream>
#include <sstream>

#include "actors/node/node_cluster_options.hpp"
#include "actors/wire/endpoint.hpp"

namespace proctor {

namespace {

/// --replica and --replicas: this replica is one of the group, named, with no standby, and
/// its --listen (or none) is its address in the group.
std::string check_replica_flags(node_flags& f, std::vector<replica_member>* group) {
  if (f.replica.empty() || f.replicas_text.empty())
    return "--replica and --replicas go together";
  std::string err;
  if (!parse_replica_group(f.replicas_text, group, &err))
    return "--replicas: " + err;
  const auto* me = find_replica(*group, f.replica);
  if (me == nullptr)
    return "--replica " + f.replica + " is not one of --replicas";
  if (f.name.empty())
    return "--replica needs --name (the node the replicas are)";
  if (f.standby)
    return "--standby and --replica do not go together (a replica group needs no standby: any "
           "replica takes over)";
  auto own = me->client.host + ":" + std::to_string(me->client.port);
  if (f.listen.empty())
    f.listen = own;
  else if (auto ep = parse_endpoint(f.listen, false);
           ep && ep->host + ":" + std::to_string(ep->port) != own)
    return "--listen " + f.listen + " is not replica " + f.replica + "'s address in --replicas ("
           + own + ")";
  return {};
}

}  // namespace

std::string check_flag_combinations(node_flags& f, std::vector<replica_member>* group) {
  if (!f.replica.empty() || !f.replicas_text.empty())
    if (auto why = check_replica_flags(f, group); !why.empty())
      return why;
  if (f.join && group->empty())
    return "--join goes with --replica and --replicas";
  if (!f.restore_from.empty() && f.standby)
    return "--restore-from starts the active process (not --standby): restore it, then start "
           "the standby (docs/operations.md, \"Backups\")";
  if (!f.restore_from.empty() && !group->empty()
      && (group->size() != 1 || f.join || f.recover_group))
    return "--restore-from with --replica founds a group of one: --replicas names replica "
           + f.replica
           + " alone, without --join or --recover-group; add the others afterwards "
             "(`proctor replicas add`, docs/operations.md, \"Backups\")";
  if (f.recover_group && (group->empty() || f.join))
    return "--recover-group goes with --replica and --replicas, not --join";
  if (f.listen.empty())
    return "--listen is required (HOST:PORT; with --replica it may be left to --replicas)";
  return {};
}

int read_peers(const node_flags& f, std::map<std::string, peer_address>* peers,
               uint64_t* group_id_floor, std::string* err) {
  std::string text = f.peers_text;
  if (!f.peers_file.empty()) {
    std::ifstream in(f.peers_file);
    if (!in) {
      *err = "cannot read --peers-file " + f.peers_file;
      return 64;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text += "\n" + ss.str();
  }
  if (!parse_peers(text, f.name, peers, err)) {
    *err = "--peers: " + *err;
    return 64;
  }
  if (!add_cluster_peers(f.cluster, f.data_dir, f.name, f.tls, peers, group_id_floor, err))
    return 1;
  if (!peers->empty() && f.name.empty()) {
    // A data directory named before knows its name; one never named cannot have peers.
    std::ifstream node_file(f.data_dir + "/NODE");
    if (!node_file) {
      *err = "--peers needs --name (this node's name among them)";
      return 64;
    }
  }
  return 0;
}

}  // namespace proctor
