// A node that comes back empty is not the node that left (docs/cluster.md, "Incarnations"):
// node b is SIGKILLed while it runs children of a tree of node a, its data directory is
// deleted and it starts again, empty, under the same name and address. Node a notices the
// new incarnation at its first heartbeat answer and refuses b's answers for the old one's: b
// is down for a, saying why; the tree keeps waiting for its children, and an abort rolls
// back a's part but never reports the tree ROLLEDBACK while b's part (its ledger files) is
// not undone. a remembers across its own restart; b takes a as it is.
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/process/cluster_fixture.hpp"

namespace proctor::test {
namespace {

class incarnations : public cluster {
public:
  incarnations() { count_ = 2; }

  /// Node a's view of b: its `reason` once it is down (empty while up or not listed).
  std::string why_b_is_down() {
    auto seen = nodes_seen_by(0);
    auto b = seen.find("b");
    if (b == seen.end() || b->second.fields().at("up").bool_value())
      return {};
    return b->second.fields().at("reason").string_value();
  }

  std::string status_of(uint64_t id) {
    auto r = nodes_[0]->ctl({"status", std::to_string(id), "--json"}, 30s);
    return r.out;
  }
};

TEST_F(incarnations, a_node_restarted_empty_is_not_taken_for_the_one_that_left) {
  auto id = submit(0, R"(,"steps":3,"children":2,"depth":1,"spread":false,"place_on":"b",)"
                      R"("step_sleep_ms":300)");
  ASSERT_NE(id, 0u);
  // b runs the children: some of their ledger files are there (the root wrote one).
  ASSERT_TRUE(eventually([&] { return ledger_files() >= 3; }, 30s)) << nodes_[1]->log_tail();
  nodes_[1]->kill();
  fs::remove_all(nodes_[1]->data_dir());
  ASSERT_TRUE(nodes_[1]->start()) << nodes_[1]->log_tail();
  const auto kept = ledger_files();

  std::string why;
  ASSERT_TRUE(eventually(
    [&] { return (why = why_b_is_down()).find("another journal") != std::string::npos; }, 20s))
    << why << nodes_[0]->log_tail();
  EXPECT_NE(why.find("incarnation"), std::string::npos) << why;
  // b takes a as it is (it knew nothing of a).
  EXPECT_TRUE(sees(1, "a", true)) << nodes_[1]->log_tail();

  // The tree has not ended: it waits for its children on b.
  auto w = nodes_[0]->ctl({"wait", std::to_string(id), "--timeout-s", "2"}, 30s);
  EXPECT_EQ(w.exit_code, 2) << w.out << w.err;
  // Aborted: a's part is rolled back, the order to undo b's part waits for the b that left.
  auto ab = nodes_[0]->ctl({"abort", std::to_string(id)}, 30s);
  EXPECT_EQ(ab.exit_code, 0) << ab.out << ab.err;
  std::string st;
  ASSERT_TRUE(eventually(
    [&] { return (st = status_of(id)).find("waiting for node b") != std::string::npos; }, 30s))
    << st;
  EXPECT_EQ(st.find("ROLLEDBACK"), std::string::npos) << st;
  // What b's old part wrote is still there: nobody claims it undone.
  EXPECT_GE(ledger_files(), kept - 1);  // (a's root undid its own step)

  // a remembers b's incarnation across its own restart.
  nodes_[0]->kill();
  ASSERT_TRUE(nodes_[0]->start()) << nodes_[0]->log_tail();
  ASSERT_TRUE(
    eventually([&] { return why_b_is_down().find("another journal") != std::string::npos; }, 20s))
    << nodes_[0]->log_tail();
  st = status_of(id);
  EXPECT_EQ(st.find("ROLLEDBACK"), std::string::npos) << st;
}

}  // namespace
}  // namespace proctor::test
