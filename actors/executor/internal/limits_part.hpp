// Internal: the executor's per-type limits as an operator set them (executor_limits.cpp owns
// this part; the step scheduler enforces them).
#pragma once

#include <deque>
#include <map>
#include <string>
#include <utility>

#include <proctor/wire.pb.h>

#include "actors/executor/internal/executor_types.hpp"
#include "persistence/journal.hpp"

namespace proctor::exec_detail {

struct limits_part {
  std::map<std::string, recovered_limit> records;  ///< an operator's, by type
  /// Changes of limits, journaled one at a time in the order they came (a change sets some
  /// fields over what is in force: two at once would each miss the other's).
  struct change {
    pb::LimitsRequest req;
    promise_t rp;  ///< answered with the list once applied (none: the cluster group's)
    /// As the cluster group holds it, applied here (not proposed to the group again).
    bool from_cluster = false;
  };
  std::deque<change> changes;
  bool change_busy = false;
};

}  // namespace proctor::exec_detail
