#include "actors/wire/json/cluster_json.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "actors/wire/json/json_writer.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

std::string member_state_text(pb::MemberState s) {
  auto name = pb::MemberState_IsValid(s) ? pb::MemberState_Name(s) : std::string("unknown");
  for (auto& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

std::string cluster_to_json(const pb::ClusterInfo& ci) {
  const auto& st = ci.state();
  std::map<uint64_t, std::string> group_role;
  auto group = ordered_json::array();
  for (const auto& g : ci.group()) {
    group_role[g.id()] = g.id() == ci.leader_id() ? "leader" : g.role();
    group.push_back(ordered_json{{"id", incarnation_hex(g.id())},
                                 {"name", g.name()},
                                 {"address", g.address()},
                                 {"role", g.role()},
                                 {"heard", g.heard()},
                                 {"match_index", g.match_index()}});
  }
  auto members = ordered_json::array();
  for (const auto& m : st.members()) {
    auto r = group_role.find(m.incarnation());
    members.push_back(ordered_json{
      {"name", m.name()},
      {"number", m.number()},
      {"state", member_state_text(m.state())},
      {"incarnation", incarnation_hex(m.incarnation())},
      {"client_address", m.client_address()},
      {"peer_address", m.peer_address()},
      {"group_address", m.group_address()},
      {"group_role", r == group_role.end() ? std::string{} : r->second},
      {"id_floor", m.id_floor()},
      {"journal_lsn", m.journal_lsn()},
      {"feature_level", std::max(1u, m.feature_level())},
      {"since", m.since_ms() <= 0 ? ordered_json(nullptr) : ordered_json(utc_text(m.since_ms()))},
      {"since_index", m.since_index()}});
  }
  std::string leader;
  ordered_json j{{"node", ci.node()},
                 {"role", ci.role()},
                 {"cluster_id", st.cluster_id()},
                 {"slot_count", st.slot_count()},
                 {"version", st.version()},
                 {"feature_level", st.cluster_id().empty() ? 0u : std::max(1u, st.feature_level())},
                 {"leader", ci.leader_node()},
                 {"applied_index", ci.applied_index()},
                 {"stopped_applying", ci.stopped_applying()},
                 {"members", std::move(members)},
                 {"group", std::move(group)}};
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace proctor
