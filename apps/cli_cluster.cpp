// `proctor cluster nodes` and `proctor cluster init` (docs/cluster-group.md): the cluster's
// members as the node asked knows them from its member of the cluster group, and the founding.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "actors/wire/json/cluster_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

namespace {

void print_cluster(const pb::ClusterInfo& ci) {
  const auto& st = ci.state();
  if (ci.role() == "none") {
    std::cout << "node " << ci.node()
              << " is a member of no cluster: found one with `proctor cluster init`, or "
                 "start it with --seeds to join one\n";
    return;
  }
  if (st.cluster_id().empty()) {
    std::cout << "node " << ci.node() << ": the cluster is not founded yet as its member of the "
              << "group knows it (" << ci.role() << ")\n";
    return;
  }
  std::cout << "cluster " << st.cluster_id() << ": " << st.members_size() << " member(s), "
            << st.slot_count() << " slots, version " << st.version() << ", feature level "
            << std::max(1u, st.feature_level()) << "; group leader "
            << (ci.leader_node().empty() ? std::string{"(none known)"} : ci.leader_node())
            << "; asked " << ci.node() << " (" << ci.role() << ", applied index "
            << ci.applied_index() << ")\n";
  if (!ci.stopped_applying().empty())
    std::cout << "warning: " << ci.node() << "'s member stopped applying the group's log at index "
              << ci.applied_index() << " (what follows is as of then): " << ci.stopped_applying()
              << "\n";
  std::map<uint64_t, const pb::ClusterGroupMember*> in_group;
  for (const auto& g : ci.group())
    in_group[g.id()] = &g;
  std::printf("%-14s %6s %-9s %-16s %-22s %-22s %-8s %14s\n", "NODE", "NUMBER", "STATE",
              "INCARNATION", "ADDRESS", "GROUP ADDRESS", "GROUP", "SINCE");
  for (const auto& m : st.members()) {
    auto g = in_group.find(m.incarnation());
    std::string role = g == in_group.end() ? "-" : g->second->role();
    if (m.incarnation() == ci.leader_id())
      role = "leader";
    std::printf("%-14s %6u %-9s %-16s %-22s %-22s %-8s %14s\n",
                (m.name() + (m.name() == ci.node() ? "*" : "")).c_str(), m.number(),
                member_state_text(m.state()).c_str(), incarnation_hex(m.incarnation()).c_str(),
                m.client_address().c_str(),
                m.group_address().empty() ? "-" : m.group_address().c_str(), role.c_str(),
                utc_text(m.since_ms()).substr(11, 8).c_str());
  }
  std::fflush(stdout);
}

}  // namespace

void add_cluster_command(CLI::App& app, runner* run) {
  auto* cluster = app.add_subcommand(
    "cluster", "The cluster group: its members, and its founding (docs/cluster-group.md)");
  cluster->require_subcommand(1);
  auto json = std::make_shared<bool>(false);

  auto* nodes = cluster->add_subcommand(
    "nodes", "The cluster's members as the node asked knows them from the cluster group");
  nodes->add_flag("--json", *json, "The cluster group's view as one JSON object");
  nodes->callback([json, run] {
    *run = [json](const caller& call) {
      pb::Request req;
      req.mutable_cluster()->set_op(pb::ClusterRequest::SHOW);
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      const auto& ci = std::get<pb::Response>(got).cluster();
      if (*json)
        std::cout << cluster_to_json(ci) << '\n';
      else
        print_cluster(ci);
      return exit_ok;
    };
  });

  // `node drain` and `node remove`, beside `node forget` (apps/proctor.cpp).
  auto* node_cmd = app.get_subcommand("node");
  auto name = std::make_shared<std::string>();
  auto cancel = std::make_shared<bool>(false);
  auto propose = [](pb::ClusterCommand command) {
    return [command](const caller& call) {
      pb::Request req;
      req.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
      *req.mutable_cluster()->mutable_command() = command;
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      std::cout << std::get<pb::Response>(got).text() << '\n';
      return exit_ok;
    };
  };
  auto* drain = node_cmd->add_subcommand(
    "drain", "Place no new work on a member of the cluster group: its trees run to their end "
             "(docs/cluster-group.md); --cancel makes it active again");
  drain->add_option("name", *name, "The member's name")->required();
  drain->add_flag("--cancel", *cancel, "Cancel the drain: the member takes new work again");
  drain->callback([name, cancel, run, propose] {
    pb::ClusterCommand c;
    if (*cancel)
      c.mutable_activate()->set_name(*name);
    else
      c.mutable_drain()->set_name(*name);
    *run = propose(std::move(c));
  });
  auto* remove = node_cmd->add_subcommand(
    "remove", "Take a drained member out of the cluster once it holds nothing unfinished "
              "(refused, naming what it holds, until then); it may be stopped after");
  remove->add_option("name", *name, "The member's name")->required();
  remove->callback([name, run, propose] {
    pb::ClusterCommand c;
    c.mutable_remove()->set_name(*name);
    *run = propose(std::move(c));
  });

  auto* init = cluster->add_subcommand(
    "init", "Found the cluster on the node asked (once, on one node: the others join it "
            "with --seeds); refused on a node that is a member of a cluster or joining one");
  init->callback([run] {
    *run = [](const caller& call) {
      pb::Request req;
      req.mutable_cluster()->set_op(pb::ClusterRequest::INIT);
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      std::cout << std::get<pb::Response>(got).text() << '\n';
      return exit_ok;
    };
  });
}

}  // namespace proctor::cli
