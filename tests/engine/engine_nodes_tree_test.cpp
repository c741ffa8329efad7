// `proctor tree` of a tree spread over three nodes: the node asked lists the fragments the
// other nodes hold in place of its placeholders, each saying its node; once those are
// released, the placeholders stand for them, also once the tree ended and its node restarted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

using nodes_tree = nodes_fixture;

TEST_F(nodes_tree, a_tree_across_nodes_lists_each_fragment_with_its_node) {
  auto gates = dir_ + "/gates";
  fs::create_directories(gates);
  std::ofstream(gates + "/step.0").put('\n');
  auto id = submit("a", args(R"(,"steps":3,"children":3,"depth":1,"gate_dir":")" + gates + "\""));
  pb::Request t;
  t.mutable_tree()->set_id(id);
  // The children on b and c ran step 0 and wait at the gate of step 1, in their fragments.
  pb::Response r;
  ASSERT_TRUE(eventually([&] {
    r = call("a", t);
    std::set<std::string> live_remote;
    for (const auto& s : r.list())
      if (!s.node().empty() && s.waiting_for().rfind("node ", 0) != 0)
        live_remote.insert(s.node());
    return live_remote == std::set<std::string>{"b", "c"};
  }))
    << r.ShortDebugString();
  ASSERT_EQ(r.list_size(), 4);
  EXPECT_EQ(r.list(0).id(), id);
  EXPECT_EQ(r.list(0).node(), "");
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(r.list(i).parent_id(), id);
    EXPECT_EQ(r.list(i).root_id(), id);
  }
  // Asked at b, a child b holds shows its fragment only (its parent is on a).
  uint64_t on_b = 0;
  for (const auto& s : r.list())
    if (s.node() == "b")
      on_b = s.id();
  ASSERT_NE(on_b, 0u);
  pb::Request tb;
  tb.mutable_tree()->set_id(on_b);
  auto rb = call("b", tb);
  ASSERT_EQ(rb.code(), pb::Response::OK) << rb.error();
  ASSERT_EQ(rb.list_size(), 1);
  EXPECT_EQ(rb.list(0).id(), on_b);

  std::ofstream(gates + "/step.1").put('\n');
  std::ofstream(gates + "/step.2").put('\n');
  ASSERT_EQ(wait("a", id).state(), pb::SUCCESS);
  ASSERT_TRUE(eventually([&] { return fragments_on("b") == 0 && fragments_on("c") == 0; }));
  r = call("a", t);
  ASSERT_EQ(r.list_size(), 4);
  std::set<std::string> placed;
  for (const auto& s : r.list())
    if (!s.node().empty()) {
      placed.insert(s.node());
      EXPECT_EQ(s.state(), pb::SUCCESS);
    }
  EXPECT_EQ(placed, (std::set<std::string>{"b", "c"}));
  // The finished tree's summary keeps each child's node: so does a restarted a.
  stop_node("a");
  start_node("a");
  r = call("a", t);
  ASSERT_EQ(r.list_size(), 4) << r.ShortDebugString();
  placed.clear();
  for (const auto& s : r.list())
    if (!s.node().empty())
      placed.insert(s.node());
  EXPECT_EQ(placed, (std::set<std::string>{"b", "c"}));
}

}  // namespace
}  // namespace proctor::testing
