// Resource locks a procedure declares (HBase's procedure locks). Names are hierarchical,
// '/'-separated ("ns/table/region"): an exclusive lock on "ns" excludes every lock on "ns"
// and on anything under it; a lock on "ns/t" takes an intention on "ns", so it conflicts
// with an exclusive lock on "ns" but not with a shared one.
#pragma once

#include <string>
#include <vector>

namespace proctor {

struct resource_lock {
  std::string name;
  bool exclusive = true;

  static resource_lock shared(std::string n) { return {std::move(n), false}; }
  static resource_lock exclusive_on(std::string n) { return {std::move(n), true}; }
};

using lock_set = std::vector<resource_lock>;

}  // namespace proctor
