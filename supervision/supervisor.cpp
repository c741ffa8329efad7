#include "supervision/supervisor.hpp"

namespace proctor {

std::vector<uint64_t> children_to_restart(restart_strategy strategy, uint64_t crashed,
                                          const std::vector<supervised_child>& children) {
  std::vector<uint64_t> ids;
  switch (strategy) {
    case restart_strategy::one_for_one:
      ids.push_back(crashed);
      break;
    case restart_strategy::one_for_all:
      for (const auto& x : children)
        if (!x.ended)
          ids.push_back(x.id);
      break;
    case restart_strategy::rest_for_one: {
      bool after = false;
      for (const auto& x : children) {
        after = after || x.id == crashed;
        if (after && !x.ended)
          ids.push_back(x.id);
      }
      break;
    }
  }
  return ids;
}

supervision_decision on_child_crash(restart_tracker& tracker,
                                    restart_tracker::clock::time_point now, uint64_t crashed,
                                    const std::vector<supervised_child>& children,
                                    const std::string& why) {
  supervision_decision d;
  if (!tracker.record_crash(now)) {
    const auto& p = tracker.policy();
    d.reason = "child " + std::to_string(crashed) + " crashed more than "
               + std::to_string(p.max_restarts) + " times within "
               + std::to_string(p.period.count()) + " ms (last: " + why + ")";
    return d;
  }
  d.restart = true;
  d.backoff = tracker.backoff();
  d.ids = children_to_restart(tracker.policy().strategy, crashed, children);
  return d;
}

}  // namespace proctor
