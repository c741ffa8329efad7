// The JSON of the cluster group's view (`proctor cluster nodes --json`, and the HTTP API):
// one line, keys always in the order shown. Times as in views_json.hpp; incarnations and Raft
// ids as 16 hex digits (as the logs and `proctor nodes` write them).
#pragma once

#include <cstdint>
#include <string>

#include <proctor/wire.pb.h>

#include "actors/wire/incarnation_hex.hpp"  // as the JSON writes them

namespace proctor {

/// {"node":"a","role":"leader","cluster_id":"…","slot_count":1024,"version":7,
///  "leader":"a","applied_index":12,
///  "members":[{"name":"a","number":97,"state":"active","incarnation":"…","client_address":
///    "127.0.0.1:7001","peer_address":"…","group_address":"127.0.0.1:7101","group_role":
///    "voter","id_floor":0,"journal_lsn":0,"since":"…","since_index":3}, …],
///  "group":[{"id":"…","name":"a","address":"127.0.0.1:7101","role":"voter","heard":true,
///    "match_index":12}, …]}
/// `role`: this node's member of the group ("none": it is in no cluster); `group_role`:
/// "leader", "voter", "standby", or "" when the member is not in the group's configuration.
std::string cluster_to_json(const pb::ClusterInfo& ci);

/// "joining", "active", "draining", "left", "forgotten".
std::string member_state_text(pb::MemberState s);

}  // namespace proctor
