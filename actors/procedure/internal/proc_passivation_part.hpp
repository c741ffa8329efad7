// Internal: a procedure actor's part in passivation (docs/concepts.md, "Passivation"): a
// root's attempts to passivate its tree (proc_passivate_tree.cpp), a waiter's offer to its
// parent to give up its actor (proc_passivate_waiter.cpp), and a parent's passivated
// children (proc_passivated_children.cpp). Those three files own it; the others read
// `holding` and `offered` (whether a wake-up must be held) and queue on `on_decided`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "actors/base/messages.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

struct passivation_part {
  // -- a root's attempts ------------------------------------------------------------------------
  /// Root: trying to passivate its tree (asking it, then the executor); no answer yet.
  bool attempting = false;
  bool armed = false;    ///< root: its passivate_after deadline is armed
  uint64_t token = 0;    ///< root: of the armed passivate_after deadline
  int failures = 0;      ///< root: attempts that found its tree not only waiting
  bool hinted = false;   ///< root: a procedure began to wait during an attempt
  uint64_t attempt = 0;  ///< root: the attempt under way (or the last)
  /// Root: no attempt before this (wall ms): the last one found deadlines due before it,
  /// or took long.
  int64_t not_before = 0;
  int64_t started_ms = 0;  ///< root: when the attempt under way began
  /// Root: when its tree was last seen active (a procedure began to wait, a child ended).
  int64_t tree_active_ms = 0;
  /// Run with the executor's answer (agreed or not) to the passivation asked for: an
  /// operator's bypass that arrived meanwhile waits for it.
  std::vector<std::function<void(bool agreed)>> on_decided;

  // -- every procedure of a tree being asked -------------------------------------------------
  /// Its tree is asked to passivate and it said it only waits: what would wake it is held
  /// in `held` (run on resume; lost with the actor if the executor agrees, which it does only
  /// when nothing it routes reached the tree, while the earliest deadline wakes the tree).
  bool holding = false;
  std::vector<std::function<void()>> held;
  /// Its subtree's answer being gathered (proc_passivate_tree.cpp). Children are asked with a
  /// tagged message and answer with one, not a request each: CAF 0.17 keeps an actor's
  /// pending requests in a vector searched and erased linearly, so a parent of 10,000
  /// children spent O(n^2) per attempt (most of proctor-bench (j)'s time, perf).
  struct query_state {
    uint64_t tag = 0;
    std::unordered_set<uint64_t> asked;  ///< children that have not answered
    passivation_answer acc;
    std::function<void(passivation_answer)> done;
  };
  std::unique_ptr<query_state> query;
  uint64_t query_tag = 0;  ///< of the last query this procedure sent its children

  // -- a waiter giving up its actor while its tree runs ------------------------------------
  /// This procedure offered its parent to give up its actor: what wakes it is held until
  /// the answer (proc_passivate_waiter.cpp).
  bool offered = false;
  /// A parent resumed while its children were still giving up their actors: it offers to
  /// give up its own once the last of them did (proc_passivate_waiter.cpp).
  bool wanted = false;

  // -- a parent's passivated children (proc_passivated_children.cpp) -------------------------
  /// The image passivated children are spawned from, while any is left.
  std::shared_ptr<const tree_image> image;
  size_t passivated_children = 0;
  /// Waiters inside the subtree of a passivated child, mapped to that child: the executor's
  /// wake-up for one of them (wake_child_atom) spawns the child, which passivates its own
  /// children again and so gets the wake-up sent again.
  std::unordered_map<uint64_t, uint64_t> routes;
  /// Wake-ups of passivated children that came while max_live_children of its children had
  /// actors, oldest first from wakes_head: each spawns its child when one of those goes
  /// down (on_wake_child, wake_queued).
  std::vector<uint64_t> wakes_due;
  size_t wakes_head = 0;
  /// The wake-ups of passivated children (wall ms, child id), earliest on top. The timeout
  /// actor keeps one deadline for them, the earliest (timeout_kind::children_wake under this
  /// procedure's id), not one per child: arming and firing one per child were 1.85 of the
  /// 6.87 messages per resumed timer in proctor-bench (j) (docs/benchmarks.md, "Timers").
  /// An entry whose child has since been spawned, stopped or put to sleep with another
  /// wake-up is skipped when it comes up.
  std::priority_queue<std::pair<int64_t, uint64_t>, std::vector<std::pair<int64_t, uint64_t>>,
                      std::greater<>>
    wakes;
  int64_t wakes_armed_at = 0;  ///< the deadline armed for `wakes` (0: none)
  /// The images of children that gave up their actors while live (offered, or passivated
  /// since), each spawned from its own (proc_passivate_waiter.cpp).
  std::unordered_map<uint64_t, std::shared_ptr<const tree_image>> images;
};

}  // namespace proctor
