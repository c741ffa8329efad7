// Join policies through a real node and the CLI, across SIGKILLs (docs/flow-control.md, "Join
// policies"): demo.race's racers wait at gates; the node is killed before the race, and again
// while the losers' cancellation retries an undo held at its gate. The restarted node carries
// the cancellation on: the tree ends SUCCESS with exactly the winner's work in the ledger,
// each loser ROLLEDBACK, cancelled, its history saying so while it runs.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using google::protobuf::Value;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::field;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::state_of;
using proctor::test::temp_dir;

TEST(join_process, a_race_cancelled_across_sigkills_keeps_only_the_winners_work) {
  temp_dir dir;
  node n{dir.path() / "data"};
  auto ledger = dir.path() / "ledger";
  auto gates = dir.path() / "gates";
  fs::create_directories(ledger);
  fs::create_directories(gates);
  ASSERT_TRUE(n.start()) << n.log_tail();
  auto r = n.ctl({"submit", "demo.race", "--args-json",
                  R"({"children":3,"steps":3,"ledger_dir":")" + ledger.string()
                    + R"(","gate_dir":")" + gates.string() + R"("})"},
                 30s);
  ASSERT_EQ(r.exit_code, 0) << describe(r) << n.log_tail();
  auto id = parse_id(r.out).value_or(0);
  ASSERT_NE(id, 0u);
  auto status = [&](uint64_t x) {
    auto s = n.ctl({"status", std::to_string(x)}, 10s);
    return parse_json(s.out).value_or(Value{});
  };
  std::vector<uint64_t> racers;
  ASSERT_TRUE(eventually(
    [&] {
      racers.clear();
      auto s = status(id);  // (the loop's range must not refer into a temporary)
      for (const auto& c : field(s, "children").list_value().values())
        racers.push_back(static_cast<uint64_t>(c.number_value()));
      return racers.size() == 3;
    },
    30s, 20ms));
  n.kill();  // every racer waits at its first gate
  ASSERT_TRUE(n.start()) << n.log_tail();
  std::ofstream{gates / "step.0"}
    .close();  // the race: the first racer ends, the others wait at step 1
  ASSERT_TRUE(eventually(
    [&] {
      return field(status(id), "waiting_for").string_value().find("failing") != std::string::npos;
    },
    30s, 20ms))
    << "the cancellation never reached the held undo: " << status(id).ShortDebugString();
  // While it runs, a loser's history says who cancelled it and why.
  auto h = n.ctl({"history", std::to_string(racers[1])}, 10s);
  EXPECT_NE(h.out.find("cancelled by procedure " + std::to_string(id)), std::string::npos) << h.out;
  n.kill();  // in the middle of the cancellation
  ASSERT_TRUE(n.start()) << n.log_tail();
  std::ofstream{gates / "undo.0"}.close();
  r = n.ctl({"wait", std::to_string(id), "--timeout-s", "60"}, 90s);
  auto end = parse_json(r.out).value_or(Value{});
  ASSERT_EQ(state_of(end), "SUCCESS") << r.out << n.log_tail();
  // Exactly the winner's one step is left; the losers' first steps were undone.
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(ledger))
    files.insert(e.path().filename().string());
  EXPECT_EQ(files,
            (std::set<std::string>{std::to_string(id) + "." + std::to_string(racers[0]) + ".0"}));
  EXPECT_EQ(field(field(end, "result"), "cancelled").number_value(), 2.0) << r.out;
  EXPECT_EQ(field(field(end, "result"), "winner").number_value(), static_cast<double>(racers[0]))
    << r.out;
  for (size_t i = 1; i < racers.size(); ++i) {
    auto s = status(racers[i]);
    EXPECT_EQ(state_of(s), "ROLLEDBACK") << s.ShortDebugString();
    EXPECT_NE(field(s, "error").string_value().find("cancelled: join::any was met"),
              std::string::npos)
      << s.ShortDebugString();
  }
}

}  // namespace
