#include "supervision/supervisor.hpp"

#include <gtest/gtest.h>

namespace proctor {
namespace {

using namespace std::chrono_literals;
using ids = std::vector<uint64_t>;
using tp = restart_tracker::clock::time_point;

const tp t0 = tp{} + 1000h;

supervision_policy policy(restart_strategy s, int max_restarts = 3) {
  supervision_policy p;
  p.strategy = s;
  p.max_restarts = max_restarts;
  p.period = 60s;
  p.backoff_min = 20ms;
  p.backoff_max = 2s;
  p.jitter = 0;
  return p;
}

// Children 1..5 in spawn order; 2 has ended.
const std::vector<supervised_child> kids{{1, false}, {2, true}, {3, false}, {4, false}, {5, false}};

TEST(supervisor_test, one_for_one_restarts_the_crashed_child_only) {
  EXPECT_EQ(children_to_restart(restart_strategy::one_for_one, 3, kids), ids{3});
}

TEST(supervisor_test, one_for_all_restarts_every_unended_child) {
  EXPECT_EQ(children_to_restart(restart_strategy::one_for_all, 3, kids), (ids{1, 3, 4, 5}));
}

TEST(supervisor_test, rest_for_one_restarts_the_crashed_and_later_unended_children) {
  EXPECT_EQ(children_to_restart(restart_strategy::rest_for_one, 3, kids), (ids{3, 4, 5}));
  EXPECT_EQ(children_to_restart(restart_strategy::rest_for_one, 1, kids), (ids{1, 3, 4, 5}));
  EXPECT_EQ(children_to_restart(restart_strategy::rest_for_one, 5, kids), ids{5});
}

TEST(supervisor_test, restarts_within_the_intensity_with_a_doubling_backoff) {
  restart_tracker t{policy(restart_strategy::rest_for_one)};
  auto d1 = on_child_crash(t, t0, 4, kids, "boom");
  ASSERT_TRUE(d1.restart);
  EXPECT_EQ(d1.ids, (ids{4, 5}));
  EXPECT_EQ(d1.backoff, 20ms);
  auto d2 = on_child_crash(t, t0 + 1s, 4, kids, "boom");
  ASSERT_TRUE(d2.restart);
  EXPECT_EQ(d2.backoff, 40ms);
  EXPECT_TRUE(d2.reason.empty());
}

TEST(supervisor_test, escalates_past_the_intensity_naming_the_child_and_the_last_crash) {
  restart_tracker t{policy(restart_strategy::one_for_one, 2)};
  EXPECT_TRUE(on_child_crash(t, t0, 7, kids, "a").restart);
  EXPECT_TRUE(on_child_crash(t, t0 + 1s, 7, kids, "b").restart);
  auto d = on_child_crash(t, t0 + 2s, 7, kids, "picker jammed");
  EXPECT_FALSE(d.restart);
  EXPECT_TRUE(d.ids.empty());
  EXPECT_EQ(d.reason, "child 7 crashed more than 2 times within 60000 ms (last: picker jammed)");
}

TEST(supervisor_test, crashes_older_than_the_period_do_not_count) {
  restart_tracker t{policy(restart_strategy::one_for_one, 1)};
  EXPECT_TRUE(on_child_crash(t, t0, 1, kids, "a").restart);
  EXPECT_TRUE(on_child_crash(t, t0 + 61s, 1, kids, "b").restart);
  EXPECT_FALSE(on_child_crash(t, t0 + 62s, 1, kids, "c").restart);
}

}  // namespace
}  // namespace proctor
