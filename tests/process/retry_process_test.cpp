// `proctor retry` and `proctor resubmit` through a real node and the CLI, across a SIGKILL
// (docs/flow-control.md): a retry is acknowledged once journaled, the node is killed at once,
// and the restarted node carries the procedure on to SUCCESS with exactly its effects; a
// resubmit of a ROLLEDBACK tree likewise, linked to the old one, and answered with the same
// id when sent again.
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

struct fixture {
  temp_dir dir;
  node n{dir.path() / "data"};
  fs::path ledger = dir.path() / "ledger";
  fs::path gates = dir.path() / "gates";

  fixture() {
    fs::create_directories(ledger);
    fs::create_directories(gates);
  }

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
  std::string wait(uint64_t id) {
    auto r = n.ctl({"wait", std::to_string(id), "--timeout-s", "60"}, 90s);
    return state_of(parse_json(r.out).value_or(Value{}));
  }
  /// The ledger files of root `id` (without the "<id>.<id>." prefix).
  std::set<std::string> effects(uint64_t id) {
    std::set<std::string> out;
    auto prefix = std::to_string(id) + "." + std::to_string(id) + ".";
    for (const auto& e : fs::directory_iterator(ledger)) {
      auto name = e.path().filename().string();
      if (name.rfind(prefix, 0) == 0)
        out.insert(name.substr(prefix.size()));
    }
    return out;
  }
};

TEST(retry_process, a_retry_acknowledged_before_a_sigkill_carries_the_procedure_to_success) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  auto fix = f.dir.path() / "fix";
  auto id = f.submit("demo.forward", R"({"ledger_dir":")" + f.ledger.string() + R"(","fix_file":")"
                                       + fix.string() + R"("})");
  ASSERT_NE(id, 0u);
  // Past its point of no return, FINISH fails three times: FAILED, for an operator.
  ASSERT_TRUE(eventually([&] { return state_of(f.status(id)) == "FAILED"; }, 30s, 20ms))
    << f.status(id).ShortDebugString();
  auto r = f.n.ctl({"resubmit", std::to_string(id)}, 10s);
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("proctor retry " + std::to_string(id)), std::string::npos) << r.err;

  std::ofstream{fix} << "fixed";
  r = f.n.ctl({"retry", std::to_string(id)}, 30s);
  ASSERT_EQ(r.exit_code, 0) << describe(r) << f.n.log_tail();
  EXPECT_NE(state_of(parse_json(r.out).value_or(Value{})), "FAILED") << r.out;
  f.n.kill();  // at once: the step may or may not have run
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  EXPECT_EQ(f.wait(id), "SUCCESS") << f.n.log_tail();
  EXPECT_EQ(f.effects(id), (std::set<std::string>{"prepared", "committed", "finished"}));
  // Ended: nothing more to retry.
  r = f.n.ctl({"retry", std::to_string(id)}, 10s);
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("already ended SUCCESS"), std::string::npos) << r.err;
  r = f.n.ctl({"retry", "999999"}, 10s);
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("no procedure 999999"), std::string::npos) << r.err;
}

TEST(retry_process, a_resubmit_acknowledged_before_a_sigkill_runs_the_tree_again) {
  fixture f;
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  // Its first step waits at a closed gate; aborted there, the tree rolls back (its undo's
  // gate is open).
  std::ofstream{f.gates / "undo.0"}.close();
  auto args = R"({"ledger_dir":")" + f.ledger.string() + R"(","gate_dir":")" + f.gates.string()
              + R"(","steps":3})";
  auto old = f.submit("demo.ledger", args);
  ASSERT_NE(old, 0u);
  auto r = f.n.ctl({"abort", std::to_string(old)}, 10s);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  ASSERT_EQ(f.wait(old), "ROLLEDBACK");
  for (int s = 0; s < 3; ++s)
    std::ofstream{f.gates / ("step." + std::to_string(s))};
  r = f.n.ctl({"resubmit", std::to_string(old)}, 30s);
  ASSERT_EQ(r.exit_code, 0) << describe(r) << f.n.log_tail();
  auto fresh = parse_id(r.out).value_or(0);
  ASSERT_NE(fresh, 0u) << r.out;
  ASSERT_NE(fresh, old);
  f.n.kill();
  ASSERT_TRUE(f.n.start()) << f.n.log_tail();
  EXPECT_EQ(f.wait(fresh), "SUCCESS") << f.n.log_tail();
  EXPECT_EQ(f.effects(fresh), (std::set<std::string>{"0", "1", "2"}));
  EXPECT_TRUE(f.effects(old).empty());
  EXPECT_EQ(field(f.status(fresh), "resubmitted_from").number_value(), static_cast<double>(old));
  EXPECT_EQ(field(f.status(old), "resubmitted_as").number_value(), static_cast<double>(fresh));
  // Sent again: the same tree, not a second one.
  r = f.n.ctl({"resubmit", std::to_string(old)}, 30s);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(parse_id(r.out).value_or(0), fresh);
  EXPECT_NE(r.err.find("resubmitted already"), std::string::npos) << r.err;
  r = f.n.ctl({"history", std::to_string(old)}, 10s);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("by an operator as procedure " + std::to_string(fresh)), std::string::npos)
    << r.out;
}

}  // namespace
