// Cron in named time zones (calendar/zone.hpp, the zoned cron_next of calendar/cron.hpp):
// hand-checked fire times across both daylight-saving changes of New York, Berlin and Lord
// Howe (a 30-minute change), a 30-minute offset (Kolkata), a change at midnight (Havana);
// the UTC path unchanged; zone lookups and their one-line errors; and every answer against a
// search minute by minute over UTC instants that uses nothing but the zone's UTC-to-local map.
#include "calendar/zone.hpp"

#include <chrono>
#include <random>

#include <gtest/gtest.h>

#include "calendar/cron.hpp"

namespace proctor::calendar {
namespace {

/// UTC milliseconds of a date and time.
int64_t utc(int y, unsigned mo, unsigned d, int h = 0, int mi = 0, int s = 0) {
  using namespace std::chrono;
  sys_days date = std::chrono::year{y} / std::chrono::month{mo} / std::chrono::day{d};
  return (duration_cast<seconds>(date.time_since_epoch()).count() + h * 3600 + mi * 60 + s) * 1000;
}

time_zone zone(const char* name) {
  auto z = find_zone(name);
  EXPECT_TRUE(z.zone) << name << ": " << z.error;
  return z.zone ? *z.zone : time_zone{};
}

cron_spec spec(const char* text) {
  auto p = parse_cron(text);
  EXPECT_TRUE(p.spec) << text << ": " << p.error;
  return p.spec ? *p.spec : cron_spec{};
}

int64_t next(const char* text, const char* zone_name, int64_t after) {
  auto n = cron_next(spec(text), zone(zone_name), after);
  EXPECT_TRUE(n) << text << " in " << zone_name;
  return n ? *n : -1;
}

/// The local wall-clock time in `z` of UTC milliseconds `ms`, as milliseconds.
int64_t local_ms(const char* z, int64_t ms) {
  return zone(z).local_of(ms / 1000) * 1000;
}

// -- hand-checked -----------------------------------------------------------------------------

TEST(cron_zone, new_york_spring_forward_fires_a_skipped_time_at_the_gaps_end) {
  // 2026-03-08: 02:00 EST (07:00 UTC) becomes 03:00 EDT. 02:30 does not happen that day.
  const char* ny = "America/New_York";
  auto t = next("30 2 * * *", ny, utc(2026, 3, 7, 12));
  EXPECT_EQ(t, utc(2026, 3, 8, 7));  // 03:00 EDT
  EXPECT_EQ(local_ms(ny, t), utc(2026, 3, 8, 3));
  // Once: the next is the next day's 02:30 EDT.
  EXPECT_EQ(next("30 2 * * *", ny, t), utc(2026, 3, 9, 6, 30));
  // The day before, 02:30 EST.
  EXPECT_EQ(next("30 2 * * *", ny, utc(2026, 3, 6, 12)), utc(2026, 3, 7, 7, 30));
}

TEST(cron_zone, new_york_fall_back_fires_a_repeated_time_once_at_its_first_occurrence) {
  // 2026-11-01: 02:00 EDT (06:00 UTC) becomes 01:00 EST. 01:30 happens at 05:30 and 06:30 UTC.
  const char* ny = "America/New_York";
  auto t = next("30 1 * * *", ny, utc(2026, 10, 31, 12));
  EXPECT_EQ(t, utc(2026, 11, 1, 5, 30));                          // 01:30 EDT
  EXPECT_EQ(next("30 1 * * *", ny, t), utc(2026, 11, 2, 6, 30));  // not 06:30 UTC on the 1st
  // From within the second pass of the hour, too.
  EXPECT_EQ(next("30 1 * * *", ny, utc(2026, 11, 1, 6, 10)), utc(2026, 11, 2, 6, 30));
  // A time after the overlap is not held back by it.
  EXPECT_EQ(next("15 2 * * *", ny, utc(2026, 11, 1, 6, 10)), utc(2026, 11, 1, 7, 15));
}

TEST(cron_zone, berlin_both_changes) {
  const char* berlin = "Europe/Berlin";
  // 2026-03-29: 02:00 CET (01:00 UTC) becomes 03:00 CEST.
  auto t = next("30 2 * * *", berlin, utc(2026, 3, 28, 12));
  EXPECT_EQ(t, utc(2026, 3, 29, 1));  // 03:00 CEST
  EXPECT_EQ(local_ms(berlin, t), utc(2026, 3, 29, 3));
  EXPECT_EQ(next("30 2 * * *", berlin, t), utc(2026, 3, 30, 0, 30));
  // 2026-10-25: 03:00 CEST (01:00 UTC) becomes 02:00 CET; 02:30 happens at 00:30 and 01:30 UTC.
  t = next("30 2 * * *", berlin, utc(2026, 10, 24, 12));
  EXPECT_EQ(t, utc(2026, 10, 25, 0, 30));
  EXPECT_EQ(next("30 2 * * *", berlin, t), utc(2026, 10, 26, 1, 30));
  // An ordinary day: 09:00 CET is 08:00 UTC.
  EXPECT_EQ(next("0 9 * * mon-fri", berlin, utc(2026, 11, 28)), utc(2026, 11, 30, 8));
}

TEST(cron_zone, every_minute_across_the_changes) {
  const char* ny = "America/New_York";
  // Spring: 01:59 EST, then 02:00-02:59 (skipped) and 03:00 EDT fire once at 07:00 UTC, then on.
  std::vector<int64_t> got;
  for (int64_t t = utc(2026, 3, 8, 6, 58); got.size() < 4;)
    got.push_back(t = next("* * * * *", ny, t));
  EXPECT_EQ(got, (std::vector<int64_t>{utc(2026, 3, 8, 6, 59), utc(2026, 3, 8, 7),
                                       utc(2026, 3, 8, 7, 1), utc(2026, 3, 8, 7, 2)}));
  // Fall: 01:00-01:59 fire in their first pass; the second pass (06:00-06:59 UTC) is silent.
  got.clear();
  for (int64_t t = utc(2026, 11, 1, 5, 58); got.size() < 3;)
    got.push_back(t = next("* * * * *", ny, t));
  EXPECT_EQ(got, (std::vector<int64_t>{utc(2026, 11, 1, 5, 59), utc(2026, 11, 1, 7),
                                       utc(2026, 11, 1, 7, 1)}));
  // Lord Howe moves its clocks by 30 minutes: 2026-10-04 02:00 (+10:30, 15:30 UTC the day
  // before) becomes 02:30 (+11).
  const char* lh = "Australia/Lord_Howe";
  got.clear();
  for (int64_t t = utc(2026, 10, 3, 15, 28); got.size() < 3;)
    got.push_back(t = next("* * * * *", lh, t));
  EXPECT_EQ(got, (std::vector<int64_t>{utc(2026, 10, 3, 15, 29), utc(2026, 10, 3, 15, 30),
                                       utc(2026, 10, 3, 15, 31)}));
  EXPECT_EQ(local_ms(lh, utc(2026, 10, 3, 15, 30)), utc(2026, 10, 4, 2, 30));
  // 2026-04-05 02:00 (+11, 15:00 UTC the day before) becomes 01:30 (+10:30).
  EXPECT_EQ(next("45 1 * * *", lh, utc(2026, 4, 4, 12)), utc(2026, 4, 4, 14, 45));
  EXPECT_EQ(next("45 1 * * *", lh, utc(2026, 4, 4, 14, 45)), utc(2026, 4, 5, 15, 15));
}

TEST(cron_zone, half_hour_offset_and_a_change_at_midnight) {
  // Kolkata is UTC+05:30 all year.
  EXPECT_EQ(next("0 9 * * *", "Asia/Kolkata", utc(2026, 11, 28)), utc(2026, 11, 28, 3, 30));
  EXPECT_EQ(next("0 * * * *", "Asia/Kolkata", utc(2026, 11, 28, 3, 30)), utc(2026, 11, 28, 4, 30));
  EXPECT_EQ(next("@daily", "Asia/Kolkata", utc(2026, 11, 28)), utc(2026, 11, 28, 18, 30));
  // Havana: 2026-03-08 00:00 CST (05:00 UTC) becomes 01:00 CDT; midnight does not happen.
  EXPECT_EQ(next("@daily", "America/Havana", utc(2026, 3, 7, 12)), utc(2026, 3, 8, 5));
  EXPECT_EQ(next("@daily", "America/Havana", utc(2026, 3, 8, 5)), utc(2026, 3, 9, 4));
}

TEST(cron_zone, utc_is_the_utc_path) {
  for (const char* n : {"", "UTC", "Etc/UTC"}) {
    auto z = find_zone(n);
    ASSERT_TRUE(z.zone) << n;
    EXPECT_TRUE(z.zone->is_utc());
    EXPECT_EQ(z.zone->name(), "UTC");
    EXPECT_TRUE(z.error.empty());
  }
  std::mt19937_64 rng(11);
  for (const char* e : {"*/7 * * * * *", "0 0 * * *", "30 2 * * *", "0 9 13 * fri", "@monthly"}) {
    auto s = spec(e);
    for (int i = 0; i < 50; ++i) {
      int64_t after = utc(2026, 1, 1) + static_cast<int64_t>(rng() % (800LL * 86400 * 1000));
      EXPECT_EQ(cron_next(s, time_zone{}, after), cron_next(s, after)) << e;
      // A zone at UTC+0 without changes gives the same through the database.
      EXPECT_EQ(cron_next(s, zone("Africa/Abidjan"), after), cron_next(s, after)) << e;
    }
  }
}

TEST(cron_zone, lookups) {
  auto berlin = find_zone("Europe/Berlin");
  ASSERT_TRUE(berlin.zone) << berlin.error;
  EXPECT_FALSE(berlin.zone->is_utc());
  EXPECT_EQ(berlin.zone->name(), "Europe/Berlin");
  auto mars = find_zone("Mars/Base");
  EXPECT_FALSE(mars.zone);
  EXPECT_EQ(mars.error,
            "time zone 'Mars/Base': unknown (an IANA name such as Europe/Berlin, or UTC)");
  for (std::string bad : {std::string("utc "), std::string("Europe/Berlin\n"),
                          std::string(300, 'x'), std::string("../../etc/passwd"),
                          std::string("Europe"), std::string("Europe/Ber\0lin", 14)}) {
    auto z = find_zone(bad);
    EXPECT_FALSE(z.zone) << bad;
    EXPECT_NE(z.error.find("unknown"), std::string::npos) << z.error;
    EXPECT_EQ(z.error.find('\n'), std::string::npos) << z.error;
    EXPECT_LT(z.error.size(), 150u) << z.error;
  }
}

// -- against a search minute by minute ----------------------------------------------------------

/// The first fire time after `after` of a seconds-free `s` in `z`, by the definition over UTC
/// minutes: a UTC minute fires if a local minute matches among those its local time newly
/// reaches (past the latest local time reached before it: that takes in the minutes of a
/// skipped gap, and leaves out the second pass of a repeated hour).
int64_t search(const cron_spec& s, const time_zone& z, int64_t after) {
  int64_t u = (after / 60'000) * 60 - 2 * 86400;  // early enough to know what was reached
  int64_t reached = z.local_of(u);
  for (u += 60;; u += 60) {
    int64_t l = z.local_of(u);
    bool fires = false;
    for (int64_t m = reached + 60; m <= l && !fires; m += 60)
      fires = cron_matches(s, m * 1000);
    reached = std::max(reached, l);
    if (fires && u * 1000 > after)
      return u * 1000;
  }
}

TEST(cron_zone, next_agrees_with_a_search_minute_by_minute) {
  struct change {
    const char* zone;
    int64_t at;
  };
  const change changes[] = {{"America/New_York", utc(2026, 3, 8, 7)},
                            {"America/New_York", utc(2026, 11, 1, 6)},
                            {"Europe/Berlin", utc(2026, 3, 29, 1)},
                            {"Europe/Berlin", utc(2026, 10, 25, 1)},
                            {"Australia/Lord_Howe", utc(2026, 4, 4, 15)},
                            {"Australia/Lord_Howe", utc(2026, 10, 3, 15, 30)},
                            {"America/Havana", utc(2026, 3, 8, 5)},
                            {"America/Havana", utc(2026, 11, 1, 5)},
                            {"Asia/Kolkata", utc(2026, 6, 1)}};
  const char* exprs[] = {"* * * * *", "*/7 * * * *",  "30 2 * * *", "0 2 * * *",  "59 1 * * *",
                         "0 * * * *", "15 1-3 * * *", "0 0 * * *",  "30 0 * * 0", "*/30 1,2 * * *"};
  std::mt19937_64 rng(5);
  for (const auto& [name, at] : changes) {
    auto z = zone(name);
    for (const char* e : exprs) {
      auto s = spec(e);
      for (int i = 0; i < 12; ++i) {
        // From up to a day before the change to a few hours after it, to the second.
        int64_t after = at - 86'400'000 + static_cast<int64_t>(rng() % (30LL * 3600 * 1000));
        auto n = cron_next(s, z, after);
        ASSERT_TRUE(n) << e << " in " << name;
        ASSERT_EQ(*n, search(s, z, after)) << e << " in " << name << " after " << after;
      }
    }
  }
}

}  // namespace
}  // namespace proctor::calendar
