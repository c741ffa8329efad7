// Restart intensity and back-off for one supervisor (Erlang/OTP's MaxR within MaxT).
#pragma once

#include <chrono>
#include <random>
#include <vector>

#include <proctor/policy.hpp>

namespace proctor {

class restart_tracker {
public:
  using clock = std::chrono::steady_clock;

  explicit restart_tracker(supervision_policy policy = {}) : policy_(policy) {}

  /// Records a crash at `now`. Returns false if it exceeds the intensity (more than
  /// max_restarts crashes within period): the supervisor must escalate instead of restarting.
  bool record_crash(clock::time_point now);

  /// The back-off before the restart that follows the crash just recorded: doubling from
  /// backoff_min per crash within the period, capped at backoff_max, with +/- jitter.
  std::chrono::milliseconds backoff();

  /// Crashes within the current period.
  size_t recent() const noexcept { return crashes_.size(); }

  const supervision_policy& policy() const noexcept { return policy_; }

private:
  supervision_policy policy_;
  std::vector<clock::time_point> crashes_;  // within the period, oldest first
};

/// A random engine per thread, for jitter (seeding one per object costs a random_device
/// read each, tens of microseconds on some virtual machines).
std::minstd_rand& jitter_rng();

/// The longest back-off or retry delay: longer ones (a huge `delay`, `max_delay` or
/// `backoff_max`) saturate here. Ten years, so that adding it to any clock's time point, even
/// in nanoseconds, cannot overflow.
inline constexpr std::chrono::milliseconds max_backoff_delay{std::chrono::hours{24 * 365 * 10}};

/// The delay before attempt `attempt` (2 = first retry) of a retried step, or -1 ms when
/// max_attempts is exhausted. Never negative otherwise; at most max_backoff_delay.
std::chrono::milliseconds retry_delay(const retry_policy& p, int attempt, std::minstd_rand& rng);
inline std::chrono::milliseconds retry_delay(const retry_policy& p, int attempt) {
  return retry_delay(p, attempt, jitter_rng());
}

}  // namespace proctor
