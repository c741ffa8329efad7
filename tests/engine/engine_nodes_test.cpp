// Trees across nodes, in one process: three nodes over their own data directories, their
// outboxes connected by a transport that hands each request to the named node's executor
// (and can cut a node off). The process tests (tests/process/cluster_process_test.cpp) do the same
// with real proctord processes, kills and stops.
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <caf/all.hpp>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

using nodes = nodes_fixture;

struct undo_line {
  std::string node;
  uint64_t id = 0, parent = 0;
  int step = 0;
};

std::vector<undo_line> read_undo_log(const std::string& path) {
  std::vector<undo_line> out;
  std::ifstream in(path);
  undo_line l;
  while (in >> l.node >> l.id >> l.parent >> l.step)
    out.push_back(l);
  return out;
}

TEST_F(nodes, a_tree_spread_over_three_nodes_succeeds_and_its_fragments_are_released) {
  auto id = submit("a", args(R"(,"steps":3,"children":6,"depth":1)"));
  EXPECT_EQ(id >> id_node_shift, node_number_of("a")) << "ids carry the node number";
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.children_size(), 6);
  // Root: 3 steps; six children of 3 steps each, two on each node.
  EXPECT_EQ(ledger_files(), 3u + 6 * 3);
  // The fragments on b and c are released once the tree ended.
  EXPECT_TRUE(eventually([&] { return fragments_on("b") == 0 && fragments_on("c") == 0; }))
    << fragments_on("b") << " on b, " << fragments_on("c") << " on c";
}

TEST_F(nodes, a_failure_after_the_children_rolls_back_every_node_in_reverse_causal_order) {
  // Step 0 spawns the children (two per node), step 1 runs after they ended, step 2 fails.
  auto id = submit("a", args(R"(,"steps":4,"children":6,"depth":1,"fail_at":2)"));
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::ROLLEDBACK) << s.error();
  EXPECT_EQ(ledger_files(), 0u);
  auto log = read_undo_log(dir_ + "/ledger/undo.log");
  // Every child's undos come after the root's step 1 (which saw their ends) and before the
  // root's step 0 (which spawned them).
  size_t root1 = SIZE_MAX, root0 = SIZE_MAX;
  std::set<std::string> child_nodes;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].id == id && log[i].step == 1)
      root1 = i;
    if (log[i].id == id && log[i].step == 0)
      root0 = i;
  }
  ASSERT_NE(root1, SIZE_MAX);
  ASSERT_NE(root0, SIZE_MAX);
  size_t children = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].parent != id)
      continue;
    ++children;
    child_nodes.insert(log[i].node);
    EXPECT_GT(i, root1) << "child " << log[i].id << " on " << log[i].node << " undone too early";
    EXPECT_LT(i, root0) << "child " << log[i].id << " on " << log[i].node << " undone too late";
  }
  EXPECT_EQ(children, 6u * 4);  // each child: 4 steps, each undone
  EXPECT_EQ(child_nodes, (std::set<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(eventually([&] { return fragments_on("b") == 0 && fragments_on("c") == 0; }));
}

TEST_F(nodes, an_unreachable_node_holds_the_tree_and_its_rollback_until_it_returns) {
  // Two levels across the nodes first: grandchildren spread again from b and c.
  auto id = submit("a", args(R"(,"steps":2,"children":3,"depth":2)"));
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(ledger_files(), 2u + 3 * 2 + 9 * 2);
  // Cut c off and abort a tree while its child placed on c cannot be delivered.
  cut("c");
  auto id2 = submit("a", args(R"(,"steps":2,"children":3,"depth":1)"));
  // The child placed on c cannot be delivered: the tree waits for it.
  EXPECT_TRUE(eventually([&] {
    pb::Request req;
    req.mutable_status()->set_id(id2);
    auto r = call("a", req);
    return r.status().state() == pb::WAITING;
  }));
  pb::Request ab;
  ab.mutable_abort()->set_id(id2);
  EXPECT_EQ(call("a", ab).code(), pb::Response::OK);
  // The rollback needs c: it waits, saying so.
  EXPECT_TRUE(eventually([&] {
    pb::Request req;
    req.mutable_status()->set_id(id2);
    return call("a", req).status().waiting_for().find("node c") != std::string::npos;
  }))
    << "waiting for: " << [&] {
         pb::Request req;
         req.mutable_status()->set_id(id2);
         return call("a", req).status().waiting_for();
       }();
  uncut("c");
  auto s2 = wait("a", id2);
  EXPECT_EQ(s2.state(), pb::ROLLEDBACK) << s2.error();
  EXPECT_EQ(ledger_files(), 2u + 3 * 2 + 9 * 2) << "the second tree left nothing";
  EXPECT_TRUE(eventually([&] { return fragments_on("b") == 0 && fragments_on("c") == 0; }));
}

TEST_F(nodes, a_node_restarted_mid_tree_carries_its_fragments_on) {
  auto id = submit("a", args(R"(,"steps":4,"children":9,"depth":1,"step_sleep_ms":20)"));
  ASSERT_TRUE(eventually([&] { return procs_on("b") >= 2; }));
  // b goes down (its actors stop at once; nothing is acknowledged that is not durable) and
  // comes back on its journal.
  stop_node("b");
  start_node("b");
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(ledger_files(), 4u + 9 * 4) << "no step lost or doubled";
  EXPECT_TRUE(eventually([&] { return fragments_on("b") == 0 && fragments_on("c") == 0; }));
}

// The parent's node holds only a placeholder of a child placed on another node: the child's
// history is asked where it runs, and a node that does not answer is said to be unreachable
// (never the placeholder's own records, as if they were the child's).
TEST_F(nodes, a_remote_childs_history_is_asked_where_it_runs) {
  auto gates = dir_ + "/gates";
  fs::create_directories(gates);
  std::ofstream(gates + "/step.0").put('\n');
  // The root's step 0 places one child on b, whose step 1 waits for its gate.
  auto id = submit("a", R"({"ledger_dir":")" + dir_
                          + R"(/ledger","steps":2,"children":1,)"
                            R"("depth":1,"place_on":"b","gate_dir":")"
                          + gates + "\"}");
  uint64_t child = 0;
  auto history = [&](const std::string& at, uint64_t of) {
    pb::Request req;
    req.mutable_history()->set_id(of);
    return call(at, req);
  };
  ASSERT_TRUE(eventually([&] {
    pb::Request req;
    req.mutable_status()->set_id(id);
    auto r = call("a", req);
    if (r.status().children_size() != 1)
      return false;
    child = r.status().children(0);
    return history("b", child).history().entries_size() >= 2;  // submitted, step 0
  }));
  auto there = history("b", child);
  ASSERT_EQ(there.code(), pb::Response::OK) << there.error();
  EXPECT_EQ(there.history().entries(0).kind(), "submitted");
  EXPECT_NE(there.history().entries(0).detail().find("demo.ledger v1"), std::string::npos)
    << there.history().entries(0).detail();
  EXPECT_EQ(there.history().entries(1).kind(), "step");
  // Asked on the parent's node, the answer is b's.
  auto here = history("a", child);
  ASSERT_EQ(here.code(), pb::Response::OK) << here.error();
  EXPECT_EQ(here.history().ShortDebugString(), there.history().ShortDebugString());
  // b cut off: said so, with the node's name; nothing of the placeholder is shown.
  cut("b");
  auto cut_off = history("a", child);
  EXPECT_EQ(cut_off.code(), pb::Response::UNREACHABLE);
  auto prefix = "procedure " + std::to_string(child) + " runs on node b (unreachable): ";
  EXPECT_EQ(cut_off.error().rfind(prefix, 0), 0u) << cut_off.error();
  EXPECT_NE(cut_off.error().find("its history is in that node's journal"), std::string::npos)
    << cut_off.error();
  EXPECT_EQ(cut_off.history().entries_size(), 0);
  uncut("b");
  std::ofstream(gates + "/step.1").put('\n');
  std::ofstream(gates + "/step.2").put('\n');
  auto s = wait("a", id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
}

}  // namespace
}  // namespace proctor::testing
