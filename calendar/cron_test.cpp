// The cron parser and its next-fire-time search (calendar/cron.hpp), against hand-checked
// dates and against a brute-force search second by second.
#include "calendar/cron.hpp"

#include <chrono>
#include <random>

#include <gtest/gtest.h>

namespace proctor::calendar {
namespace {

/// UTC milliseconds of a date and time (days_from_civil).
int64_t utc(int y, unsigned mo, unsigned d, int h = 0, int mi = 0, int s = 0) {
  using namespace std::chrono;
  sys_days date = std::chrono::year{y} / std::chrono::month{mo} / std::chrono::day{d};
  return (duration_cast<seconds>(date.time_since_epoch()).count() + h * 3600 + mi * 60 + s) * 1000;
}

cron_spec spec(const char* text) {
  auto p = parse_cron(text);
  EXPECT_TRUE(p.spec) << text << ": " << p.error;
  return p.spec ? *p.spec : cron_spec{};
}

int64_t next(const char* text, int64_t after) {
  auto n = cron_next(spec(text), after);
  EXPECT_TRUE(n) << text;
  return n ? *n : -1;
}

TEST(cron, every_five_minutes) {
  EXPECT_EQ(next("*/5 * * * *", utc(2026, 11, 28, 12, 21, 7)), utc(2026, 11, 28, 12, 25));
  // Strictly after: a fire time itself is not returned again.
  EXPECT_EQ(next("*/5 * * * *", utc(2026, 11, 28, 12, 25)), utc(2026, 11, 28, 12, 30));
  EXPECT_EQ(next("*/5 * * * *", utc(2026, 12, 31, 23, 59, 59)), utc(2027, 1, 1));
}

TEST(cron, ranges_lists_steps_and_names) {
  EXPECT_EQ(next("0 9-17/4 * * mon-fri", utc(2026, 11, 28, 12)),  // a Saturday
            utc(2026, 11, 30, 9));
  EXPECT_EQ(next("30 8,20 * jan,JUL *", utc(2026, 11, 28)), utc(2027, 1, 1, 8, 30));
  EXPECT_EQ(next("0 0 * * 7", utc(2026, 11, 28)), utc(2026, 11, 29));  // 7 is Sunday
  EXPECT_EQ(next("0 0 * * sun", utc(2026, 11, 28)), utc(2026, 11, 29));
  EXPECT_EQ(next("15/20 * * * *", utc(2026, 11, 28, 1, 36)), utc(2026, 11, 28, 1, 55));
  EXPECT_EQ(next("@hourly", utc(2026, 11, 28, 1, 36)), utc(2026, 11, 28, 2));
  EXPECT_EQ(next("@yearly", utc(2026, 11, 28, 1, 36)), utc(2027, 1, 1));
  EXPECT_EQ(next("@weekly", utc(2026, 11, 28)), utc(2026, 11, 29));
}

TEST(cron, leap_day_and_month_ends) {
  EXPECT_EQ(next("0 0 29 2 *", utc(2026, 11, 28)), utc(2028, 2, 29));
  EXPECT_EQ(next("0 0 31 * *", utc(2026, 11, 28)), utc(2026, 12, 31));
  EXPECT_FALSE(cron_next(spec("0 0 30 2 *"), utc(2026, 1, 1)));  // never
}

TEST(cron, both_day_fields_restricted_is_either) {
  // The 13th or any Friday (Vixie cron): 2026-12-04 is a Friday before the 13th.
  EXPECT_EQ(next("0 0 13 * fri", utc(2026, 11, 28)), utc(2026, 12, 4));
  // One of them `*`: the other one alone decides.
  EXPECT_EQ(next("0 0 13 * *", utc(2026, 11, 28)), utc(2026, 12, 13));
  EXPECT_EQ(next("0 0 */1 * fri", utc(2026, 11, 28)), utc(2026, 12, 4));
}

TEST(cron, seconds_field) {
  EXPECT_EQ(next("*/3 * * * * *", utc(2026, 11, 28, 0, 0, 1)), utc(2026, 11, 28, 0, 0, 3));
  EXPECT_EQ(next("* * * * * *", utc(2026, 11, 28) + 500), utc(2026, 11, 28, 0, 0, 1));
  EXPECT_EQ(next("10 0 0 * * *", utc(2026, 11, 28, 0, 0, 11)), utc(2026, 11, 29, 0, 0, 10));
}

TEST(cron, errors_name_the_field) {
  struct bad {
    const char* text;
    const char* says;
  };
  for (auto [text, says] :
       {bad{"", "0 fields"}, bad{"* * * *", "4 fields"}, bad{"* * * * * * *", "7 fields"},
        bad{"60 * * * *", "minute field"}, bad{"* 24 * * *", "24 is out of 0-23"},
        bad{"* * 0 * *", "day-of-month field"}, bad{"* * * 13 *", "month field"},
        bad{"* * * foo *", "'foo'"}, bad{"* * * * 8", "day-of-week field"},
        bad{"*/0 * * * *", "step 0"}, bad{"5-1 * * * *", "backwards"},
        bad{"1,,2 * * * *", "empty list item"}, bad{"@reboot", "macro"},
        bad{"a * * * *", "not a minute number"}, bad{"1-2-3 * * * *", "not a number"},
        bad{"*/x * * * *", "step"}, bad{"\n/7 17 * * * *", "\\x0a"}}) {
    auto p = parse_cron(text);
    EXPECT_FALSE(p.spec) << text;
    EXPECT_NE(p.error.find(says), std::string::npos) << text << " -> " << p.error;
    EXPECT_EQ(p.error.find('\n'), std::string::npos);
  }
}

/// cron_next against the definition: the first second after `after` that cron_matches.
TEST(cron, next_agrees_with_a_search_second_by_second) {
  std::mt19937_64 rng(7);
  const char* exprs[] = {"*/7 * * * * *", "13 */5 * * * *", "0 0 * * * *",     "*/5 * * * *",
                         "0 */2 * * *",   "59 23 * * *",    "0 0 1 * *",       "0 12 * * 1-5",
                         "30 2 13 * fri", "0 0 * feb *",    "1-3,58 * * * * *"};
  for (const char* e : exprs) {
    auto s = spec(e);
    for (int i = 0; i < 8; ++i) {
      int64_t after = utc(2026, 1, 1) + static_cast<int64_t>(rng() % (400LL * 86400 * 1000));
      auto n = cron_next(s, after);
      ASSERT_TRUE(n) << e;
      EXPECT_GT(*n, after);
      EXPECT_TRUE(cron_matches(s, *n)) << e;
      // Nothing in between matches: checked second by second over at most a day, else by
      // the minute's first second (only seconds-free expressions get that far).
      int64_t t = (after / 1000 + 1) * 1000;
      int64_t checked = 0;
      for (; t < *n && checked < 86400; t += 1000, ++checked)
        ASSERT_FALSE(cron_matches(s, t)) << e << " matches " << t << " before " << *n;
      for (; t < *n; t += 60'000)
        ASSERT_FALSE(cron_matches(s, t - t % 60'000)) << e;
    }
  }
}

}  // namespace
}  // namespace proctor::calendar
