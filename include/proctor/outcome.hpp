// What a step decides. A step returns exactly one outcome; nothing it decides takes effect
// until the journal record that carries it is durable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/message.h>

namespace proctor {

/// A child procedure requested by `spawn`: a registered type and its serialized data.
struct child_spec {
  std::string type;
  std::string data;  ///< the child's data message, serialized (see `child()`)
  int32_t priority = 0;
  /// The node the child runs on ("" or this node's name: here). A child elsewhere is, for
  /// its parent, a child like any other: its end comes back, a failure of the tree rolls it
  /// back there (docs/cluster.md).
  std::string node{};
  /// Placed by the spawn step on whichever node of the cluster has the type registered and
  /// holds the fewest procedures that have not ended (this node included; a node that is up
  /// before one that is down). The choice is journaled with the spawn, so a restart keeps it.
  bool any_node = false;

  /// Places the child on the node named `name` (one of `ctx.nodes()`).
  child_spec on_node(std::string name) && {
    node = std::move(name);
    any_node = false;
    return std::move(*this);
  }

  /// Places the child wherever its type is registered, on the least loaded such node.
  child_spec on_any_node() && {
    node.clear();
    any_node = true;
    return std::move(*this);
  }
};

/// Builds a child_spec from the child's data message.
inline child_spec child(std::string type, const google::protobuf::Message& data,
                        int32_t priority = 0) {
  return child_spec{std::move(type), data.SerializeAsString(), priority};
}

/// How a parent joins the children of a spawn: how many of them must succeed before its
/// next step runs. Once that many succeeded, the others are cancelled: each is stopped at a
/// step boundary and its committed steps are undone (its children's first, in reverse
/// order), then the next step runs and sees, child by child, who succeeded, who was
/// cancelled and who failed (child_result). docs/flow-control.md, "Join policies".
struct join_policy {
  uint32_t at_least = 0;  ///< children that must succeed; 0: every one (join::all)
};

namespace join {
/// Every child must succeed (the default): a child's failure fails the join.
inline join_policy all() {
  return {};
}
/// One child's success is enough; the others are cancelled.
inline join_policy any() {
  return {1};
}
/// `k` children's successes are enough (k >= 1, at most the number spawned); the others
/// are cancelled. A child that fails while k can still be reached is undone and counts as
/// failed; once k cannot be reached any more, the join fails (see child_failure).
inline join_policy at_least(uint32_t k) {
  return {k};
}
}  // namespace join

/// What a child's failure does while its siblings still run, once the join can no longer
/// be met (for join::all: at the first failure).
enum class child_failure : uint8_t {
  /// The parent's step fails at once, and with it the tree: the siblings are stopped at
  /// their next step boundary and everything is rolled back (the default).
  cancel_siblings,
  /// The failed child is undone, and the siblings run to their ends; then the join fails
  /// (and the tree rolls back everything, their work included).
  wait_for_siblings,
};

class outcome {
public:
  enum class kind : uint8_t { done, next, fail, yield, spawn, suspend, wait, call, dispatch };

  /// A dispatch's task, as its options set it (0: the node's default).
  struct task_options {
    std::chrono::milliseconds start_to_close{0};
    std::chrono::milliseconds heartbeat{0};
    uint32_t max_attempts = 0;
    std::chrono::milliseconds retry_delay{0};
  };

  // -- constructors -------------------------------------------------------------------------

  /// Finished: SUCCESS with an optional result (a JSON text, "" for none).
  static outcome done(std::string result_json = {}) {
    outcome o(kind::done);
    o.result_json_ = std::move(result_json);
    return o;
  }

  /// Finished: SUCCESS with the JSON mapping of a protobuf message as result.
  static outcome done(const google::protobuf::Message& result);

  /// Persist, then run `state` next.
  static outcome next(int32_t state) {
    outcome o(kind::next);
    o.state_ = state;
    return o;
  }

  /// Business failure: the procedure fails and its tree rolls back.
  static outcome fail(std::string error) {
    outcome o(kind::fail);
    o.error_ = std::move(error);
    return o;
  }

  /// Back of the run queue without persisting anything; `state` runs again later.
  static outcome yield(int32_t state) {
    outcome o(kind::yield);
    o.state_ = state;
    return o;
  }

  /// Persist this step and the children atomically; run `state` once every child ended.
  static outcome spawn(std::vector<child_spec> children, int32_t state) {
    outcome o(kind::spawn);
    o.children_ = std::move(children);
    o.state_ = state;
    return o;
  }

  /// Wait for the external event `key`, then run `state`; `timeout` 0 waits forever. A
  /// passed timeout fails the procedure unless `.on_timeout(other_state)` says what runs
  /// then (or the type's resume_on_timeout()).
  static outcome suspend(std::string key, int32_t state,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) {
    outcome o(kind::suspend);
    o.event_key_ = std::move(key);
    o.state_ = state;
    o.duration_ = timeout;
    return o;
  }

  /// Sends `request` to the service `service` and runs `state` with the reply
  /// (`ctx.event_payload()`), which is journaled before the procedure acts on it. `service`
  /// names a service of this node ("billing") or of another ("host:port/billing"). The
  /// request may be delivered more than once (after a crash it is sent again): services
  /// deduplicate by the call id they receive. A failed call or a passed `timeout` fails the
  /// procedure unless `.on_timeout(state)` or `resume_on_timeout()`.
  static outcome call(std::string service, std::string request, int32_t state,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) {
    outcome o(kind::call);
    o.event_key_ = std::move(service);
    o.result_json_ = std::move(request);
    o.state_ = state;
    o.duration_ = timeout;
    return o;
  }

  /// Hands `input_json` to the durable task queue `queue`, for an external worker to run
  /// (docs/workers.md), and runs `state` with the task's result (`ctx.task_result()`), which is
  /// journaled before the procedure acts on it. The task is journaled with this step's commit;
  /// a worker polls it over HTTP, runs it and completes it. An attempt that fails, or whose
  /// lease runs out (`start_to_close`, `heartbeat`), is queued again until `max_attempts`;
  /// then, or at the dispatch's `timeout` (0: none), the procedure fails unless
  /// `.on_timeout(state)` or the type's resume_on_timeout(). The procedure only waits: it may
  /// be passivated meanwhile.
  ///
  ///   return dispatch("billing.charge", R"({"cents":120})", CHARGED)
  ///     .start_to_close(30s).heartbeat(10s).max_attempts(5);
  static outcome dispatch(std::string queue, std::string input_json, int32_t state,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) {
    outcome o(kind::dispatch);
    o.event_key_ = std::move(queue);
    o.result_json_ = std::move(input_json);
    o.state_ = state;
    o.duration_ = timeout;
    return o;
  }

  /// A dispatch whose input is the JSON mapping of a protobuf message (as done(message)).
  static outcome dispatch(std::string queue, const google::protobuf::Message& input, int32_t state,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

  /// For a dispatch: how long one attempt may run from its poll to its complete (its lease).
  outcome start_to_close(std::chrono::milliseconds d) && {
    task_.start_to_close = d;
    return std::move(*this);
  }
  /// For a dispatch: a worker must heartbeat at least this often, or its attempt times out.
  outcome heartbeat(std::chrono::milliseconds d) && {
    task_.heartbeat = d;
    return std::move(*this);
  }
  /// For a dispatch: how many attempts the task may take in all (1: no retry).
  outcome max_attempts(uint32_t n) && {
    task_.max_attempts = n;
    return std::move(*this);
  }
  /// For a dispatch: how long a failed or timed-out attempt waits before it is queued again.
  outcome retry_delay(std::chrono::milliseconds d) && {
    task_.retry_delay = d;
    return std::move(*this);
  }

  /// For a suspend, a call or a dispatch with a timeout: when the deadline passes first (or a
  /// call fails, or a dispatch's task fails for good: `ctx.task_result()` is then
  /// {"error":WHY}), run `state` (with `ctx.event_timed_out()` set) instead of the resume
  /// state. It is journaled with the wait, so a restart keeps it. Without it the type's
  /// resume_on_timeout() decides: the resume state, or the procedure fails. A failed call
  /// counts as a passed deadline.
  ///
  ///   return suspend("payment:" + d.order(), PAID, 30s).on_timeout(CANCEL);
  outcome on_timeout(int32_t state) && {
    timeout_state_ = state;
    has_timeout_state_ = true;
    return std::move(*this);
  }

  /// For a spawn: how many children must succeed (join::all, join::any, join::at_least(k)).
  /// Journaled with the spawn, so a restart keeps it.
  ///
  ///   return spawn({child("mirror", a), child("mirror", b)}, USE_FASTEST).join(join::any());
  outcome join(join_policy policy) && {
    join_ = policy;
    return std::move(*this);
  }

  /// For a spawn: what a child's failure does to its running siblings (child_failure).
  outcome on_child_failure(child_failure what) && {
    child_failure_ = what;
    return std::move(*this);
  }

  /// WAITING_TIMEOUT for `duration`, then run `state`.
  static outcome wait(std::chrono::milliseconds duration, int32_t state) {
    outcome o(kind::wait);
    o.duration_ = duration;
    o.state_ = state;
    return o;
  }

  // -- observers ------------------------------------------------------------------------------

  kind what() const noexcept { return kind_; }
  /// The state that runs next (next, yield, spawn, suspend, wait, call, dispatch).
  int32_t state() const noexcept { return state_; }
  const std::string& result_json() const noexcept { return result_json_; }
  const std::string& error() const noexcept { return error_; }
  const std::vector<child_spec>& children() const noexcept { return children_; }
  std::vector<child_spec>& children() noexcept { return children_; }
  const std::string& event_key() const noexcept { return event_key_; }
  /// call: the service and the request; dispatch: the queue and the input.
  const std::string& service() const noexcept { return event_key_; }
  const std::string& request() const noexcept { return result_json_; }
  const task_options& task() const noexcept { return task_; }
  std::chrono::milliseconds duration() const noexcept { return duration_; }
  /// suspend, call: on_timeout's state, if it was given.
  bool has_timeout_state() const noexcept { return has_timeout_state_; }
  int32_t timeout_state() const noexcept { return timeout_state_; }
  /// spawn: its join policy, and what a child's failure does.
  const join_policy& join_of() const noexcept { return join_; }
  child_failure on_child_failure_of() const noexcept { return child_failure_; }

private:
  explicit outcome(kind k) : kind_(k) {}

  kind kind_;
  int32_t state_ = 0;
  std::string result_json_;
  std::string error_;
  std::vector<child_spec> children_;
  std::string event_key_;
  std::chrono::milliseconds duration_{0};
  int32_t timeout_state_ = 0;
  bool has_timeout_state_ = false;
  join_policy join_{};
  child_failure child_failure_ = child_failure::cancel_siblings;
  task_options task_{};
};

/// Thrown by a step (or returned through `outcome::fail`) for a business failure: the
/// procedure fails and its tree rolls back. Any other exception is a crash, handled by the
/// supervisor (restart from the last journaled state).
class procedure_failure : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

}  // namespace proctor
