#include "actors/node/node_cluster_options.hpp"

#include <arpa/inet.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "actors/base/peer_status.hpp"
#include "actors/node/node.hpp"
#include "actors/wire/endpoint.hpp"
#include "replication/raft_group.hpp"

namespace proctor {

void add_cluster_options(CLI::App& app, cluster_options* o) {
  app
    .add_option("--group-port", o->group_port,
                "Take part in the cluster group: its Raft port, on --listen's host (an IPv4 "
                "address)")
    ->check(CLI::Range(1, 65535));
  app.add_option("--seeds", o->seeds_text,
                 "With --group-port: join the cluster through any of these running nodes "
                 "(HOST:PORT,... their --listen addresses)");
  app
    .add_flag("--cluster-init", o->init,
              "With --group-port: found the cluster on this node (once, on one node; a "
              "founded cluster is left as it is)")
    ->configurable(false);  // a file copied to every node would found a cluster on each
}

std::string check_cluster_options(cluster_options* o, const std::string& name, bool replica,
                                  const std::string& listen_host) {
  const auto& text = o->seeds_text;
  for (size_t at = 0; at < text.size();) {
    auto end = text.find_first_of(", ", at);
    if (end == std::string::npos)
      end = text.size();
    if (end > at)
      o->seeds.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  for (const auto& seed : o->seeds)
    if (!parse_endpoint(seed))
      return "--seeds wants HOST:PORT,..., got '" + seed + "'";
  if (replica) {
    // No Raft member per replica: their logs come and go with failovers and lost disks, and
    // the group's votes need one stable log each (docs/cluster-group.md).
    if (o->group_port != 0)
      return "--group-port and --replica: a node run as replicas has no member of the "
             "cluster group's Raft; it takes part with --seeds alone, through the members "
             "(docs/cluster-group.md, \"A node run as replicas\")";
    if (o->init)
      return "--cluster-init and --replica: a node run as replicas cannot found the cluster "
             "(it has no member of the group's Raft): found it on a node started with "
             "--group-port, then start the replicas with --seeds";
    if (o->seeds.empty())
      return {};
    if (name.empty())
      return "--seeds needs --name (the node's name in the cluster)";
    o->follow = true;
    return {};
  }
  if (!o->enabled())
    return !o->seeds.empty() || o->init ? "--seeds and --cluster-init go with --group-port"
                                        : std::string{};
  if (name.empty())
    return "--group-port needs --name (the node's name in the cluster)";
  if (o->init && !o->seeds.empty())
    return "--cluster-init founds a cluster and --seeds joins one: give one of them";
  in_addr a{};
  if (inet_pton(AF_INET, listen_host.c_str(), &a) != 1 || a.s_addr == INADDR_ANY)
    return "--group-port needs --listen on an IPv4 address other nodes reach it at (not "
           + listen_host + ")";
  return {};
}

bool add_cluster_peers(const cluster_options& o, const std::string& data_dir,
                       const std::string& name, const tls_options& tls,
                       std::map<std::string, peer_address>* peers, uint64_t* id_floor,
                       std::string* error) {
  if (!o.enabled())
    return true;
  const auto file = cluster_peers_file(cluster_options::dir(data_dir));
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::map<std::string, peer_address> known;
  std::string err;
  if (in && !parse_peers(ss.str(), name, &known, &err))
    spdlog::warn("{}: ignored: {}", file, err);
  for (auto& [peer, addr] : known)
    peers->try_emplace(peer, std::move(addr));
  if (o.follow || o.seeds.empty() || !raft_state_is_fresh(cluster_options::dir(data_dir)))
    return true;
  seed_answer got;
  if (!ask_seeds(o.seeds, tls, name, std::chrono::seconds{30}, &got, &err)) {
    *error =
      "--seeds: no seed told the cluster's members within 30 s (" + err + "); nothing was started";
    return false;
  }
  *id_floor = got.id_floor;
  std::string text;
  for (const auto& [peer, addr] : got.members)
    if (peers->count(peer) == 0)
      text += peer + "=" + addr + "\n";
  if (!parse_peers(text, name, peers, &err)) {
    *error = "--seeds: a member's address: " + err;
    return false;
  }
  return true;
}

std::function<bool(uint64_t*, std::string*)>
floor_of_seeds(const cluster_options& o, const std::string& name, const tls_options& tls) {
  if (!o.follow)
    return {};
  return [seeds = o.seeds, name, tls](uint64_t* id_floor, std::string* error) {
    seed_answer got;
    std::string err;
    if (!ask_seeds(seeds, tls, name, std::chrono::seconds{30}, &got, &err)) {
      *error =
        "--seeds: no seed told where the ids of node " + name + " ended within 30 s (" + err + ")";
      return false;
    }
    *id_floor = got.id_floor;
    return true;
  };
}

cluster_member_setup member_setup(const cluster_options& o, const node& n,
                                  const std::string& data_dir, const std::string& client_address,
                                  const std::string& listen_host, const tls_options& tls) {
  cluster_member_setup cs;
  const auto env = n.env();
  cs.dir = cluster_options::dir(data_dir);
  cs.node_name = env->node_name;
  cs.incarnation = env->incarnation;
  cs.number = env->node_number;
  cs.client_address = client_address;
  cs.follow = o.follow;
  if (!o.follow)
    cs.group_address = listen_host + ":" + std::to_string(o.group_port);
  cs.seeds = o.seeds;
  cs.init = o.init;
  cs.tls = tls;
  cs.next_id = [env] { return env->next_id->load(); };
  cs.durable_lsn = [env] { return env->durable_lsn->load(); };
  cs.live = [env] { return env->cluster->local_live.load(); };
  cs.nonces_handed = [executor = n.executor()]() -> std::string {
    // The executor asks every active member at once (5 s each).
    caf::scoped_actor self{executor.home_system()};
    std::string why = "the node's executor did not answer whether its nonces were handed over";
    self->request(executor, std::chrono::seconds{10}, nonces_handed_atom::value)
      .receive([&](std::string& w) { why = std::move(w); }, [](caf::error&) {});
    return why;
  };
  cs.executor = n.executor();
  return cs;
}

}  // namespace proctor
