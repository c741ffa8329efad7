// The operator commands of the CLI against a real node (docs/command-line.md): tree (text
// in a pipe, JSON), watch (exit codes like wait's), history (before and after the tree's end),
// locks, and bypass (refused unless stuck or forced, durable across a kill -9).
#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using google::protobuf::Value;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::field;
using proctor::test::lines;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::run_result;
using proctor::test::state_of;
using proctor::test::temp_dir;

struct fixture {
  temp_dir dir;
  fs::path ledger = dir.path() / "ledger";
  node n;
  explicit fixture(std::vector<std::string> extra = {})
      : n{dir.path() / "data", 0, std::move(extra)} {
    fs::create_directories(ledger);
  }
  uint64_t submit(const std::string& type, const std::string& args) {
    auto r = n.ctl({"submit", type, "--args-json", args}, 30s);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return parse_id(r.out).value_or(0);
  }
  std::string ledger_args(const std::string& extra = "") const {
    return R"({"steps":2,"ledger_dir":")" + ledger.string() + "\"" + extra + "}";
  }
  /// True once procedure `id` waits for `what` (polled for up to 30 s).
  bool waits_for(uint64_t id, const std::string& what) {
    return eventually(
      [&] {
        auto r = n.ctl({"status", std::to_string(id)}, 10s);
        auto v = parse_json(r.out);
        return v && field(*v, "waiting_for").string_value() == what;
      },
      30s, 20ms);
  }
};

void expect_one_line_error(const run_result& r, const std::string& part) {
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_EQ(r.out, "") << describe(r);
  auto ls = lines(r.err);
  ASSERT_EQ(ls.size(), 1u) << describe(r);
  EXPECT_EQ(ls[0].rfind("error: ", 0), 0u) << describe(r);
  EXPECT_NE(ls[0].find(part), std::string::npos) << describe(r);
}

TEST(cli_operators, tree_prints_an_indented_tree_in_a_pipe_and_nested_json) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.ledger", f.ledger_args(R"(,"children":3,"depth":1)"));
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(id), "--timeout-s", "60"}).exit_code, 0);

  auto r = f.n.ctl({"tree", std::to_string(id)});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out.find('\033'), std::string::npos) << "no colour in a pipe: " << r.out;
  auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 4u) << r.out;
  EXPECT_EQ(ls[0].rfind(std::to_string(id) + " demo.ledger SUCCESS", 0), 0u) << r.out;
  EXPECT_EQ(ls[1].rfind("├─ ", 0), 0u) << r.out;
  EXPECT_EQ(ls[3].rfind("└─ ", 0), 0u) << r.out;

  // Any procedure of the tree names the whole tree.
  auto child = f.n.ctl({"tree", std::to_string(id + 2), "--json"});
  ASSERT_EQ(child.exit_code, 0) << describe(child);
  auto v = parse_json(child.out);
  ASSERT_TRUE(v) << describe(child);
  EXPECT_EQ(field(*v, "id").number_value(), static_cast<double>(id));
  EXPECT_EQ(state_of(*v), "SUCCESS");
  EXPECT_EQ(field(*v, "done").number_value(), 3);
  EXPECT_EQ(field(*v, "total").number_value(), 3);
  EXPECT_GE(field(*v, "duration_ms").number_value(), 0);
  EXPECT_EQ(field(*v, "children").list_value().values_size(), 3);
  EXPECT_TRUE(field(*v, "ended_at").has_string_value());

  expect_one_line_error(f.n.ctl({"tree", "999999"}), "no procedure 999999");

  // A wide tree: its children under a progress bar.
  auto wide = f.submit("demo.ledger", f.ledger_args(R"(,"children":12,"depth":1)"));
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(wide), "--timeout-s", "60"}).exit_code, 0);
  auto w = f.n.ctl({"tree", std::to_string(wide)});
  ASSERT_EQ(w.exit_code, 0) << describe(w);
  EXPECT_NE(w.out.find("children [####################] 12/12 ended"), std::string::npos) << w.out;
  EXPECT_EQ(lines(w.out).size(), 14u) << w.out;
  f.n.kill();
}

/// The history of procedure `id` as JSON, with its entries' kinds.
std::pair<Value, std::vector<std::string>> history_kinds(fixture& f, uint64_t id) {
  auto v = parse_json(f.n.ctl({"history", std::to_string(id), "--json"}).out);
  std::vector<std::string> kinds;
  if (v)
    for (const auto& e : field(*v, "entries").list_value().values())
      kinds.push_back(field(e, "kind").string_value());
  return {v.value_or(Value{}), kinds};
}

// Issue 46.8: an ended tree keeps its whole history (within --history-keep-records), across a
// restart too; past the budget, its summary only.
TEST(cli_operators, history_shows_steps_and_keeps_them_once_the_tree_ended) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.wait_event", R"({"key":"hist-k"})");
  ASSERT_TRUE(f.waits_for(id, "event hist-k")) << f.n.log_tail();

  auto r = f.n.ctl({"history", std::to_string(id), "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto v = parse_json(r.out);
  ASSERT_TRUE(v) << describe(r);
  EXPECT_EQ(field(*v, "note").string_value(), "");
  const auto& es = field(*v, "entries").list_value().values();
  ASSERT_EQ(es.size(), 3) << r.out;
  EXPECT_EQ(field(es[0], "kind").string_value(), "submitted");
  EXPECT_EQ(field(es[1], "kind").string_value(), "step");
  EXPECT_EQ(field(es[1], "state_name").string_value(), "WAIT_EVENT_SUSPEND");
  EXPECT_EQ(field(es[1], "attempt").number_value(), 1);
  EXPECT_TRUE(field(es[1], "at").has_string_value()) << r.out;
  EXPECT_EQ(field(es[2], "kind").string_value(), "suspended");
  EXPECT_NE(field(es[2], "detail").string_value().find("hist-k"), std::string::npos);

  auto text = f.n.ctl({"history", std::to_string(id)});
  ASSERT_EQ(text.exit_code, 0) << describe(text);
  EXPECT_NE(text.out.find("WAIT_EVENT_SUSPEND -> WAIT_EVENT_RESUME"), std::string::npos)
    << text.out;

  ASSERT_EQ(f.n.ctl({"event", "hist-k"}).exit_code, 0);
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(id), "--timeout-s", "60"}).exit_code, 0);
  // Ended: the steps are still there, the summary after them; well past the 50 ms in which
  // records were collected before, and after a restart.
  std::this_thread::sleep_for(300ms);  // (what it checks is that nothing happens)
  for (int restart = 0; restart < 2; ++restart) {
    auto [after, kinds] = history_kinds(f, id);
    ASSERT_GE(kinds.size(), 5u) << (restart ? "after a restart" : "") << f.n.log_tail();
    EXPECT_EQ(kinds[0], "submitted");
    EXPECT_EQ(kinds[1], "step");
    EXPECT_EQ(kinds[2], "suspended");
    EXPECT_EQ(kinds.back(), "summary");
    EXPECT_EQ(field(after, "note").string_value(), "");
    f.n.kill();
    ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  }
  f.n.kill();
}

TEST(cli_operators, history_past_its_budget_keeps_the_summary_only) {
  fixture f({"--history-keep-records", "0"});
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.wait_event", R"({"key":"hist-0"})");
  ASSERT_TRUE(f.waits_for(id, "event hist-0")) << f.n.log_tail();
  ASSERT_EQ(f.n.ctl({"event", "hist-0"}).exit_code, 0);
  ASSERT_EQ(f.n.ctl({"wait", std::to_string(id), "--timeout-s", "60"}).exit_code, 0);
  // Its records other than the summary are collected within some 50 ms of its end.
  ASSERT_TRUE(eventually([&] { return history_kinds(f, id).second.size() == 1; }, 30s))
    << f.n.log_tail();
  auto [v, kinds] = history_kinds(f, id);
  EXPECT_EQ(kinds[0], "summary");
  EXPECT_NE(field(v, "note").string_value().find("no longer available"), std::string::npos);
  f.n.kill();
}

TEST(cli_operators, bypass_is_refused_unless_forced_and_survives_a_kill) {
  fixture f({"--stuck-after-s", "3600"});
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.wait_event", R"({"key":"bp-k"})");
  ASSERT_TRUE(f.waits_for(id, "event bp-k")) << f.n.log_tail();

  expect_one_line_error(f.n.ctl({"bypass", std::to_string(id)}), "is not stuck");
  auto r = f.n.ctl({"bypass", std::to_string(id), "--force"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto v = parse_json(r.out);
  ASSERT_TRUE(v) << describe(r);
  EXPECT_EQ(state_of(*v), "SUCCESS");
  expect_one_line_error(f.n.ctl({"bypass", std::to_string(id), "--force"}), "already ended");
  auto tree = f.n.ctl({"tree", std::to_string(id)});
  EXPECT_NE(tree.out.find("SUCCESS (bypassed)"), std::string::npos) << describe(tree);

  f.n.kill();  // acknowledged: durable
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto w = f.n.ctl({"wait", std::to_string(id), "--timeout-s", "30"});
  EXPECT_EQ(w.exit_code, 0) << describe(w);
  f.n.kill();
}

TEST(cli_operators, watch_exits_like_wait) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto id = f.submit("demo.wait_event", R"({"key":"watch-k"})");
  ASSERT_TRUE(f.waits_for(id, "event watch-k")) << f.n.log_tail();

  auto t0 = std::chrono::steady_clock::now();
  auto r = f.n.ctl({"watch", std::to_string(id), "--interval-ms", "100", "--timeout-s", "1"}, 30s);
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  // In a pipe the tree is printed again only when it changed: once here.
  EXPECT_EQ(lines(r.out).size(), 2u) << r.out;
  EXPECT_NE(r.out.find("WAITING (event watch-k)"), std::string::npos) << r.out;

  auto watching = std::async(std::launch::async, [&] {
    return f.n.ctl({"watch", std::to_string(id), "--interval-ms", "100", "--timeout-s", "60"}, 90s);
  });
  ASSERT_EQ(f.n.ctl({"event", "watch-k"}).exit_code, 0);
  auto done = watching.get();
  EXPECT_EQ(done.exit_code, 0) << describe(done);
  EXPECT_NE(done.out.find(std::to_string(id) + " demo.wait_event SUCCESS"), std::string::npos)
    << done.out;

  auto failing = f.submit("demo.ledger", f.ledger_args(R"(,"fail_at":1)"));
  auto rb =
    f.n.ctl({"watch", std::to_string(failing), "--interval-ms", "100", "--timeout-s", "60"}, 90s);
  EXPECT_EQ(rb.exit_code, 1) << describe(rb);
  EXPECT_NE(rb.out.find("ROLLEDBACK"), std::string::npos) << rb.out;
  f.n.kill();
}

TEST(cli_operators, locks_with_none_held) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto r = f.n.ctl({"locks", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto v = parse_json(r.out);
  ASSERT_TRUE(v && v->has_list_value()) << describe(r);
  EXPECT_EQ(v->list_value().values_size(), 0);
  auto text = f.n.ctl({"locks"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_EQ(text.out, "no locks held or awaited\n");
  f.n.kill();
}

}  // namespace
