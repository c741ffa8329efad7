// Internal: the executor's take-over of the trees read back at start (executor_recovery.cpp
// owns this part; the other files look at `active`: while it is set nothing runs, writes or
// wakes, and what would is kept here).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "persistence/tree_image.hpp"

namespace proctor::exec_detail {

struct recovery_part {
  /// Taking over the trees read back from the journal, possibly while the scan still runs
  /// (docs/concepts.md, "Recovery"): the journal does not exist yet, nor are the procedure ids
  /// known that the node has handed out. Nothing may run, write or wake until the take-over
  /// ends; what would is kept here and done then (recover_end).
  bool active = false;
  struct recovery_tally {
    size_t running = 0, rolling = 0, done = 0, quarantined = 0, passivated = 0, events = 0;
    std::chrono::steady_clock::time_point since;
  } tally;
  std::vector<std::pair<std::shared_ptr<const tree_image>, bool>> to_start;  ///< (image, rollback)
  struct tree_wake_arm {
    uint64_t root_id = 0;
    int64_t deadline_ms = 0;
    uint64_t token = 0;
  };
  std::vector<tree_wake_arm> to_arm;  ///< passivated trees' earliest deadlines
  std::vector<uint64_t> to_wake;      ///< passivated trees woken (an event kept while down)
  /// The procedures read back waiting for the key of an event read back (by key: the
  /// Suspended record of the wait, the procedure), and the events the trees read back say
  /// were consumed: recover_end hands the events out as they were before the restart.
  std::unordered_map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> waiters;
  std::unordered_set<uint64_t> consumed;
};

}  // namespace proctor::exec_detail
