// Recurring schedules (docs/flow-control.md, "Recurring schedules"): each fire time submits one
// root, nonce "schedule:<name>:<fire_ms>", journaled with the schedule's record in one batch;
// overlap (skip, buffer-one, allow), catch-up after downtime (none, one, all), pause, resume,
// delete, trigger; refusals that change nothing; crashes on either side of a firing's write; a
// seeded random run of crashes, restarts, pauses, resumes, deletes and triggers racing the
// firings (PROCTOR_SEED=<n> replays it). The hidden condition, no fire time started twice, is
// checked against every Submitted record the store was asked to write.
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
using schedule_fixture::written;

TEST_F(schedule_test, each_fire_time_submits_one_root_under_its_nonce) {
  start_node();
  auto r = add("tick", "* * * * * *", "demo.noop", noop,
               [](pb::Schedule& s) { s.set_overlap(pb::Schedule::ALLOW); });
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  ASSERT_EQ(r.schedules_size(), 1);
  auto created = r.schedules(0).schedule().created_at_ms();
  EXPECT_GT(r.schedules(0).next_fire_ms(), created);
  ASSERT_TRUE(eventually([&] { return show("tick").schedule().fired() >= 3; }));
  auto info = show("tick");
  auto times = fired("tick");
  ASSERT_GE(times.size(), 3u);
  // Every fire time from its creation on, once each, in whole seconds.
  EXPECT_EQ(times, fire_times("* * * * * *", created, times.back()));
  ASSERT_GE(info.runs_size(), 3);
  for (const auto& run : info.runs()) {
    EXPECT_NE(run.proc_id(), 0u);
    EXPECT_EQ(wait(run.proc_id()).state(), pb::SUCCESS);
  }
  info = show("tick");
  EXPECT_EQ(info.runs(0).state(), pb::SUCCESS);
  EXPECT_GT(info.next_fire_ms(), info.schedule().decided_until_ms());
  EXPECT_GE(metric("proctor_schedule_firings_total", "tick"), 3);
  EXPECT_GT(metric("proctor_schedule_next_fire_timestamp_seconds", "tick"), created / 1000.0);
}

TEST_F(schedule_test, refusals_say_why_and_change_nothing) {
  start_node();
  ASSERT_EQ(add("ok", "*/5 * * * *", "demo.noop", noop).code(), pb::Response::OK);
  auto records = schedule_records();
  struct bad {
    pb::Response r;
    pb::Response::Code code;
    const char* says;
  };
  for (auto& [r, code, says] : std::vector<bad>{
         {add("a", "61 * * * *", "demo.noop", noop), pb::Response::BAD_REQUEST, "minute field"},
         {add("a", "* * * *", "demo.noop", noop), pb::Response::BAD_REQUEST, "4 fields"},
         {add("a", "0 0 30 2 *", "demo.noop", noop), pb::Response::BAD_REQUEST, "never fires"},
         {add("a", "* * * * *", "demo.noop", noop,
              [](pb::Schedule& s) { s.set_zone("Mars/Base"); }),
          pb::Response::BAD_REQUEST, "time zone 'Mars/Base': unknown"},
         {add("a", "* * * * *", "no.such", noop), pb::Response::UNKNOWN_TYPE, "no.such"},
         {add("a", "* * * * *", "demo.noop", "{not json"), pb::Response::BAD_REQUEST, ""},
         {add("a b", "* * * * *", "demo.noop", noop), pb::Response::BAD_REQUEST, "name"},
         {add("ok", "* * * * *", "demo.noop", noop), pb::Response::REFUSED, "exists"},
         {sched(pb::ScheduleRequest::PAUSE, "nope"), pb::Response::NOT_FOUND, "no schedule 'nope'"},
         {sched(pb::ScheduleRequest::RESUME, "nope"), pb::Response::NOT_FOUND, "nope"},
         {sched(pb::ScheduleRequest::DELETE, "nope"), pb::Response::NOT_FOUND, "nope"},
         {sched(pb::ScheduleRequest::TRIGGER, "nope"), pb::Response::NOT_FOUND, "nope"},
         {sched(pb::ScheduleRequest::SHOW, "nope"), pb::Response::NOT_FOUND, "nope"}}) {
    EXPECT_EQ(r.code(), code) << says << ": " << r.error();
    EXPECT_NE(r.error().find(says), std::string::npos) << r.error();
    EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
  }
  EXPECT_EQ(schedule_records(), records) << "a refused request wrote a record";
  auto list = sched(pb::ScheduleRequest::LIST, "");
  ASSERT_EQ(list.schedules_size(), 1);
  EXPECT_EQ(list.schedules(0).schedule().cron(), "*/5 * * * *");
}

TEST_F(schedule_test, a_zone_reads_the_cron_in_its_local_time) {
  start_node();
  auto r = add("berlin", "30 2 * * *", "demo.noop", noop,
               [](pb::Schedule& s) { s.set_zone("Europe/Berlin"); });
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  ASSERT_EQ(r.schedules_size(), 1);
  const auto& info = r.schedules(0);
  EXPECT_EQ(info.schedule().zone(), "Europe/Berlin");
  auto created = info.schedule().created_at_ms();
  auto next = info.next_fire_ms();
  auto berlin = *calendar::find_zone("Europe/Berlin").zone;
  EXPECT_EQ(next, *calendar::cron_next(*calendar::parse_cron("30 2 * * *").spec, berlin, created));
  // 02:30 in Berlin is 01:30 UTC in winter, 00:30 UTC in summer, within a day from now.
  EXPECT_GT(next, created);
  EXPECT_LE(next, created + 25 * 3'600'000);
  auto utc_of_day = next / 1000 % 86400;
  EXPECT_TRUE(utc_of_day == 5400 || utc_of_day == 1800) << next;
  EXPECT_EQ(berlin.local_of(next / 1000) % 86400, 2 * 3600 + 30 * 60);
  // The zone is journaled: the same after a restart.
  restart_node();
  EXPECT_EQ(show("berlin").next_fire_ms(), next);
  EXPECT_EQ(show("berlin").schedule().zone(), "Europe/Berlin");

  // An unknown zone: refused with its one line, nothing written.
  auto records = schedule_records();
  auto bad =
    add("mars", "30 2 * * *", "demo.noop", noop, [](pb::Schedule& s) { s.set_zone("Mars/Base"); });
  EXPECT_EQ(bad.code(), pb::Response::BAD_REQUEST);
  EXPECT_EQ(bad.error(),
            "time zone 'Mars/Base': unknown (an IANA name such as Europe/Berlin, or UTC)");
  EXPECT_EQ(schedule_records(), records) << "a refused zone wrote a record";
  EXPECT_EQ(sched(pb::ScheduleRequest::SHOW, "mars").code(), pb::Response::NOT_FOUND);

  // Fire times in a zone are UTC instants like any other: every second in Kolkata fires
  // every second.
  r = add("kolkata", "* * * * * *", "demo.noop", noop, [](pb::Schedule& s) {
    s.set_zone("Asia/Kolkata");
    s.set_overlap(pb::Schedule::ALLOW);
  });
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  created = r.schedules(0).schedule().created_at_ms();
  ASSERT_TRUE(eventually([&] { return fired("kolkata").size() >= 3; }));
  auto times = fired("kolkata");
  EXPECT_EQ(times, fire_times("* * * * * *", created, times.back()));
}

TEST_F(schedule_test, pause_resume_trigger_and_delete_are_journaled) {
  start_node();
  ASSERT_EQ(add("p", "* * * * * *", "demo.noop", noop,
                [](pb::Schedule& s) {
                  s.set_paused(true);
                  s.set_overlap(pb::Schedule::ALLOW);
                })
              .code(),
            pb::Response::OK);
  EXPECT_EQ(show("p").next_fire_ms(), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds{2200});
  EXPECT_EQ(show("p").schedule().fired(), 0u) << "a paused schedule fired";
  // Trigger: a run now, paused or not.
  auto t = sched(pb::ScheduleRequest::TRIGGER, "p");
  ASSERT_EQ(t.code(), pb::Response::OK) << t.error();
  ASSERT_NE(t.id(), 0u);
  EXPECT_EQ(wait(t.id()).state(), pb::SUCCESS);
  auto info = show("p");
  EXPECT_EQ(info.schedule().fired(), 0u) << "a trigger is not a fire time";
  EXPECT_EQ(info.schedule().triggered(), 1u);
  ASSERT_EQ(info.runs_size(), 1);
  EXPECT_TRUE(info.runs(0).manual());
  EXPECT_TRUE(fired("p").empty());
  // Resume: from the next fire time after now (what came while paused is not caught up).
  auto resumed_at = wall_ms();
  ASSERT_EQ(sched(pb::ScheduleRequest::RESUME, "p").code(), pb::Response::OK);
  ASSERT_TRUE(eventually([&] { return fired("p").size() >= 2; }));
  EXPECT_GT(fired("p").front(), resumed_at - 1000);
  // Pause again: kept across a restart.
  ASSERT_EQ(sched(pb::ScheduleRequest::PAUSE, "p").code(), pb::Response::OK);
  auto n = fired("p").size();
  restart_node();
  std::this_thread::sleep_for(std::chrono::milliseconds{1500});
  EXPECT_TRUE(show("p").schedule().paused());
  EXPECT_EQ(fired("p").size(), n) << "a paused schedule fired after a restart";
  // Delete: gone, across a restart too; the name can be taken again.
  ASSERT_EQ(sched(pb::ScheduleRequest::DELETE, "p").code(), pb::Response::OK);
  EXPECT_EQ(sched(pb::ScheduleRequest::SHOW, "p").code(), pb::Response::NOT_FOUND);
  restart_node();
  EXPECT_EQ(sched(pb::ScheduleRequest::LIST, "").schedules_size(), 0);
  ASSERT_EQ(add("p", "*/5 * * * *", "demo.noop", noop).code(), pb::Response::OK);
  restart_node();
  auto list = sched(pb::ScheduleRequest::LIST, "");
  ASSERT_EQ(list.schedules_size(), 1);
  EXPECT_EQ(list.schedules(0).schedule().cron(), "*/5 * * * *");
  EXPECT_EQ(list.schedules(0).schedule().fired(), 0u);
}

TEST_F(schedule_test, overlap_skip_and_buffer_one_wait_for_the_running_one) {
  start_node();
  auto waits = [](const char* key) { return std::string(R"({"key":")") + key + R"("})"; };
  ASSERT_EQ(add("s", "* * * * * *", "demo.wait_event", waits("gate-s")).code(), pb::Response::OK);
  ASSERT_EQ(add("b", "* * * * * *", "demo.wait_event", waits("gate-b"),
                [](pb::Schedule& s) { s.set_overlap(pb::Schedule::BUFFER_ONE); })
              .code(),
            pb::Response::OK);
  ASSERT_TRUE(eventually(
    [&] { return show("s").schedule().skipped() >= 2 && show("b").schedule().skipped() >= 1; }));
  EXPECT_EQ(show("s").schedule().fired(), 1u);
  auto b = show("b");
  EXPECT_EQ(b.schedule().fired(), 1u);
  EXPECT_NE(b.schedule().buffered_ms(), 0) << "buffer-one holds a fire time";
  EXPECT_GE(metric("proctor_schedule_skipped_total", "s"), 2);
  // The running one ends: the held fire time is submitted (once), under its own nonce.
  auto held = b.schedule().buffered_ms();
  ASSERT_EQ(event("gate-b", "{}").code(), pb::Response::OK);
  ASSERT_TRUE(eventually([&] { return show("b").schedule().fired() == 2; }));
  auto times = fired("b");
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times.back(), held);
  EXPECT_EQ(show("s").schedule().fired(), 1u);
}

/// Four schedules, every second, down for ~3.5 s: `all` runs every fire time missed, `one`
/// the latest, `none` none, `all` with a window of 1.5 s only those within it; each fire time
/// is fired, skipped or missed, exactly once.
TEST_F(schedule_test, catch_up_decides_what_came_while_down) {
  start_node();
  const std::vector<std::pair<const char*, pb::Schedule::CatchUp>> policies = {
    {"all", pb::Schedule::CATCH_UP_ALL},
    {"one", pb::Schedule::CATCH_UP_ONE},
    {"none", pb::Schedule::CATCH_UP_NONE},
    {"windowed", pb::Schedule::CATCH_UP_ALL}};
  for (auto [name, policy] : policies)
    ASSERT_EQ(add(name, "* * * * * *", "demo.noop", noop,
                  [policy = policy, w = std::string(name) == "windowed"](pb::Schedule& s) {
                    s.set_catch_up(policy);
                    s.set_overlap(pb::Schedule::ALLOW);
                    if (w)
                      s.set_catch_up_window_ms(1500);
                  })
                .code(),
              pb::Response::OK);
  // Each has fired before the crash: the checks below read the gap a catch-up leaves after
  // the last fire time before it. (Waiting for "none" alone flaked under load: "windowed",
  // added last, had not fired yet, so its first fired time came after the restart and the
  // fire times it missed lay before every fired one, in no gap.)
  ASSERT_TRUE(eventually([&] {
    for (const char* n : {"all", "one", "none", "windowed"})
      if (fired(n).empty())
        return false;
    return true;
  }));
  std::map<std::string, int64_t> created;
  for (const char* n : {"all", "one", "none", "windowed"})
    created[n] = show(n).schedule().created_at_ms();
  crash();
  std::this_thread::sleep_for(std::chrono::milliseconds{3500});
  start_node();
  auto restarted = wall_ms();
  // Caught up, and each has fired once more since (by its cron, not by catch-up).
  ASSERT_TRUE(eventually([&] {
    for (const char* n : {"all", "one", "none", "windowed"}) {
      auto t = fired(n);
      if (t.empty() || t.back() <= restarted)
        return false;
    }
    return true;
  }));
  for (const char* n : {"all", "one", "none", "windowed"}) {
    auto s = show(n).schedule();
    auto times = fired(n);
    auto expected = fire_times("* * * * * *", created[n], upto(s, times));
    // Accounting: every fire time up to the decided one was fired, skipped or missed.
    EXPECT_EQ(times.size() + s.skipped() + s.missed(), expected.size()) << n;
    // Largest gap between consecutive fired fire times (seconds).
    int64_t gap = 0;
    for (size_t i = 1; i < times.size(); ++i)
      gap = std::max(gap, (times[i] - times[i - 1]) / 1000);
    if (std::string(n) == "all") {
      EXPECT_EQ(s.missed(), 0u);
      EXPECT_EQ(times, expected) << "catch-up all lost a fire time";
    } else if (std::string(n) == "windowed") {
      // Down ~3.5 s, a window of 1.5 s: the older ones are missed.
      EXPECT_GE(s.missed(), 1u);
      EXPECT_LE(s.missed(), static_cast<uint64_t>(gap - 1));
    } else if (std::string(n) == "one") {
      EXPECT_GE(s.missed(), 2u);
      EXPECT_GE(gap, 2);
    } else {
      EXPECT_GE(s.missed(), 3u);
      EXPECT_EQ(static_cast<uint64_t>(gap - 1), s.missed()) << "none ran a missed fire time";
    }
  }
}

}  // namespace
}  // namespace proctor::testing
