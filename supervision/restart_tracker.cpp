#include "supervision/restart_tracker.hpp"

#include <algorithm>
#include <cmath>

namespace proctor {

namespace {

std::chrono::milliseconds jittered(double ms, double jitter, std::minstd_rand& rng) {
  if (jitter > 0) {
    std::uniform_real_distribution<double> d(-jitter, jitter);
    ms *= 1.0 + d(rng);
  }
  // Saturate before the cast: a double at or past 2^63 cast to int64 is undefined (x86 gives
  // INT64_MIN, a negative delay that fires at once).
  const auto ceiling = static_cast<double>(max_backoff_delay.count());
  if (!(ms < ceiling))  // NaN included
    return max_backoff_delay;
  return std::chrono::milliseconds{static_cast<int64_t>(std::max(0.0, ms))};
}

}  // namespace

std::minstd_rand& jitter_rng() {
  thread_local std::minstd_rand rng{std::random_device{}()};
  return rng;
}

bool restart_tracker::record_crash(clock::time_point now) {
  auto stale = std::find_if(crashes_.begin(), crashes_.end(),
                            [&](clock::time_point t) { return now - t <= policy_.period; });
  crashes_.erase(crashes_.begin(), stale);
  crashes_.push_back(now);
  return static_cast<int>(crashes_.size()) <= policy_.max_restarts;
}

std::chrono::milliseconds restart_tracker::backoff() {
  auto n = std::max<size_t>(crashes_.size(), 1);
  double base = static_cast<double>(policy_.backoff_min.count())
                * std::pow(2.0, static_cast<double>(std::min<size_t>(n - 1, 30)));
  base = std::min(base, static_cast<double>(policy_.backoff_max.count()));
  return jittered(base, policy_.jitter, jitter_rng());
}

std::chrono::milliseconds retry_delay(const retry_policy& p, int attempt, std::minstd_rand& rng) {
  if (p.max_attempts > 0 && attempt > p.max_attempts)
    return std::chrono::milliseconds{-1};
  auto k = static_cast<double>(std::max(attempt - 1, 1));
  double base = static_cast<double>(p.delay.count());
  switch (p.kind) {
    case retry_policy::backoff::fixed:
      break;
    case retry_policy::backoff::linear:
      base *= k;
      break;
    case retry_policy::backoff::exponential:
      base *= std::pow(2.0, std::min(k - 1, 30.0));
      break;
  }
  base = std::min(base, static_cast<double>(p.max_delay.count()));
  return jittered(base, p.jitter, rng);
}

}  // namespace proctor
