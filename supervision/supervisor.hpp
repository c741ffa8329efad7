// What a supervisor does when one of its children crashed (Erlang/OTP's supervisor): restart
// which children, after which back-off, or escalate because the restart intensity is
// exceeded. A pure decision over the policy, the crash history and the children in spawn
// order; the procedure actor (actors/procedure/proc_supervision.cpp) carries it out: it stops
// the children named, restarts them from the journal after the back-off, or escalates (a
// root fails its tree and rolls it back).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "supervision/restart_tracker.hpp"

namespace proctor {

/// One child of the supervisor as the decision sees it, in spawn order.
struct supervised_child {
  uint64_t id = 0;
  bool ended = false;  ///< ended children are never restarted
};

struct supervision_decision {
  /// False: past the restart intensity, the supervisor escalates (`reason` says why).
  bool restart = false;
  /// The children to stop and restart, in spawn order (the crashed one among them).
  std::vector<uint64_t> ids;
  std::chrono::milliseconds backoff{0};
  std::string reason;  ///< for an escalation: "child 7 crashed more than 3 times within ..."
};

/// The children the strategy restarts when `crashed` crashed: itself (one_for_one), every
/// unended child (one_for_all), or itself and the unended children spawned after it
/// (rest_for_one).
std::vector<uint64_t> children_to_restart(restart_strategy strategy, uint64_t crashed,
                                          const std::vector<supervised_child>& children);

/// Records the crash of child `crashed` at `now` in `tracker` (whose policy decides) and
/// decides: restart (the children, after the tracker's back-off) or escalate. `why` is the
/// crash's reason as rendered for people.
supervision_decision on_child_crash(restart_tracker& tracker,
                                    restart_tracker::clock::time_point now, uint64_t crashed,
                                    const std::vector<supervised_child>& children,
                                    const std::string& why);

}  // namespace proctor
