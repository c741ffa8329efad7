// The scheduler module every node's actor system runs: CAF 0.17's work-sharing coordinator
// with a clock that skips the cancel an actor's exit would send it for nothing.
//
// CAF 0.17 cancels an actor's timeouts when it exits (local_actor::cleanup), whether it ever
// set one or not: a message into the clock thread's 64-slot ring buffer, a condition-variable
// wake-up of that thread, and a context switch, for every procedure. Ours rarely set any (a
// request with a finite timeout; timers here are delayed messages, which a cancel does not
// touch), so the clock notes which actors set one and passes on only their cancels: per
// procedure, a hash-set lookup under a mutex instead of a thread wake-up.
#pragma once

#include <mutex>
#include <thread>
#include <unordered_set>

#include <caf/actor_system.hpp>
#include <caf/detail/set_thread_name.hpp>
#include <caf/detail/thread_safe_actor_clock.hpp>
#include <caf/policy/work_sharing.hpp>
#include <caf/scheduler/coordinator.hpp>

namespace proctor {

class timeout_tracking_clock final : public caf::detail::thread_safe_actor_clock {
public:
  using super = caf::detail::thread_safe_actor_clock;

  void set_ordinary_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                            uint64_t id) override {
    note(self);
    super::set_ordinary_timeout(t, self, type, id);
  }

  void set_request_timeout(time_point t, caf::abstract_actor* self, caf::message_id id) override {
    note(self);
    super::set_request_timeout(t, self, id);
  }

  void set_multi_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                         uint64_t id) override {
    note(self);
    super::set_multi_timeout(t, self, type, id);
  }

  void cancel_timeouts(caf::abstract_actor* self) override {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (with_timeouts_.erase(self) == 0)
        return;  // never set one: nothing to cancel
    }
    super::cancel_timeouts(self);
  }

  /// Actors whose exit will pass a cancel on (for tests).
  size_t tracked() {
    std::lock_guard<std::mutex> g(mu_);
    return with_timeouts_.size();
  }

private:
  void note(caf::abstract_actor* self) {
    std::lock_guard<std::mutex> g(mu_);
    with_timeouts_.insert(self);
  }

  std::mutex mu_;
  /// Actors that set a timeout since they started (an address may be reused by a new actor
  /// only after the old one's exit removed it).
  std::unordered_set<caf::abstract_actor*> with_timeouts_;
};

/// CAF's work-sharing coordinator (see tune_actor_system) on a timeout_tracking_clock, which
/// runs on a dispatch thread of its own; the coordinator's own clock is left idle.
class node_coordinator final : public caf::scheduler::coordinator<caf::policy::work_sharing> {
public:
  using super = caf::scheduler::coordinator<caf::policy::work_sharing>;

  explicit node_coordinator(caf::actor_system& sys) : super(sys) {}

  timeout_tracking_clock& clock() noexcept override { return clock_; }

protected:
  void start() override {
    timer_ = std::thread{[this] {
      caf::detail::set_thread_name("proctor.clock");
      system().thread_started();
      clock_.run_dispatch_loop();
      system().thread_terminates();
    }};
    super::start();
  }

  void stop() override {
    super::stop();
    clock_.cancel_dispatch_loop();
    timer_.join();
  }

private:
  timeout_tracking_clock clock_;
  std::thread timer_;
};

}  // namespace proctor
