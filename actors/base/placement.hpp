// Placement by key (docs/cluster.md, "Placement by key"): which node of the cluster a root
// submitted with a key (or a nonce) runs on, whichever node was asked. A key's hash picks one
// of `slot_count` slots; a table maps each slot to one member. Pure and deterministic: every
// node computes the same table from the same members, so the slot's owner, and only it,
// accepts the key's submits, and a nonce is answered by one node in the cluster.
//
// The members are the nodes a node places on: itself and its peers, without those an
// operator forgot (cluster_view::node_names). Nodes compare theirs in their heartbeats, and
// keyed submits are refused while two nodes that are up disagree (executor_placement.cpp).
//
// Slots: 1024. A table gives each member exactly floor(1024/N) or that plus one slots, so the
// most loaded member holds at most 1.25 times the least while there are at least 4 slots a
// member (N <= 256; the full mesh of links holds to about 64 nodes, docs/cluster.md), and 1.0625
// times at 64 members. Each slot goes to the member it prefers most (rendezvous hashing) that
// has room left, so a member joining or leaving moves few slots besides its own share.
// The hash functions are part of the protocol: nodes of one cluster must agree on them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace proctor::placement {

inline constexpr uint32_t slot_count = 1024;

/// The slot of `key`: FNV-1a (64 bits) of its bytes, mixed (splitmix64's finalizer), modulo
/// slot_count.
uint32_t slot_of(std::string_view key);

/// A fingerprint of a member list (sorted, as tables take it): never 0.
uint64_t fingerprint(const std::vector<std::string>& members);

/// Slots to members.
class table {
public:
  /// `members`: the nodes placed on, sorted and without repeats (none: every slot unowned).
  explicit table(std::vector<std::string> members);

  /// The member owning `slot` ("" when there are no members).
  const std::string& owner(uint32_t slot) const;
  const std::string& owner_of(std::string_view key) const { return owner(slot_of(key)); }

  const std::vector<std::string>& members() const { return members_; }
  uint64_t fingerprint() const { return fingerprint_; }

  /// How many slots each member owns, in the order of members().
  std::vector<uint32_t> counts() const;

private:
  std::vector<std::string> members_;
  std::vector<uint16_t> owner_;  // per slot: an index into members_
  uint64_t fingerprint_ = 0;
};

}  // namespace proctor::placement
