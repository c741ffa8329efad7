// The procedure contract. A procedure is a unit of work broken into small idempotent steps;
// the runtime journals each step's outcome before acting on it. Most authors derive from
// `state_machine` (state_machine.hpp) rather than from `procedure` directly.
#pragma once

#include <cstdint>
#include <string>

#include <google/protobuf/message.h>

#include <proctor/context.hpp>
#include <proctor/outcome.hpp>
#include <proctor/resource_lock.hpp>

namespace proctor {

class procedure {
public:
  virtual ~procedure() = default;

  /// The procedure's durable data: parsed from the submit's args JSON, journaled after
  /// every step, handed back to the steps after a restart.
  virtual google::protobuf::Message& data() = 0;

  /// The state the first step runs.
  virtual int32_t initial_state() const = 0;

  /// Runs the step of `state`. May run more than once for the same state (a crash between
  /// its effect and its journal commit re-runs it): it must be idempotent. Throwing
  /// `procedure_failure` equals returning `outcome::fail`; any other exception is a crash.
  virtual outcome execute(int32_t state, context& ctx) = 0;

  /// Undoes the effects of the step of `state`. `data()` holds the data the step started
  /// with. Called in exact reverse order of the tree's committed steps, and also for a state
  /// whose step may have run only partly. Must be idempotent and tolerate nothing to undo.
  virtual void rollback(int32_t state, context& ctx) = 0;

  /// False marks `state` as a point of no return: once its step committed, failures in the
  /// tree are retried forward instead of rolled back, and abort is refused.
  virtual bool rollback_supported(int32_t /*state*/) const { return true; }

  /// Checks the data after it was parsed from a submit's args; "" if acceptable, otherwise
  /// a one-line reason given back to the submitter.
  virtual std::string validate() const { return {}; }

  /// The resources this procedure locks, computed from its data. All are acquired at once
  /// (all or nothing, so no deadlock between two procedures' sets) before its first step,
  /// held across steps and restarts, and released when it ends or its tree finished rolling
  /// back. Its descendants may use them.
  virtual lock_set locks() const { return {}; }

  /// What happens when a `suspend` deadline passes before its event, for a suspend without
  /// `.on_timeout(state)` (which says it per suspend, and wins): false (the default) fails
  /// the procedure, so its tree rolls back; true runs the resume state with
  /// `ctx.event_timed_out()` set.
  virtual bool resume_on_timeout() const { return false; }

  /// True when the step of `state` (its undo, if `undo`) never blocks and finishes in
  /// microseconds (no I/O, no sleep) with the data it has now: it then runs on the
  /// procedure's actor when its turn comes, without the hand-off to a worker thread, and
  /// without a run slot if the procedure holds no lock. A type declared nonblocking
  /// (procedure_type::nonblocking) is so in every state; this says it state by state, or
  /// from the data (state_machine::nonblocking declares states). False is always safe.
  virtual bool never_blocks(int32_t /*state*/, bool /*undo*/) const { return false; }

  /// A readable name of a state for logs.
  virtual std::string state_name(int32_t state) const { return std::to_string(state); }
};

}  // namespace proctor
