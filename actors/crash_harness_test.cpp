// The crash harness on the demo procedures, and on a procedure that is not crash-safe (the
// harness must catch it).
#include "actors/crash_harness.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "demo.pb.h"
#include "procedures/demo.hpp"
#include "procedures/state_machine.hpp"

namespace proctor::testing {
namespace {

namespace fs = std::filesystem;

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
    ++n;
  return n;
}

/// Not idempotent: every run of its step appends a line, so a re-run after a crash leaves
/// two lines where one was meant.
class appender : public state_machine<pb::FlakyData, pb::FlakyState> {
public:
  appender() {
    on(pb::FLAKY_PREPARE, &appender::append, &appender::nothing);
    on(pb::FLAKY_RISKY, &appender::finish, &appender::nothing);
  }

private:
  outcome append(pb::FlakyData& d, context&) {
    std::ofstream(d.ledger_dir() + "/log", std::ios::app) << "x\n";
    return next(pb::FLAKY_RISKY);
  }
  outcome finish(pb::FlakyData&, context&) { return done(); }
  void nothing(pb::FlakyData&, context&) {}
};

class crash_harness_test : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/proctor-crash-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ledger_ = dir_ + "/ledger";
    fs::create_directories(ledger_);
    register_demo_procedures(types_);
    types_.add<appender>("test.appender");
  }
  void TearDown() override { fs::remove_all(dir_); }

  crash_matrix_options options(const std::string& type, const std::string& args) {
    crash_matrix_options o;
    o.types = &types_;
    o.type = type;
    o.args_json = args;
    o.work_dir = dir_ + "/work";
    o.reset = [this] {
      fs::remove_all(ledger_);
      fs::create_directories(ledger_);
    };
    return o;
  }

  std::string dir_, ledger_;
  registry types_;
};

TEST_F(crash_harness_test, a_ledger_tree_survives_a_crash_at_every_boundary) {
  auto o = options("demo.ledger", R"({"steps":2,"children":2,"depth":1,"ledger_dir":")"
                                    + ledger_ + "\"}");
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state());
    auto n = files_in(ledger_);
    return n == 6 ? "" : "ledger holds " + std::to_string(n) + " files, want 6";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_GE(rep.boundaries, 5u);  // submit, 3 procedures' steps, the summary
  EXPECT_EQ(rep.runs, 2 * rep.boundaries + 2);
}

TEST_F(crash_harness_test, a_failing_ledger_tree_rolls_back_to_nothing_whatever_crashes) {
  auto o = options("demo.ledger", R"({"steps":3,"children":2,"depth":1,"fail_at":2,)"
                                  R"("ledger_dir":")" + ledger_ + "\"}");
  o.check = [this](const crash_run& r) -> std::string {
    if (r.root.state() != pb::ROLLEDBACK)
      return "ended " + pb::ProcState_Name(r.root.state());
    auto n = files_in(ledger_);
    return n == 0 ? "" : "ledger holds " + std::to_string(n) + " files after the rollback";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_GT(rep.crashes, 0u);
}

TEST_F(crash_harness_test, it_catches_a_step_that_is_not_idempotent) {
  auto o = options("test.appender", R"({"ledger_dir":")" + ledger_ + "\"}");
  o.chained = false;
  o.check = [this](const crash_run&) -> std::string {
    std::ifstream in(ledger_ + "/log");
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all == "x\n" ? "" : "the log holds " + std::to_string(all.size() / 2) + " lines";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_FALSE(rep.ok());
  EXPECT_NE(rep.summary().find("crash before write 2: the log holds 2 lines"), std::string::npos)
    << rep.summary();
}

TEST_F(crash_harness_test, an_unknown_type_is_reported) {
  auto rep = run_crash_matrix(options("no.such", "{}"));
  EXPECT_FALSE(rep.ok());
  EXPECT_NE(rep.summary().find("not registered"), std::string::npos);
}

} // namespace
} // namespace proctor::testing
