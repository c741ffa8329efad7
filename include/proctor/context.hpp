// What a running step may know about itself and its tree.
#pragma once

#include <atomic>
#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <google/protobuf/message.h>

#include <proctor/outcome.hpp>
#include <proctor/proc_state.hpp>

namespace proctor {

/// How a child ended, as its parent sees it when it runs again after `spawn`.
struct child_result {
  uint64_t id = 0;
  proc_state state = proc_state::success;
  std::string result_json;  ///< the JSON its last step gave `done` ("" for none)
  std::string error;
  /// Cancelled by its parent's join policy (state rolledback: its steps are undone). A
  /// child whose own failure the policy contained ends failed, with its steps undone too.
  bool cancelled = false;

  /// The child's result as the message `M` its last step gave `done(message)`:
  ///
  ///   auto shipped = ctx.children()[0].result<ShipResult>();
  ///
  /// Throws procedure_failure (a business failure: the tree rolls back, nothing is retried
  /// but by the type's retry policy) naming the child and the reason when the child did not
  /// end SUCCESS or its result is not an `M` (a field `M` does not have, a value of the
  /// wrong type). A child that gave no result yields a default `M`. To handle a mismatch
  /// yourself, use parse_result.
  template <class M>
  M result() const {
    static_assert(std::is_base_of_v<google::protobuf::Message, M>,
                  "result<M>() takes a protobuf message type");
    M m;
    std::string why;
    if (!parse_result(m, &why))
      throw procedure_failure(why);
    return m;
  }

  /// Parses the result into `m` (cleared first). False, with `*why_not` (if given) saying
  /// why, where result<M>() would throw; never throws.
  bool parse_result(google::protobuf::Message& m, std::string* why_not = nullptr) const;
};

/// Orders the runs of steps and undos across a node's successive leaders (docs/guarantees.md,
/// "Fencing"). A step under way on a process that has lost its node (a frozen replica that was
/// deposed, a node whose standby took over) may still complete its side effect after the new
/// leader re-ran or undid the step. A resource that remembers the highest token it accepted
/// and refuses an older one keeps such a late write out: every token of a newer leader
/// compares greater than every token of an older one, and within one process later runs get
/// greater tokens. Compare tokens whole (epoch first, then seq).
struct fencing_token {
  /// The Raft term in which this replica group's leader was elected, or the data directory's
  /// lock epoch of a node without replicas (each process that takes the directory adds one);
  /// 0 for a node run without either (tests).
  uint64_t epoch = 0;
  /// Increases with every step and undo this process runs (never reset while it runs).
  uint64_t seq = 0;
  friend auto operator<=>(const fencing_token&, const fencing_token&) = default;
  /// "epoch.seq", for logs and for resources that store the token as text.
  std::string str() const { return std::to_string(epoch) + "." + std::to_string(seq); }
};

/// Passed to every step and rollback handler. Valid only during the call.
class context {
public:
  /// This procedure's id, its root's id and its parent's id (0 for a root).
  uint64_t id() const noexcept { return id_; }
  uint64_t root_id() const noexcept { return root_id_; }
  uint64_t parent_id() const noexcept { return parent_id_; }
  bool is_root() const noexcept { return parent_id_ == 0; }

  /// How often this state has started in this incarnation of the procedure, counting this
  /// time (1 = first time): forward retries and yields count; a restart after a crash or a
  /// node restart begins again at 1 (keep a durable count yourself if you need one).
  int attempt() const noexcept { return attempt_; }

  /// The children spawned by the step that preceded this one, with how they ended.
  const std::vector<child_result>& children() const noexcept { return children_; }

  /// The payload of the event that woke this procedure ("" if none).
  const std::string& event_payload() const noexcept { return event_payload_; }

  /// The payload as the message `M` (its JSON, as `proctor event KEY --payload-json` sent it):
  ///
  ///   auto paid = ctx.event<PaymentConfirmed>();
  ///
  /// Throws procedure_failure (a business failure) naming the key's payload and the reason
  /// when it is not an `M` (a field `M` does not have, a value of the wrong type); no payload
  /// (or `null`) yields a default `M`. To handle a mismatch yourself, use parse_event.
  template <class M>
  M event() const {
    static_assert(std::is_base_of_v<google::protobuf::Message, M>,
                  "event<M>() takes a protobuf message type");
    M m;
    std::string why;
    if (!parse_event(m, &why))
      throw procedure_failure(why);
    return m;
  }

  /// Parses the payload into `m` (cleared first). False, with `*why_not` (if given) saying
  /// why, where event<M>() would throw; never throws.
  bool parse_event(google::protobuf::Message& m, std::string* why_not = nullptr) const;
  /// The result a worker completed a dispatch's task with (its JSON; docs/workers.md): the
  /// same text as event_payload(), named for what it is. task_result<M>() parses it as event<M>.
  const std::string& task_result() const noexcept { return event_payload_; }
  template <class M>
  M task_result() const {
    return event<M>();
  }

  /// True when a suspend's deadline passed before its event arrived.
  bool event_timed_out() const noexcept { return event_timed_out_; }

  /// In a rollback handler: true when it undoes a committed step, and the procedure's data
  /// is what that step committed (so the undo knows what the step obtained: an address, a
  /// resource id); false when it undoes a state that may have run only partly (it failed,
  /// or a stop or crash came while it ran), and the data is what that state started with.
  bool undo_of_committed_step() const noexcept { return undo_committed_; }

  /// In a rollback handler: the undo is work for an external worker (docs/workers.md,
  /// "Undos run by workers"). The handler returns at once; the task (`input_json` on the task
  /// queue `queue`, with the leases and attempts `options` set, 0 for the node's defaults) is
  /// journaled, then handed out as a dispatch's is, and the rollback goes on once a worker
  /// completed it. A task that fails for good (its attempts ran out, or a worker failed it as
  /// not retryable) counts as an undo that threw: the handler runs again after a back-off
  /// and may dispatch again. The data the handler leaves is the undo's. Outside a rollback
  /// handler it does nothing.
  ///
  ///   void undo_charge(Data& d, context& ctx) {
  ///     ctx.dispatch_undo("billing.refund", R"({"charge":")" + d.charge_id() + R"("})");
  ///   }
  void dispatch_undo(std::string queue, std::string input_json,
                     outcome::task_options options = {}) {
    if (!in_undo_)
      return;
    undo_task_ = outcome::dispatch(std::move(queue), std::move(input_json), 0)
                   .start_to_close(options.start_to_close)
                   .heartbeat(options.heartbeat)
                   .max_attempts(options.max_attempts)
                   .retry_delay(options.retry_delay);
  }
  /// dispatch_undo with the JSON mapping of a protobuf message as its input.
  void dispatch_undo(std::string queue, const google::protobuf::Message& input,
                     outcome::task_options options = {}) {
    if (!in_undo_)
      return;
    auto o = outcome::dispatch(std::move(queue), input, 0);
    dispatch_undo(o.service(), o.request(), options);
  }

  /// The name of the node this step runs on ("" for a node started without --name), and the
  /// names of every node of the cluster as this node knows them (itself and its peers,
  /// sorted): where `child(...).on_node(name)` may place a child.
  const std::string& node() const noexcept { return node_ ? *node_ : empty_name(); }
  const std::vector<std::string>& nodes() const noexcept {
    static const std::vector<std::string> none;
    return nodes_ ? *nodes_ : none;
  }

  /// This run's fencing token (fencing_token): hand it to a resource that checks it.
  const proctor::fencing_token& fencing_token() const noexcept { return fencing_; }

  /// True once its procedure is being stopped while this step runs: a sibling cancelled by its
  /// parent's join policy, a subtree stopped because its tree failed or was aborted, a
  /// supervisor's restart. A long step checks it between pieces of work and then returns
  /// `yield(state)` at once (a yield is never committed: the state is undone as one that may
  /// have run partly, or runs again if the procedure does), or throws. Another outcome would
  /// be committed as the step's. A step that does not check it runs to its end, and the stop
  /// waits for that (docs/flow-control.md, "Join policies"). Always false in an undo (undos are
  /// never cancelled) and in a step that runs on its procedure's actor (never_blocks: it takes
  /// microseconds).
  bool cancelled() const noexcept {
    return cancel_flag_ != nullptr && cancel_flag_->load(std::memory_order_relaxed);
  }

  // -- set by the runtime ---------------------------------------------------------------------
  proctor::fencing_token fencing_;
  std::shared_ptr<const std::atomic<bool>> cancel_flag_;
  const std::string* node_ = nullptr;
  const std::vector<std::string>* nodes_ = nullptr;
  uint64_t id_ = 0;
  uint64_t root_id_ = 0;
  uint64_t parent_id_ = 0;
  int attempt_ = 1;
  std::vector<child_result> children_;
  std::string event_payload_;
  bool event_timed_out_ = false;
  bool undo_committed_ = false;
  bool in_undo_ = false;                ///< a rollback handler runs
  std::optional<outcome> undo_task_{};  ///< what dispatch_undo handed to a queue

private:
  static const std::string& empty_name() {
    static const std::string none;
    return none;
  }
};

}  // namespace proctor
