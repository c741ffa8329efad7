// Internal: a root's part in its tree's failure and rollback (tree_rollback.cpp owns it; a
// parent's cancellation of children runs its plan with the same fields, proc_cancel.cpp).
// The other files read `failing` (the tree is failing: nothing new starts) and queue abort
// acknowledgements on `failure_acks`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/all.hpp>

#include "persistence/tree_image.hpp"

namespace proctor {

struct rollback_part {
  bool failing = false;              ///< the tree failed; stopping it, then rolling back
  int64_t failed_at_ms = 0;          ///< its Failed record's time
  bool busy_failure_record = false;  ///< the Failed record is not durable yet
  /// Aborts answered once the Failed record is durable (nothing is acknowledged before).
  std::vector<caf::typed_response_promise<bool>> failure_acks;
  bool past_no_return = false;
  std::string failure;
  std::vector<undo_item> plan;
  size_t plan_pos = 0;
  size_t undone_before = 0;     ///< undos done before this plan (an earlier incarnation's)
  int undo_attempt = 1;         ///< of the plan's current undo
  std::string undo_state_name;  ///< of the plan's current undo, for status and logs
  std::shared_ptr<const tree_image> image;  ///< the tree as the plan was made from it
  /// Fragments on other nodes ordered rolled back by this incarnation, and those that
  /// reported being rolled back before the plan got to them.
  std::unordered_set<uint64_t> remote_ordered;
  std::unordered_set<uint64_t> remote_rolled_back;
  /// Fragments of the rollback plan on a forgotten node whose end was asked for as lost.
  std::unordered_set<uint64_t> remote_lost_asked;
  /// Fragments whose end came FAILED during this rollback (lost with their node, or past a
  /// point of no return there), with the error: they stay FAILED in the tree's summary.
  std::unordered_map<uint64_t, std::string> remote_failed;
  /// The undo at plan_pos waits for a worker's task (context::dispatch_undo; undo_tasks.cpp):
  /// its key ("" when it does not) and the data its handler left.
  std::string task_key;
  std::string task_data;
  uint32_t task_data_version = 0;
  /// The last such task that failed for good: its UndoDispatched record is not waited for
  /// again (the handler runs again instead).
  std::string task_failed;
};

}  // namespace proctor
