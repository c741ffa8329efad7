// Per-type limits through a real node and the CLI, across a SIGKILL (docs/flow-control.md):
// an operator's limits are acknowledged once journaled and hold after a crash; a start held
// back by the rate says why, survives the crash held, and runs once the limits are cleared.
#include <chrono>
#include <string>

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
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::state_of;
using proctor::test::temp_dir;

struct fixture {
  temp_dir dir;
  node n{dir.path() / "data"};

  uint64_t submit(const std::string& type, const std::string& args) {
    auto r = n.ctl({"submit", type, "--args-json", args}, 30s);
    EXPECT_EQ(r.exit_code, 0) << describe(r) << n.log_tail();
    return parse_id(r.out).value_or(0);
  }
  Value status(uint64_t id) {
    auto r = n.ctl({"status", std::to_string(id)}, 10s);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return parse_json(r.out).value_or(Value{});
  }
  /// The `limits --json` entry of `type` (a null Value if missing).
  Value limits_of(const std::string& type) {
    auto r = n.ctl({"limits", "--json"}, 10s);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    auto all = parse_json(r.out);
    if (all && all->has_list_value())
      for (const auto& v : all->list_value().values())
        if (field(v, "type").string_value() == type)
          return v;
    return Value{};
  }
  /// True once `id` is RUNNABLE and held back by `reason` (a prefix of its waiting_for).
  bool held(uint64_t id, const std::string& reason) {
    return eventually(
      [&] {
        auto s = status(id);
        return state_of(s) == "RUNNABLE"
               && field(s, "waiting_for").string_value().rfind(reason, 0) == 0;
      },
      20s, 20ms);
  }
};

TEST(limits_process, an_operators_limits_survive_sigkill_and_hold_back_starts_until_cleared) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto r = f.n.ctl({"limits", "set", "demo.noop", "--rate", "1/1h", "--max-running", "3"}, 10s);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("demo.noop"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1/1h"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("operator"), std::string::npos) << r.out;

  // One start per hour, in a bucket of one: the first runs, the second is held back.
  auto first = f.submit("demo.noop", R"({"steps":3})");
  EXPECT_EQ(f.n.ctl({"wait", std::to_string(first), "--timeout-s", "30"}, 60s).exit_code, 0);
  auto second = f.submit("demo.noop", R"({"steps":3})");
  ASSERT_TRUE(f.held(second, "type rate demo.noop: 1 starts per 1h"))
    << describe(f.n.ctl({"status", std::to_string(second)}, 10s));
  auto l = f.limits_of("demo.noop");
  EXPECT_EQ(field(l, "waiting").number_value(), 1) << r.out;
  EXPECT_GE(field(l, "throttled").number_value(), 1);

  // A crash: the limits were acknowledged, so they are in the journal. The bucket starts
  // full again (tokens are not journaled): the held start runs, the next one is held.
  f.n.kill();
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  l = f.limits_of("demo.noop");
  EXPECT_EQ(field(l, "source").string_value(), "operator");
  EXPECT_EQ(field(l, "rate").number_value(), 1);
  EXPECT_EQ(field(l, "per_ms").number_value(), 3'600'000);
  EXPECT_EQ(field(l, "max_running").number_value(), 3);
  EXPECT_EQ(f.n.ctl({"wait", std::to_string(second), "--timeout-s", "30"}, 60s).exit_code, 0);
  auto third = f.submit("demo.noop", R"({"steps":2})");
  ASSERT_TRUE(f.held(third, "type rate demo.noop: 1 starts per 1h"));

  // Cleared: back to the code's (none); the held start goes at once.
  r = f.n.ctl({"limits", "clear", "demo.noop"}, 10s);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(f.n.ctl({"wait", std::to_string(third), "--timeout-s", "30"}, 60s).exit_code, 0);
  f.n.kill();
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  l = f.limits_of("demo.noop");
  EXPECT_EQ(field(l, "source").string_value(), "code");
  EXPECT_EQ(field(l, "rate").number_value(), 0);
}

TEST(limits_process, mistakes_are_one_line_and_change_nothing) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto r = f.n.ctl({"limits", "set", "demo.leger", "--max-running", "2"}, 10s);
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("did you mean 'demo.ledger'"), std::string::npos) << r.err;
  r = f.n.ctl({"limits", "set", "demo.ledger", "--rate", "5/fortnight"}, 10s);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  EXPECT_NE(r.err.find("N/PERIOD"), std::string::npos) << r.err;
  r = f.n.ctl({"limits", "set", "demo.ledger"}, 10s);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  auto l = f.limits_of("demo.ledger");
  EXPECT_EQ(field(l, "source").string_value(), "code");
  EXPECT_EQ(field(l, "max_running").number_value(), 0);
}

}  // namespace
