// Per-type policies an author may declare at registration: how a parent supervises its
// children, how a failing step past its point of no return is retried, how much of the
// node its procedures may use at once.
#pragma once

#include <chrono>
#include <cstdint>

namespace proctor {

/// Which children restart when one crashes (Erlang/OTP's strategies).
enum class restart_strategy : uint8_t {
  one_for_one,   ///< only the crashed child's subtree
  one_for_all,   ///< every child subtree of the same parent
  rest_for_one,  ///< the crashed child and the children spawned after it
};

/// How a procedure supervises its children (and how a root is supervised).
struct supervision_policy {
  restart_strategy strategy = restart_strategy::one_for_one;
  /// Restart intensity: more than `max_restarts` crashes within `period` escalate.
  int max_restarts = 3;
  std::chrono::milliseconds period{std::chrono::seconds{60}};
  /// Back-off before restart n (n = 1, 2, ...): min(backoff_max, backoff_min * 2^(n-1)),
  /// then +/- `jitter` (a fraction) of it at random.
  std::chrono::milliseconds backoff_min{20};
  std::chrono::milliseconds backoff_max{std::chrono::seconds{2}};
  double jitter = 0.2;
};

/// How a step that fails (a business failure) is retried before its failure stands.
struct retry_policy {
  enum class backoff : uint8_t { fixed, linear, exponential };
  backoff kind = backoff::exponential;
  /// Delay before the first retry; linear adds it per retry, exponential doubles it.
  std::chrono::milliseconds delay{100};
  std::chrono::milliseconds max_delay{std::chrono::seconds{30}};
  /// Attempts of a failing step in all, the first included, before the failure stands and
  /// the tree rolls back. 1 = no retry; 0 = unbounded.
  int max_attempts = 1;
  /// Past the point of no return a failure cannot roll back, so the step is retried
  /// forward: up to this many attempts in all (0 = forever), after which the procedure ends
  /// FAILED and waits for an operator.
  int max_attempts_past_no_return = 0;
  double jitter = 0.2;
};

/// What a parent does while a child it placed on another node cannot be reached
/// (docs/cluster.md). The child's node keeps the child in its journal either way; nothing is
/// lost while it is down.
struct node_loss_policy {
  /// Wait for the node as long as it takes (the default): the tree carries on when the node
  /// is back.
  static node_loss_policy wait() { return {}; }
  /// Once the node has been unreachable for `deadline` without a break, the tree fails and
  /// rolls back; the order to undo the child waits for the node to return.
  static node_loss_policy fail_after(std::chrono::milliseconds deadline) {
    node_loss_policy p;
    p.deadline = deadline;
    return p;
  }
  std::chrono::milliseconds deadline{0};  ///< 0: wait
  bool waits() const noexcept { return deadline.count() <= 0; }
};

/// How much of the node a type's procedures may use at once (docs/flow-control.md): at most
/// `max_running` steps of procedures of the type (roots and children alike) run at the same
/// time, and at most `rate` procedures of the type start (run their first step) per `per`, a
/// token bucket that holds `rate` tokens. A step held back waits RUNNABLE in the scheduler
/// ("type limit x: 10 of 10 running"); it holds no run slot meanwhile. Only running steps
/// count, never a procedure that waits (for children, an event, a timer): so a parent never
/// holds a slot its children need, and a limit cannot deadlock a tree. Undos are neither
/// limited nor counted: a rollback never waits behind new work. An operator can change
/// both on a live node (`proctor limits set`), which overrides what the code declares.
struct type_limits {
  uint32_t max_running = 0;  ///< 0: no limit
  uint32_t rate = 0;         ///< starts per `per`; 0: no limit
  std::chrono::milliseconds per{std::chrono::seconds{1}};
  bool any() const noexcept { return max_running > 0 || rate > 0; }
  bool operator==(const type_limits&) const = default;
};

}  // namespace proctor
