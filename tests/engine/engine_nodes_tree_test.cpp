// `proctor tree` of a tree spread over three nodes: the node asked lists the fragments the
// other nodes hold in place of its placeholders, each saying its node; once those are
// released, the placeholders stand for them (also once the tree ended and its node restarted).
// Any procedure of the tree, asked at any node,
// gives the whole tree, while it runs and after it ended; a view costs one request per
// other node holding a part of it (a view of an ended tree once sent the nodes asking each
// other for the released fragments' parts without end: issue 32).
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>

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
  uint64_t on_b = 0, on_c = 0;
  for (const auto& s : r.list()) {
    if (s.node() == "b")
      on_b = s.id();
    if (s.node() == "c")
      on_c = s.id();
  }
  ASSERT_NE(on_b, 0u);
  ASSERT_NE(on_c, 0u);
  // Asked at b or c, about any procedure of the tree: the whole tree, as its root's node
  // gathers it, each procedure saying where it runs as seen from the node asked.
  auto whole = [&](const std::string& at, uint64_t about, const char* phase) {
    pb::Request q;
    q.mutable_tree()->set_id(about);
    auto before = sb_->tree_requests.load();
    auto x = call(at, q);
    auto cost = sb_->tree_requests.load() - before;
    ASSERT_EQ(x.code(), pb::Response::OK) << phase << " at " << at << ": " << x.error();
    ASSERT_EQ(x.list_size(), 4) << phase << " at " << at << ": " << x.ShortDebugString();
    EXPECT_EQ(x.list(0).id(), id) << phase << " at " << at;
    EXPECT_EQ(x.unreachable_size(), 0) << phase << " at " << at;
    std::map<uint64_t, std::string> nodes;
    for (const auto& s : x.list())
      nodes[s.id()] = s.node();
    auto seen = [&](const std::string& n) { return n == at ? std::string{} : n; };
    EXPECT_EQ(nodes[id], seen("a")) << phase << " at " << at;
    EXPECT_EQ(nodes[on_b], seen("b")) << phase << " at " << at;
    EXPECT_EQ(nodes[on_c], seen("c")) << phase << " at " << at;
    // a asks b and c for their parts (and is asked first when it is not the node asked).
    EXPECT_LE(cost, at == "a" ? 2u : 3u) << phase << " at " << at;
  };
  for (const auto& at : {"a", "b", "c"})
    for (auto about : {id, on_b, on_c})
      whole(at, about, "running");
  // A node that does not answer leaves its placeholder, and the view says which node.
  cut("c");
  for (const auto& at : {"a", "b"}) {
    pb::Request q;
    q.mutable_tree()->set_id(on_b);
    auto x = call(at, q);
    ASSERT_EQ(x.code(), pb::Response::OK) << at << ": " << x.error();
    ASSERT_EQ(x.list_size(), 4) << at << ": " << x.ShortDebugString();
    ASSERT_EQ(x.unreachable_size(), 1) << at << ": " << x.ShortDebugString();
    EXPECT_NE(x.unreachable(0).find("node c"), std::string::npos) << x.unreachable(0);
    EXPECT_EQ(x.list(3).id(), on_c);
    EXPECT_EQ(x.list(3).node(), "c");
  }
  uncut("c");

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
  for (const auto& at : {"a", "b", "c"})
    for (auto about : {id, on_b, on_c})
      whole(at, about, "ended");
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
