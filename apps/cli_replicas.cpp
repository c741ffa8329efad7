// `proctor replicas`: a replica group as the replica that answered sees it; `replicas add` and
// `replicas remove` print what the leader did, then the group (docs/replication.md).
#include <cstdio>
#include <iostream>
#include <string>

#include "apps/cli_operators.hpp"
#include "procedures/proto_json.hpp"

namespace proctor::cli {

/// `proctor replicas`: the group as the replica that answered sees it.
void print_replicas(const pb::ReplicasInfo& info, bool json) {
  if (json) {
    std::cout << message_to_json(info, {.all_fields = true}) << '\n';
    return;
  }
  bool from_leader = false;
  for (const auto& r : info.replicas())
    from_leader |= r.self() && r.role() == "leader";
  std::cout << "node " << info.node() << ": term " << info.term() << ", commit index "
            << info.commit_index() << ", leader "
            << (info.leader().empty() ? "(none: an election is under way)" : info.leader()) << '\n';
  std::printf("%-12s %-22s %-22s %-22s %-6s %10s %8s\n", "REPLICA", "ADDRESS", "RAFT ADDRESS",
              "ROLE", "VOTER", "STORED", "LAG");
  for (const auto& r : info.replicas()) {
    std::string role = r.role().empty() ? "-" : r.role();
    if (from_leader && !r.self() && !r.reachable())
      role += " (unreachable)";
    std::string stored = from_leader ? std::to_string(r.match_index()) : "-";
    std::string lag = from_leader ? std::to_string(r.lag()) : "-";
    std::printf("%-12s %-22s %-22s %-22s %-6s %10s %8s\n",
                (r.name() + (r.self() ? "*" : "")).c_str(), r.address().c_str(),
                r.raft_address().c_str(), role.c_str(), r.voter() ? "yes" : "no", stored.c_str(),
                lag.c_str());
  }
  if (!from_leader)
    std::cout << "(asked a replica that does not lead: only the leader knows each one's "
                 "progress)\n";
  std::fflush(stdout);
}

}  // namespace proctor::cli
