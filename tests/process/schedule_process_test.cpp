// Recurring schedules through a real proctord and the CLI, across SIGKILLs (docs/flow-control.md,
// "Recurring schedules"): a schedule firing every 2 s (the cron's seconds field) with catch-up
// all and overlap allow is killed just before, at and just after its fire times; after each
// restart every fire time since it was added has exactly one run (its recent runs and the
// node's roots agree, no fire time twice, none lost). Mistakes are one line, exit code 1, and
// change nothing.
#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <thread>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

using namespace std::chrono_literals;
using google::protobuf::Value;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::field;
using proctor::test::node;
using proctor::test::parse_json;
using proctor::test::temp_dir;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

struct fixture {
  temp_dir dir;
  node n{dir.path() / "data"};

  /// `schedule show NAME --json`'s one entry (a null Value on failure).
  Value show(const std::string& name) {
    auto r = n.ctl({"schedule", "show", name, "--json"}, 10s);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    auto all = parse_json(r.out);
    if (all && all->has_list_value() && all->list_value().values_size() == 1)
      return all->list_value().values(0);
    return Value{};
  }
  int64_t num(const Value& v, const char* key) {
    return static_cast<int64_t>(field(v, key).number_value());
  }
  /// The roots the node holds of `type`.
  size_t roots_of(const std::string& type) {
    auto r = n.ctl({"list", "--json"}, 10s);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    size_t k = 0;
    auto all = parse_json(r.out);
    if (all && all->has_list_value())
      for (const auto& v : all->list_value().values())
        k += field(v, "type").string_value() == type;
    return k;
  }
};

TEST(schedule_process, sigkill_around_firings_starts_each_fire_time_exactly_once) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto r = f.n.ctl({"schedule", "add", "tick", "demo.noop", "--cron", "*/2 * * * * *",
                    "--args-json", R"({"steps":2})", "--overlap", "allow", "--catch-up", "all"},
                   10s);
  ASSERT_EQ(r.exit_code, 0) << describe(r) << f.n.log_tail();
  EXPECT_NE(r.out.find("next fire"), std::string::npos) << r.out;
  ASSERT_TRUE(eventually([&] { return f.num(f.show("tick"), "fired") >= 1; }, 20s, 100ms));
  // Three kills: 30 ms before a fire time, at it (the firing's write under way), 30 ms after.
  for (int offset : {-30, 2, 30}) {
    auto next = f.num(f.show("tick"), "next_fire_ms");
    ASSERT_GT(next, 0);
    std::this_thread::sleep_for(
      std::chrono::milliseconds{std::max<int64_t>(0, next + offset - now_ms())});
    f.n.kill();
    ASSERT_TRUE(f.n.start()) << f.n.log_tail();
    auto fired = f.num(f.show("tick"), "fired");
    ASSERT_TRUE(eventually([&] { return f.num(f.show("tick"), "fired") >= fired + 1; }, 20s, 100ms))
      << f.n.log_tail();
  }
  auto s = f.show("tick");
  auto runs = field(s, "runs").list_value();
  // Every fire time from the first run's to the last decided one has one run: 2 s apart, no
  // repeats, no gaps, each its own root.
  std::set<int64_t> fire_times;
  std::set<double> ids;
  for (const auto& run : runs.values()) {
    EXPECT_TRUE(fire_times.insert(f.num(run, "fire_ms")).second)
      << "fire time " << f.num(run, "fire_ms") << " ran twice";
    ids.insert(field(run, "id").number_value());
  }
  ASSERT_GE(fire_times.size(), 4u);
  EXPECT_EQ(*fire_times.rbegin() - *fire_times.begin(),
            2000 * static_cast<int64_t>(fire_times.size() - 1))
    << "a fire time was lost";
  EXPECT_EQ(ids.size(), fire_times.size());
  EXPECT_EQ(f.num(s, "missed"), 0);
  EXPECT_EQ(f.num(s, "skipped"), 0);
  EXPECT_EQ(static_cast<size_t>(f.num(s, "fired")), fire_times.size());
  EXPECT_EQ(f.roots_of("demo.noop"), fire_times.size()) << "a root without its run";
}

TEST(schedule_process, mistakes_are_one_line_exit_1_and_change_nothing) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto r = f.n.ctl({"schedule", "add", "ok", "demo.noop", "--cron", "@hourly", "--args-json",
                    R"({"steps":1})", "--paused"},
                   10s);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  struct bad {
    std::vector<std::string> args;
    const char* says;
  };
  for (const auto& [args, says] : std::vector<bad>{
         {{"schedule", "add", "x", "demo.noop", "--cron", "*/5 * * *"}, "4 fields"},
         {{"schedule", "add", "x", "demo.noop", "--cron", "* 25 * * *"}, "hour field"},
         {{"schedule", "add", "x", "demo.noop", "--cron", "* * * * *", "--zone", "Mars/Base"},
          "time zone 'Mars/Base': unknown (an IANA name such as Europe/Berlin, or UTC)"},
         {{"schedule", "add", "x", "demo.nop", "--cron", "* * * * *"}, "demo.nop"},
         {{"schedule", "add", "ok", "demo.noop", "--cron", "* * * * *"}, "exists"},
         {{"schedule", "add", "x", "demo.noop", "--cron", "* * * * *", "--overlap", "maybe"},
          "--overlap"},
         {{"schedule", "add", "x", "demo.noop", "--cron", "* * * * *", "--jitter", "soon"},
          "--jitter"},
         {{"schedule", "pause", "nope"}, "no schedule 'nope'"},
         {{"schedule", "resume", "nope"}, "no schedule 'nope'"},
         {{"schedule", "delete", "nope"}, "no schedule 'nope'"},
         {{"schedule", "trigger", "nope"}, "no schedule 'nope'"},
         {{"schedule", "show", "nope"}, "no schedule 'nope'"}}) {
    auto got = f.n.ctl(args, 10s);
    EXPECT_EQ(got.exit_code, 1) << describe(got);
    EXPECT_NE(got.err.find(says), std::string::npos) << describe(got);
    EXPECT_EQ(std::count(got.err.begin(), got.err.end(), '\n'), 1) << got.err;
  }
  auto list = f.n.ctl({"schedule", "list", "--json"}, 10s);
  ASSERT_EQ(list.exit_code, 0);
  auto all = parse_json(list.out);
  ASSERT_TRUE(all && all->has_list_value());
  ASSERT_EQ(all->list_value().values_size(), 1);
  EXPECT_EQ(field(all->list_value().values(0), "cron").string_value(), "@hourly");
  EXPECT_TRUE(field(all->list_value().values(0), "paused").bool_value());
  // The text list names it; trigger, pause state and delete through the CLI.
  auto text = f.n.ctl({"schedule", "list"}, 10s);
  EXPECT_NE(text.out.find("ok"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("paused"), std::string::npos) << text.out;
  auto t = f.n.ctl({"schedule", "trigger", "ok"}, 10s);
  ASSERT_EQ(t.exit_code, 0) << describe(t);
  EXPECT_EQ(f.n.ctl({"wait", proctor::test::trim(t.out), "--timeout-s", "30"}, 60s).exit_code, 0);
  EXPECT_EQ(f.n.ctl({"schedule", "delete", "ok"}, 10s).exit_code, 0);
  f.n.kill();
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  list = f.n.ctl({"schedule", "list"}, 10s);
  EXPECT_NE(list.out.find("no schedules"), std::string::npos) << list.out;
}

}  // namespace
