// The replicas of one node (proctord --replica NAME --replicas ...; docs/replication.md):
// each replica's name, the address it serves clients and peers on (its --listen), and the
// port its Raft transport listens on, on the same host.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/wire/endpoint.hpp"

namespace proctor {

struct replica_member {
  std::string name;          ///< "b1": unique in the group
  uint64_t raft_id = 0;      ///< libraft's id: replica_raft_id(name)
  endpoint client;           ///< HOST:PORT it serves clients and peers on
  std::string raft_address;  ///< HOST:RAFT_PORT (libraft's TCP transport: IPv4 only)
};

/// libraft's id of the replica of this name: 64 bits of FNV-1a, never 0. Fixed by the name,
/// so every replica derives the same ids from the same list.
uint64_t replica_raft_id(std::string_view name);

/// Parses "NAME=HOST:PORT/RAFT_PORT" items separated by commas. False with a one-line reason
/// on a malformed item, a repeated name, address or Raft port, a host that is not an IPv4
/// address (libraft's transport takes no names), or fewer than one item.
bool parse_replica_group(std::string_view spec, std::vector<replica_member>* out,
                         std::string* error);

/// Parses one "NAME=HOST:PORT/RAFT_PORT" item (as parse_replica_group does each).
bool parse_replica(std::string_view item, replica_member* out, std::string* error);

/// "HOST:PORT" of the replica's client address.
std::string client_address(const replica_member& m);
/// The item parse_replica reads back: "NAME=HOST:PORT/RAFT_PORT". The group's Raft
/// configuration labels each member with it, so every replica learns a new one's name and
/// client address with the membership.
std::string replica_spec(const replica_member& m);
/// The items of `group`, comma-separated (what --replicas takes).
std::string replica_group_spec(const std::vector<replica_member>& group);
/// True if both hold the same replicas (names and addresses), in any order.
bool same_members(std::vector<replica_member> a, std::vector<replica_member> b);

/// The member named `name`, or null.
const replica_member* find_replica(const std::vector<replica_member>& group, std::string_view name);
/// The member whose libraft id is `raft_id`, or null.
const replica_member* find_replica(const std::vector<replica_member>& group, uint64_t raft_id);

}  // namespace proctor
