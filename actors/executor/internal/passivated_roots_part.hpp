// Internal: the executor's passivated roots (executor_passivation.cpp owns this part): how many,
// which wait on which node, and how many procedures are due in each second (wake_lead_ms).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace proctor::exec_detail {

struct passivated_roots_part {
  size_t roots = 0;  ///< passivated roots
  /// Passivated trees by the nodes their remote children run on: woken when one changes.
  std::unordered_map<std::string, std::unordered_set<uint64_t>> by_node;
  /// Procedures of the passivated trees by the second of their earliest deadline (how early
  /// a tree is read back: wake_lead_ms).
  std::map<int64_t, uint64_t> wake_volume;
};

}  // namespace proctor::exec_detail
