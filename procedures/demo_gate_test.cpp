// demo.ledger's gates (gate_dir): the hooks process tests use to hold work in flight until
// they decide it may go on, instead of hoping the machine is slow enough.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include <proctor/demo.pb.h>

#include "procedures/demo.hpp"

namespace proctor {
namespace {

namespace fs = std::filesystem;

class demo_gate_test : public ::testing::Test {
protected:
  demo_gate_test() {
    char tmpl[] = "/tmp/proctor_demo_gate_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    root_ = tmpl;
    fs::create_directories(ledger());
    fs::create_directories(gates());
    register_demo_procedures(reg_);
  }
  ~demo_gate_test() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  fs::path ledger() const { return root_ / "ledger"; }
  fs::path gates() const { return root_ / "gates"; }
  void open_gate(const std::string& name) const { std::ofstream(gates() / name).put('\n'); }
  size_t ledger_files() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(ledger()))
      ++n;
    return n;
  }

  std::unique_ptr<procedure> make(const std::string& extra = "") {
    std::string err;
    auto p = reg_.make_from_json("demo.ledger",
                                 R"({"steps":2,"ledger_dir":")" + ledger().string()
                                   + R"(","gate_dir":")" + gates().string() + "\"" + extra + "}",
                                 &err);
    EXPECT_NE(p, nullptr) << err;
    return p;
  }

  static context ctx() {
    context c;
    c.id_ = 4;
    c.root_id_ = 4;
    return c;
  }

  fs::path root_;
  registry reg_;
};

TEST_F(demo_gate_test, a_step_whose_gate_is_closed_yields_and_leaves_no_trace) {
  auto p = make();
  ASSERT_NE(p, nullptr);
  auto c = ctx();
  auto o = p->execute(pb::LEDGER_STEP, c);
  EXPECT_EQ(o.what(), outcome::kind::yield);
  EXPECT_EQ(o.state(), pb::LEDGER_STEP);
  EXPECT_EQ(ledger_files(), 0u);
  EXPECT_EQ(dynamic_cast<pb::LedgerData&>(p->data()).step(), 0) << "a yield must not progress";
}

TEST_F(demo_gate_test, each_step_waits_for_its_own_gate) {
  auto p = make();
  ASSERT_NE(p, nullptr);
  auto c = ctx();
  open_gate("step.0");
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, c).what(), outcome::kind::next);
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, c).what(), outcome::kind::yield) << "step.1 is closed";
  EXPECT_EQ(ledger_files(), 1u);
  open_gate("step.1");
  EXPECT_EQ(p->execute(pb::LEDGER_STEP, c).what(), outcome::kind::done);
  EXPECT_EQ(ledger_files(), 2u);
}

TEST_F(demo_gate_test, an_undo_whose_gate_is_closed_throws_and_removes_nothing) {
  auto p = make(R"(,"depth":0)");
  ASSERT_NE(p, nullptr);
  auto c = ctx();
  open_gate("step.0");
  ASSERT_EQ(p->execute(pb::LEDGER_STEP, c).what(), outcome::kind::next);
  // Which file an undo removes is the rollback contract's business, not the gate's.
  EXPECT_THROW(p->rollback(pb::LEDGER_STEP, c), std::runtime_error);
  EXPECT_EQ(ledger_files(), 1u);
  open_gate("undo.0");
  EXPECT_NO_THROW(p->rollback(pb::LEDGER_STEP, c));
}

TEST_F(demo_gate_test, no_gate_dir_means_no_gates_and_a_missing_one_is_refused) {
  std::string err;
  auto free = reg_.make_from_json("demo.ledger",
                                  R"({"steps":1,"ledger_dir":")" + ledger().string() + "\"}", &err);
  ASSERT_NE(free, nullptr) << err;
  auto c = ctx();
  EXPECT_EQ(free->execute(pb::LEDGER_STEP, c).what(), outcome::kind::done);
  auto bad = reg_.make_from_json(
    "demo.ledger", R"({"ledger_dir":")" + ledger().string() + R"(","gate_dir":"/no/such/gates"})",
    &err);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(err.find("gate_dir"), std::string::npos) << err;
}

}  // namespace
}  // namespace proctor
