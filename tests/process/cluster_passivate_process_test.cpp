// Placeholders of children on other nodes giving up their actors, with real proctord
// processes: the links' own view of the peers decides when a placeholder may go, its node
// going down brings it back in time to keep the node-loss deadline, and a node killed while
// a placeholder is passivated carries the tree on after its restart.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/process/cluster_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::cluster;
using proctor::test::eventually;
using proctor::test::metric;
using proctor::test::parse_json;
using proctor::test::state_of;
namespace fs = std::filesystem;

class cluster_passivate : public cluster {
protected:
  /// A tree on a whose two children run on a and b; each child waits at the gate of its
  /// step 1, so the child on a runs (its step yields) while b's placeholder only waits.
  /// Undos are not held.
  uint64_t submit_gated(const std::string& type) {
    fs::create_directories(gates());
    for (const char* open : {"step.0", "undo.0", "undo.1"})  // undos are gated too
      std::ofstream(gates() / open).put('\n');
    return submit(0, R"(,"steps":3,"children":2,"depth":1,"gate_dir":")" + gates().string() + "\"",
                  type);
  }

  fs::path gates() const { return dir_.path() / "gates"; }

  double passivated_on_a() { return metric(*nodes_[0], "proctor_passivated_procedures"); }
};

// Its node killed, the passivated placeholder of demo.ledger.impatient's child comes back and
// fails the tree after the 5 s deadline: the tree rolls back everywhere once b returns.
TEST_F(cluster_passivate, a_passivated_placeholder_keeps_its_node_loss_deadline) {
  auto id = submit_gated("demo.ledger.impatient");
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(eventually([&] { return passivated_on_a() == 1; }, 30s, 100ms))
    << "the placeholder kept its actor\n"
    << nodes_[0]->log_tail();
  nodes_[1]->kill();
  EXPECT_TRUE(eventually([&] { return passivated_on_a() == 0; }, 20s, 100ms))
    << "b's loss did not bring it back\n"
    << nodes_[0]->log_tail();
  // (FAILED while it rolls back: the order to undo b's part waits for b.)
  EXPECT_TRUE(eventually(
    [&] {
      auto s = parse_json(nodes_[0]->ctl({"status", std::to_string(id), "--json"}, 10s).out);
      return s && state_of(*s) == "FAILED";
    },
    30s, 200ms))
    << "no node-loss deadline failed the tree\n"
    << nodes_[0]->log_tail(40);
  ASSERT_TRUE(nodes_[1]->start()) << nodes_[1]->log_tail();
  EXPECT_EQ(final_state(0, id), "ROLLEDBACK") << nodes_[0]->log_tail();
  EXPECT_EQ(ledger_files(), 0u);
}

// a killed while the placeholder is passivated: after its restart the placeholder goes again
// once a sees b up, and the child's end on b ends the tree with every step once.
TEST_F(cluster_passivate, a_tree_with_a_passivated_placeholder_survives_a_sigkill_of_its_node) {
  auto id = submit_gated("demo.ledger");
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(eventually([&] { return passivated_on_a() == 1; }, 30s, 100ms))
    << "the placeholder kept its actor\n"
    << nodes_[0]->log_tail();
  nodes_[0]->kill();
  ASSERT_TRUE(nodes_[0]->start()) << nodes_[0]->log_tail();
  EXPECT_TRUE(eventually([&] { return passivated_on_a() == 1; }, 30s, 100ms))
    << "it did not go again after the restart\n"
    << nodes_[0]->log_tail();
  std::ofstream(gates() / "step.1").put('\n');
  std::ofstream(gates() / "step.2").put('\n');
  EXPECT_EQ(final_state(0, id), "SUCCESS") << nodes_[0]->log_tail();
  EXPECT_EQ(ledger_files(), 3u + 2 * 3);
  EXPECT_EQ(passivated_on_a(), 0);
}

}  // namespace
