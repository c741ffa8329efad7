// Recurring schedules across crashes (docs/flow-control.md, "Recurring schedules"): a crash on
// either side of a firing's write, and a seeded random run of crashes, restarts, pauses,
// resumes, deletes and triggers racing the firings (PROCTOR_SEED=<n> replays it); no fire time
// is started twice, checked against every Submitted record the stores were asked to write.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "tests/engine/engine_schedule_fixture.hpp"

namespace proctor::testing {
namespace {

using schedule_fixture::noop;
using schedule_fixture::schedule_test;

/// A firing's write held when the node dies: neither the root nor the decision is durable,
/// and after the restart catch-up runs it, once. A firing durable just before the crash is
/// not run again.
TEST_F(schedule_test, a_crash_on_either_side_of_a_firing_write) {
  start_node();
  ASSERT_EQ(add("c", "* * * * * *", "demo.noop", noop,
                [](pb::Schedule& s) {
                  s.set_catch_up(pb::Schedule::CATCH_UP_ALL);
                  s.set_overlap(pb::Schedule::ALLOW);
                })
              .code(),
            pb::Response::OK);
  auto created = show("c").schedule().created_at_ms();
  ASSERT_TRUE(eventually([&] { return fired("c").size() >= 1; }));
  // Before: every write held from now on, the next firing's among them; then the crash.
  faults_->hold_writes(true);
  std::this_thread::sleep_for(std::chrono::milliseconds{1300});
  auto before = fired("c");
  crash();
  start_node();
  ASSERT_TRUE(eventually([&] { return fired("c").size() >= before.size() + 2; }));
  // After: the crash right after whatever was durable last.
  crash();
  start_node();
  ASSERT_TRUE(eventually([&] { return fired("c").size() >= before.size() + 4; }));
  auto s = show("c").schedule();
  auto times = fired("c");  // fails on a nonce submitted twice
  EXPECT_EQ(s.missed(), 0u);
  EXPECT_EQ(times, fire_times("* * * * * *", created, upto(s, times)));
}

/// Seeded random run: crashes (the store frozen at a random moment, a write in flight or
/// not), restarts, pauses, resumes, triggers, deletes and re-adds racing firings every
/// second. No fire time is submitted twice (by nonce, over every incarnation); every fire
/// time of a schedule with catch-up all and overlap allow, not paused or deleted, is
/// submitted once; each schedule's counts account for each fire time once.
TEST_F(schedule_test, random_crashes_and_changes_racing_firings) {
  const uint64_t seed = seed_from_env();
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  std::printf("PROCTOR_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  start_node();
  auto all = [](pb::Schedule& s) {
    s.set_catch_up(pb::Schedule::CATCH_UP_ALL);
    s.set_overlap(pb::Schedule::ALLOW);
  };
  ASSERT_EQ(add("steady", "* * * * * *", "demo.noop", noop, all).code(), pb::Response::OK);
  auto steady_created = show("steady").schedule().created_at_ms();
  ASSERT_EQ(add("busy", "*/2 * * * * *", "demo.noop", noop, all).code(), pb::Response::OK);
  std::set<uint64_t> triggered;
  bool busy_exists = true;
  for (int k = 0; k < 14; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds{pick(50, 700)});
    switch (pick(0, 7)) {
      case 0:
      case 1: {  // a crash, a write perhaps in flight
        if (pick(0, 1) == 0) {
          faults_->hold_writes(true);
          std::this_thread::sleep_for(std::chrono::milliseconds{pick(0, 600)});
        }
        crash();
        std::this_thread::sleep_for(std::chrono::milliseconds{pick(0, 1500)});
        start_node();
        break;
      }
      case 2:
        restart_node();
        break;
      case 3:
        if (busy_exists)
          (void)sched(pick(0, 1) == 0 ? pb::ScheduleRequest::PAUSE : pb::ScheduleRequest::RESUME,
                      "busy");
        break;
      case 4: {
        auto r = sched(pb::ScheduleRequest::TRIGGER, "steady");
        ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
        EXPECT_TRUE(triggered.insert(r.id()).second);
        break;
      }
      case 5:
        if (busy_exists) {
          ASSERT_EQ(sched(pb::ScheduleRequest::DELETE, "busy").code(), pb::Response::OK);
          busy_exists = false;
        } else {
          ASSERT_EQ(add("busy", "*/2 * * * * *", "demo.noop", noop, all).code(), pb::Response::OK);
          busy_exists = true;
        }
        break;
      default:
        break;
    }
  }
  // Settle: the last fire times decided.
  std::this_thread::sleep_for(std::chrono::milliseconds{1200});
  auto s = show("steady").schedule();
  auto times = fired("steady");  // and "busy"'s below: a nonce submitted twice fails
  (void)fired("busy");
  EXPECT_EQ(s.missed(), 0u);
  EXPECT_EQ(s.skipped(), 0u);
  EXPECT_EQ(times, fire_times("* * * * * *", steady_created, upto(s, times)))
    << "a fire time of 'steady' was lost";
  // Each fire time is exactly one of fired, skipped, missed or paused over: triggers apart
  // (before, they were counted in fired).
  EXPECT_EQ(s.fired(), times.size());
  EXPECT_EQ(s.triggered(), triggered.size());
  if (busy_exists) {
    auto b = show("busy").schedule();
    EXPECT_EQ(b.skipped() + b.missed(), 0u);
  }
}

}  // namespace
}  // namespace proctor::testing
