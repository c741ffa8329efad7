// Internal: the executor's part that keeps the ids of events sent with one (EventRequest's
// event_id; docs/concepts.md, "Events"), so that an event sent again is accepted once. Only
// executor_event_ids.cpp touches it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <caf/all.hpp>

namespace proctor::exec_detail {

struct event_id_entry {
  uint64_t lsn = 0;    ///< its EventIdSeen record (0: not durable yet)
  int64_t at_ms = 0;   ///< when the event was accepted (it expires with the events' TTL)
  std::string answer;  ///< the first one's answer ("" until it was given, or after a restart)
  /// The same event sent again before the first was durable: answered with it.
  std::vector<caf::typed_response_promise<std::string>> waiting;
};

struct event_ids_part {
  /// By (key, id).
  std::map<std::pair<std::string, std::string>, event_id_entry> seen;
  bool sweep_armed = false;  ///< an event_id_sweep_atom is on its way
};

}  // namespace proctor::exec_detail
