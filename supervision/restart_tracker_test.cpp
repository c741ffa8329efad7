#include "supervision/restart_tracker.hpp"

#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace proctor {
namespace {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;
using tp = restart_tracker::clock::time_point;

const tp t0 = tp{} + 1000h;

supervision_policy exact(int max_restarts = 3, ms period = 60s, ms min = 20ms, ms max = 2s) {
  supervision_policy p;
  p.max_restarts = max_restarts;
  p.period = period;
  p.backoff_min = min;
  p.backoff_max = max;
  p.jitter = 0;
  return p;
}

retry_policy retry(retry_policy::backoff kind, ms delay = 100ms, ms max_delay = 30s,
                   int max_attempts = 0) {
  retry_policy p;
  p.kind = kind;
  p.delay = delay;
  p.max_delay = max_delay;
  p.max_attempts = max_attempts;
  p.jitter = 0;
  return p;
}

// -- intensity ----------------------------------------------------------------------------------

TEST(restart_tracker_test, allows_max_restarts_within_the_period_then_refuses) {
  restart_tracker r(exact(3));
  EXPECT_EQ(r.recent(), 0u);
  EXPECT_TRUE(r.record_crash(t0));
  EXPECT_TRUE(r.record_crash(t0 + 1s));
  EXPECT_TRUE(r.record_crash(t0 + 2s));
  EXPECT_EQ(r.recent(), 3u);
  EXPECT_FALSE(r.record_crash(t0 + 3s));
  EXPECT_EQ(r.recent(), 4u);
  EXPECT_FALSE(r.record_crash(t0 + 4s));
}

TEST(restart_tracker_test, same_instant_crashes_count_each) {
  restart_tracker r(exact(2));
  EXPECT_TRUE(r.record_crash(t0));
  EXPECT_TRUE(r.record_crash(t0));
  EXPECT_FALSE(r.record_crash(t0));
}

TEST(restart_tracker_test, zero_max_restarts_refuses_the_first_crash) {
  restart_tracker r(exact(0));
  EXPECT_FALSE(r.record_crash(t0));
}

TEST(restart_tracker_test, old_crashes_fall_out_of_the_period) {
  restart_tracker r(exact(3, 60s));
  EXPECT_TRUE(r.record_crash(t0));
  EXPECT_TRUE(r.record_crash(t0 + 10s));
  EXPECT_TRUE(r.record_crash(t0 + 20s));
  // 61 s after the first: it no longer counts, the other two do.
  EXPECT_TRUE(r.record_crash(t0 + 61s));
  EXPECT_EQ(r.recent(), 3u);
  EXPECT_FALSE(r.record_crash(t0 + 65s));
  EXPECT_EQ(r.recent(), 4u);
  // Long after every one of them.
  EXPECT_TRUE(r.record_crash(t0 + 1h));
  EXPECT_EQ(r.recent(), 1u);
}

TEST(restart_tracker_test, a_crash_a_period_apart_never_escalates) {
  restart_tracker r(exact(1, 100ms));
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(r.record_crash(t0 + i * 101ms)) << i;
    EXPECT_EQ(r.recent(), 1u) << i;
  }
  EXPECT_FALSE(r.record_crash(t0 + 19 * 101ms + 50ms));
}

TEST(restart_tracker_test, default_policy) {
  restart_tracker r;
  EXPECT_EQ(r.policy().max_restarts, 3);
  EXPECT_EQ(r.policy().period, 60s);
  EXPECT_EQ(r.policy().backoff_min, 20ms);
  EXPECT_EQ(r.policy().backoff_max, 2s);
  EXPECT_DOUBLE_EQ(r.policy().jitter, 0.2);
  EXPECT_EQ(r.policy().strategy, restart_strategy::one_for_one);
}

// -- back-off -----------------------------------------------------------------------------------

TEST(restart_tracker_test, backoff_doubles_from_min_and_is_capped_at_max) {
  restart_tracker r(exact(100, 60s, 20ms, 2s));
  const std::vector<ms> want{20ms, 40ms, 80ms, 160ms, 320ms, 640ms, 1280ms, 2000ms, 2000ms, 2000ms};
  for (size_t i = 0; i < want.size(); ++i) {
    r.record_crash(t0 + static_cast<int>(i) * 1s);
    EXPECT_EQ(r.backoff(), want[i]) << "after crash " << i + 1;
  }
  for (int i = 0; i < 40; ++i)
    r.record_crash(t0 + 11s);
  EXPECT_EQ(r.recent(), 50u);
  EXPECT_EQ(r.backoff(), 2000ms);  // no overflow past 2^30
}

TEST(restart_tracker_test, backoff_before_any_crash_is_the_minimum) {
  restart_tracker r(exact(3, 60s, 35ms, 1s));
  EXPECT_EQ(r.backoff(), 35ms);
}

TEST(restart_tracker_test, backoff_starts_over_once_crashes_leave_the_period) {
  restart_tracker r(exact(10, 10s, 10ms, 10s));
  for (int i = 0; i < 5; ++i)
    r.record_crash(t0 + i * 1s);
  EXPECT_EQ(r.backoff(), 160ms);
  r.record_crash(t0 + 100s);
  EXPECT_EQ(r.backoff(), 10ms);
}

TEST(restart_tracker_test, backoff_max_below_min_caps) {
  restart_tracker r(exact(3, 60s, 500ms, 100ms));
  r.record_crash(t0);
  EXPECT_EQ(r.backoff(), 100ms);
}

TEST(restart_tracker_test, backoff_jitter_stays_within_bounds) {
  auto p = exact(100, 60s, 100ms, 1s);
  p.jitter = 0.2;
  restart_tracker r(p);
  const std::vector<double> base{100, 200, 400, 800, 1000, 1000};
  for (size_t n = 0; n < base.size(); ++n) {
    r.record_crash(t0 + static_cast<int>(n) * 1s);
    std::set<int64_t> seen;
    for (int i = 0; i < 300; ++i) {
      auto b = r.backoff().count();
      EXPECT_GE(b, static_cast<int64_t>(base[n] * 0.8)) << "crash " << n + 1;
      EXPECT_LE(b, static_cast<int64_t>(base[n] * 1.2)) << "crash " << n + 1;
      seen.insert(b);
    }
    EXPECT_GT(seen.size(), 5u) << "no jitter applied after crash " << n + 1;
  }
}

// -- retry delays -------------------------------------------------------------------------------

TEST(retry_delay_test, fixed) {
  std::minstd_rand rng(1);
  auto p = retry(retry_policy::backoff::fixed, 150ms);
  for (int a = 2; a <= 10; ++a)
    EXPECT_EQ(retry_delay(p, a, rng), 150ms) << a;
}

TEST(retry_delay_test, linear) {
  std::minstd_rand rng(1);
  auto p = retry(retry_policy::backoff::linear, 100ms);
  EXPECT_EQ(retry_delay(p, 2, rng), 100ms);
  EXPECT_EQ(retry_delay(p, 3, rng), 200ms);
  EXPECT_EQ(retry_delay(p, 4, rng), 300ms);
  EXPECT_EQ(retry_delay(p, 11, rng), 1000ms);
}

TEST(retry_delay_test, exponential) {
  std::minstd_rand rng(1);
  auto p = retry(retry_policy::backoff::exponential, 100ms);
  EXPECT_EQ(retry_delay(p, 2, rng), 100ms);
  EXPECT_EQ(retry_delay(p, 3, rng), 200ms);
  EXPECT_EQ(retry_delay(p, 4, rng), 400ms);
  EXPECT_EQ(retry_delay(p, 5, rng), 800ms);
  EXPECT_EQ(retry_delay(p, 9, rng), 12800ms);
}

TEST(retry_delay_test, max_delay_caps) {
  std::minstd_rand rng(1);
  auto e = retry(retry_policy::backoff::exponential, 100ms, 250ms);
  EXPECT_EQ(retry_delay(e, 3, rng), 200ms);
  EXPECT_EQ(retry_delay(e, 4, rng), 250ms);
  EXPECT_EQ(retry_delay(e, 40, rng), 250ms);
  EXPECT_EQ(retry_delay(e, 1000, rng), 250ms);
  auto l = retry(retry_policy::backoff::linear, 100ms, 250ms);
  EXPECT_EQ(retry_delay(l, 3, rng), 200ms);
  EXPECT_EQ(retry_delay(l, 4, rng), 250ms);
  auto f = retry(retry_policy::backoff::fixed, 400ms, 250ms);
  EXPECT_EQ(retry_delay(f, 2, rng), 250ms);
}

TEST(retry_delay_test, exhausted_past_max_attempts) {
  std::minstd_rand rng(1);
  auto p = retry(retry_policy::backoff::exponential, 100ms, 30s, 3);
  EXPECT_EQ(retry_delay(p, 2, rng), 100ms);
  EXPECT_EQ(retry_delay(p, 3, rng), 200ms);
  EXPECT_EQ(retry_delay(p, 4, rng), -1ms);
  EXPECT_EQ(retry_delay(p, 100, rng), -1ms);
  auto one = retry(retry_policy::backoff::fixed, 100ms, 30s, 1);
  EXPECT_EQ(retry_delay(one, 2, rng), -1ms);
}

TEST(retry_delay_test, unbounded_when_max_attempts_is_zero) {
  std::minstd_rand rng(1);
  auto p = retry(retry_policy::backoff::exponential, 100ms, 30s, 0);
  EXPECT_EQ(retry_delay(p, 100000, rng), 30s);
  auto f = retry(retry_policy::backoff::fixed, 100ms, 30s, 0);
  EXPECT_EQ(retry_delay(f, 100000, rng), 100ms);
}

TEST(retry_delay_test, default_policy_is_exponential_from_100ms) {
  std::minstd_rand rng(1);
  retry_policy p;
  // By default a failing step is not retried: its failure stands at once.
  EXPECT_EQ(p.max_attempts, 1);
  EXPECT_EQ(retry_delay(p, 2, rng), -1ms);
  p.max_attempts = 0;
  p.jitter = 0;
  EXPECT_EQ(retry_delay(p, 2, rng), 100ms);
  EXPECT_EQ(retry_delay(p, 3, rng), 200ms);
  EXPECT_EQ(retry_delay(p, 50, rng), 30s);
}

TEST(retry_delay_test, jitter_stays_within_bounds) {
  std::minstd_rand rng(7);
  auto p = retry(retry_policy::backoff::exponential, 100ms, 1s);
  p.jitter = 0.5;
  const std::vector<double> base{100, 200, 400, 800, 1000};
  for (size_t i = 0; i < base.size(); ++i) {
    int attempt = static_cast<int>(i) + 2;
    std::set<int64_t> seen;
    for (int k = 0; k < 300; ++k) {
      auto d = retry_delay(p, attempt, rng).count();
      EXPECT_GE(d, static_cast<int64_t>(base[i] * 0.5)) << attempt;
      EXPECT_LE(d, static_cast<int64_t>(base[i] * 1.5)) << attempt;
      seen.insert(d);
    }
    EXPECT_GT(seen.size(), 5u) << attempt;
  }
  // Exhaustion is -1 ms whatever the jitter.
  p.max_attempts = 2;
  EXPECT_EQ(retry_delay(p, 3, rng), -1ms);
}

// Delays of 2^62 ms and more once overflowed the cast to int64 (a negative delay, a retry at
// once): every kind, with and without jitter, saturates instead.
TEST(retry_delay_test, huge_delays_saturate_for_every_kind) {
  std::minstd_rand rng(3);
  const std::vector<ms> huge{ms{int64_t{1} << 62}, ms::max(), ms{int64_t{1} << 53}};
  for (auto kind : {retry_policy::backoff::fixed, retry_policy::backoff::linear,
                    retry_policy::backoff::exponential})
    for (auto delay : huge)
      for (double jitter : {0.0, 0.2, 1.0}) {
        auto p = retry(kind, delay, ms::max());
        p.jitter = jitter;
        for (int attempt : {2, 5, 40, 1000, 1 << 30}) {
          auto d = retry_delay(p, attempt, rng);
          EXPECT_GE(d, 0ms) << static_cast<int>(kind) << " attempt " << attempt;
          EXPECT_LE(d, max_backoff_delay) << static_cast<int>(kind) << " attempt " << attempt;
          if (jitter == 0) {
            EXPECT_EQ(d, max_backoff_delay) << static_cast<int>(kind) << " attempt " << attempt;
          }
        }
      }
}

TEST(retry_delay_test, huge_max_delay_keeps_small_delays_exact) {
  std::minstd_rand rng(3);
  auto p = retry(retry_policy::backoff::exponential, 100ms, ms::max());
  EXPECT_EQ(retry_delay(p, 5, rng), 800ms);
  // The exponent stops at 2^30 (some 3.4 years from 100 ms).
  EXPECT_EQ(retry_delay(p, 40, rng), ms{int64_t{100} << 30});
  EXPECT_EQ(retry_delay(p, 1000, rng), ms{int64_t{100} << 30});
  auto l = retry(retry_policy::backoff::linear, ms{int64_t{1} << 40}, ms::max());
  EXPECT_EQ(retry_delay(l, 5, rng), max_backoff_delay);
}

TEST(restart_tracker_test, huge_backoff_saturates) {
  for (double jitter : {0.0, 0.5}) {
    auto p = exact(1000, 1000h, ms{int64_t{1} << 62}, ms::max());
    p.jitter = jitter;
    restart_tracker r(p);
    for (int n = 0; n < 40; ++n) {
      r.record_crash(t0 + n * 1s);
      auto b = r.backoff();
      EXPECT_GE(b, 0ms) << n;
      EXPECT_LE(b, max_backoff_delay) << n;
    }
  }
}

}  // namespace
}  // namespace proctor
