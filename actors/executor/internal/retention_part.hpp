// Internal: how long an ended tree's result and history are kept (executor_retention.cpp owns
// this part): the expiries of results, and the ended trees whose whole history is kept within
// executor_config::history_keep_records.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace proctor::exec_detail {

/// A finished tree whose result expires at `at`.
struct expiry {
  std::chrono::steady_clock::time_point at;
  uint64_t root_id = 0;
  bool operator>(const expiry& o) const { return at > o.at; }
};

struct retention_part {
  /// Finished trees by expiry, soonest first, under one timer (a delayed message per tree
  /// would cost the actor clock's lock, a wake-up of its thread and an entry each).
  std::priority_queue<expiry, std::vector<expiry>, std::greater<>> expiries;
  uint64_t expiry_token = 0;  ///< of the armed timer; older timers are ignored
  std::chrono::steady_clock::time_point expiry_armed_for =
    std::chrono::steady_clock::time_point::max();
  /// Finished trees whose records (but the summary, kept here as written) are still in the
  /// journal: collect_finished deletes them and writes the summaries again.
  std::unordered_map<uint64_t, std::string> collectable;
  /// Ended trees that keep their whole history (executor_config::history_keep_records), in
  /// the order they ended: each root's summary is collected when the budget is exceeded, the
  /// oldest first. `history_kept` holds the latest end of each (an end after another one,
  /// of a fragment rolled back by order, replaces it); a queue entry of an older end is
  /// passed over.
  struct kept_history {
    std::string summary;
    uint64_t records = 0;
    uint64_t seq = 0;
  };
  std::unordered_map<uint64_t, kept_history> history_kept;
  std::deque<std::pair<uint64_t, uint64_t>> history_order;  ///< (root, seq), oldest first
  uint64_t history_kept_records = 0;
  uint64_t history_seq = 0;
  bool collect_armed = false;
};

}  // namespace proctor::exec_detail
