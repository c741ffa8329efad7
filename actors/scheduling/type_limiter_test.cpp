#include "actors/scheduling/type_limiter.hpp"

#include <gtest/gtest.h>

namespace proctor {
namespace {

using namespace std::chrono_literals;
using clock_t_ = type_limiter::clock;

TEST(type_limiter, counts_running_steps_up_to_the_limit_and_says_why_it_holds_one_back) {
  type_limiter l;
  l.declare("x", type_limits{2, 0, 1s});
  auto now = clock_t_::now();
  EXPECT_TRUE(l.limited("x"));
  EXPECT_TRUE(l.admit("x", true, now).ok);
  EXPECT_TRUE(l.admit("x", false, now).ok);
  auto v = l.admit("x", false, now);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.why, "type limit x: 2 of 2 running");
  EXPECT_FALSE(v.retry_at);  // a step's end wakes it, not a clock
  EXPECT_EQ(l.room("x", 5, 5, now), (std::pair<size_t, size_t>{0, 0}));
  l.ended("x");
  EXPECT_EQ(l.room("x", 5, 5, now), (std::pair<size_t, size_t>{1, 0}));
  EXPECT_EQ(l.room("x", 0, 5, now), (std::pair<size_t, size_t>{0, 1}));
  EXPECT_TRUE(l.admit("x", false, now).ok);
  l.refund("x", false);
  EXPECT_EQ(l.views().at(0).running, 1u);
}

TEST(type_limiter, a_type_without_limits_is_counted_but_never_held_back) {
  type_limiter l;
  l.declare("free", {});
  auto now = clock_t_::now();
  EXPECT_FALSE(l.limited("free"));
  for (int i = 0; i < 100; ++i)
    EXPECT_TRUE(l.admit("free", true, now).ok);
  EXPECT_EQ(l.views().at(0).running, 100u);
  EXPECT_TRUE(l.admit("never.declared", true, now).ok);
}

TEST(type_limiter, starts_take_tokens_that_come_back_at_the_rate_steps_take_none) {
  type_limiter l;
  l.declare("x", type_limits{0, 2, 100ms});  // 2 starts per 100 ms, bursts of 2
  auto t0 = clock_t_::now();
  EXPECT_TRUE(l.admit("x", true, t0).ok);
  EXPECT_TRUE(l.admit("x", true, t0).ok);
  auto v = l.admit("x", true, t0);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.why, "type rate x: 2 starts per 100ms");
  ASSERT_TRUE(v.retry_at);
  auto wait_ms = std::chrono::duration<double, std::milli>(*v.retry_at - t0).count();
  EXPECT_NEAR(wait_ms, 50, 1);
  EXPECT_TRUE(l.admit("x", false, t0).ok) << "a procedure under way needs no token";
  EXPECT_EQ(l.room("x", 3, 3, t0), (std::pair<size_t, size_t>{3, 0}));
  // Half a period later one token is back, a whole period later two (never more: the burst).
  EXPECT_EQ(l.room("x", 0, 5, t0 + 50ms), (std::pair<size_t, size_t>{0, 1}));
  EXPECT_EQ(l.room("x", 0, 5, t0 + 1s), (std::pair<size_t, size_t>{0, 2}));
  EXPECT_FALSE(l.next_token("x", t0 + 1s));
  EXPECT_TRUE(l.admit("x", true, t0 + 1s).ok);
  EXPECT_TRUE(l.admit("x", true, t0 + 1s).ok);
  EXPECT_FALSE(l.admit("x", true, t0 + 1s).ok);
  l.refund("x", true);
  EXPECT_TRUE(l.admit("x", true, t0 + 1s).ok) << "a refund gives its token back";
}

TEST(type_limiter, an_operator_overrides_the_code_and_clearing_goes_back_to_it) {
  type_limiter l;
  l.declare("x", type_limits{1, 0, 1s});
  auto now = clock_t_::now();
  EXPECT_TRUE(l.admit("x", false, now).ok);
  EXPECT_FALSE(l.admit("x", false, now).ok);
  l.override_limits("x", type_limits{3, 0, 1s}, 1234, now);
  auto views = l.views();
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].effective.max_running, 3u);
  EXPECT_EQ(views[0].code.max_running, 1u);
  EXPECT_EQ(views[0].set_at_ms, 1234);
  ASSERT_TRUE(views[0].operator_set);
  EXPECT_TRUE(l.admit("x", false, now).ok) << "the count from before the change holds";
  EXPECT_TRUE(l.admit("x", false, now).ok);
  EXPECT_FALSE(l.admit("x", false, now).ok);
  l.override_limits("x", type_limits{}, 1300, now);  // no limits at all
  EXPECT_FALSE(l.limited("x"));
  EXPECT_TRUE(l.admit("x", false, now).ok);
  l.override_limits("x", std::nullopt, 0, now);  // back to the code's 1
  EXPECT_TRUE(l.limited("x"));
  EXPECT_FALSE(l.views()[0].operator_set);
  EXPECT_FALSE(l.admit("x", false, now).ok);
  // A rate set on a live node starts with a full bucket.
  l.override_limits("x", type_limits{0, 3, 1s}, 1400, now);
  EXPECT_EQ(l.room("x", 0, 10, now), (std::pair<size_t, size_t>{0, 3}));
}

TEST(type_limiter, describes_limits_for_people) {
  EXPECT_EQ(type_limiter::describe({}), "no limits");
  EXPECT_EQ(type_limiter::describe(type_limits{10, 0, 1s}), "at most 10 running");
  EXPECT_EQ(type_limiter::describe(type_limits{10, 100, 60s}),
            "at most 10 running, 100 starts per 1m");
  EXPECT_EQ(period_text(250ms), "250ms");
  EXPECT_EQ(period_text(2h), "2h");
}

}  // namespace
}  // namespace proctor
