// `proctor tree` across two real nodes (issue 32, items 2 and 7): views of a wide tree whose
// children are spread over both nodes, asked again and again while the tree runs and after it
// ended, are complete and never take the link between the nodes down (no "node b is down",
// the link up since before, the log not flooded); and `tree` of any procedure, asked at any
// node, is the whole tree, gathered from the root's node.
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/cluster_fixture.hpp"

namespace proctor::test {
namespace {

class cluster_tree : public cluster {
protected:
  cluster_tree() { count_ = 2; }

  /// `proctor tree ID --json` at node `at`, counted.
  struct view {
    run_result run;
    uint64_t top = 0;  ///< the procedure the view starts from (the tree's root)
    size_t procs = 0;
    std::map<std::string, size_t> by_node;  ///< "" = the node asked
    std::map<std::string, size_t> by_state;
    std::vector<std::pair<uint64_t, std::string>> entries;  ///< (id, node), depth first
  };

  view tree_at(size_t at, uint64_t id) {
    view v;
    v.run = nodes_[at]->ctl({"tree", std::to_string(id), "--json"}, 60s);
    auto j = parse_json(v.run.out);
    if (v.run.exit_code != 0 || !j || !j->has_struct_value())
      return v;
    v.top = id_of(*j);
    std::function<void(const google::protobuf::Value&)> walk = [&](const auto& x) {
      ++v.procs;
      const auto& node = field(x, "node").string_value();
      ++v.by_node[node];
      ++v.by_state[field(x, "state").string_value()];
      v.entries.emplace_back(id_of(x), node);
      for (const auto& c : field(x, "children").list_value().values())
        walk(c);
    };
    walk(*j);
    return v;
  }

  /// Lines of node `at`'s log (all of them, or those containing `what`).
  size_t log_lines(size_t at, const std::string& what = "") const {
    std::ifstream in(nodes_[at]->log_file());
    size_t n = 0;
    for (std::string line; std::getline(in, line);)
      n += what.empty() || line.find(what) != std::string::npos ? 1 : 0;
    return n;
  }

  /// When node `at` has seen peer `name` up since ("" if it does not see it up).
  std::string up_since(size_t at, const std::string& name) {
    auto seen = nodes_seen_by(at);
    auto i = seen.find(name);
    if (i == seen.end() || !i->second.fields().at("up").bool_value())
      return "";
    return i->second.fields().at("since").string_value();
  }

  /// Node `at` holds no procedure any more (`list --all --local`).
  bool holds_none(size_t at) {
    auto r = nodes_[at]->ctl({"list", "--all", "--local", "--json"}, 10s);
    auto v = parse_json(r.out);
    return r.exit_code == 0 && v && v->list_value().values_size() == 0;
  }

  fs::path gates() {
    auto g = dir_.path() / "gates";
    fs::create_directories(g);
    return g;
  }

  static void open_gate(const fs::path& gates, const std::string& name) {
    std::ofstream(gates / name).put('\n');
  }

  /// A demo.ledger tree of `children` one-step children spread over a and b, submitted at a:
  /// the children end at once (those on b in fragments b holds until the tree ends), the root
  /// then waits at gate step.1 until the test opens it.
  uint64_t submit_held(int children, const fs::path& gates) {
    open_gate(gates, "step.0");
    return submit(0, R"(,"steps":1,"depth":1,"children":)" + std::to_string(children)
                       + R"(,"gate_dir":")" + gates.string() + "\"");
  }
};

TEST_F(cluster_tree, views_of_a_wide_tree_leave_the_link_up_while_it_runs_and_after_it_ended) {
  constexpr int children = 300;  // 150 on a, 150 on b
  constexpr size_t size = children + 1;
  auto g = gates();
  auto root = submit_held(children, g);
  ASSERT_NE(root, 0u);
  view v;
  ASSERT_TRUE(eventually(
    [&] {
      v = tree_at(0, root);
      return v.procs == size && v.by_state["SUCCESS"] == size - 1;
    },
    120s, 200ms))
    << describe(v.run) << nodes_[0]->log_tail();
  auto b_up_since = up_since(0, "b");
  auto a_up_since = up_since(1, "a");
  ASSERT_NE(b_up_since, "");
  ASSERT_NE(a_up_since, "");
  auto lines_before = log_lines(0);

  auto check = [&](const char* phase) {
    for (int i = 0; i < 10; ++i) {
      auto x = tree_at(0, root);
      ASSERT_EQ(x.run.exit_code, 0) << phase << ": " << describe(x.run);
      EXPECT_EQ(x.top, root) << phase;
      EXPECT_EQ(x.procs, size) << phase;
      EXPECT_EQ(x.by_node["b"], size_t{children / 2}) << phase;
      EXPECT_EQ(x.by_node[""], size_t{children / 2 + 1}) << phase;
    }
  };
  check("running");
  // The tree ends; b lets its fragments go, and a's placeholders stand for them.
  open_gate(g, "step.1");
  ASSERT_EQ(final_state(0, root), "SUCCESS");
  ASSERT_TRUE(eventually([&] { return holds_none(1); }, 60s, 200ms)) << nodes_[1]->log_tail();
  check("ended");
  EXPECT_EQ(tree_at(0, root).by_state["SUCCESS"], size);

  // The links stayed up all along, and the log says nothing of the views.
  EXPECT_EQ(up_since(0, "b"), b_up_since) << nodes_[0]->log_tail();
  EXPECT_EQ(up_since(1, "a"), a_up_since) << nodes_[1]->log_tail();
  for (size_t at : {0, 1}) {
    EXPECT_EQ(metric(*nodes_[at], "proctor_peer_downs_total"), 0) << nodes_[at]->log_tail();
    EXPECT_EQ(metric(*nodes_[at], "proctor_peer_stray_answers_total"), 0);
    EXPECT_EQ(metric(*nodes_[at], "proctor_tree_views_incomplete_total"), 0);
    EXPECT_EQ(log_lines(at, "is down"), 0u) << nodes_[at]->log_tail();
    EXPECT_EQ(log_lines(at, "unreadable"), 0u) << nodes_[at]->log_tail();
    EXPECT_EQ(log_lines(at, "did not answer"), 0u) << nodes_[at]->log_tail();
  }
  EXPECT_LT(log_lines(0) - lines_before, 40u) << nodes_[0]->log_tail(60);
}

TEST_F(cluster_tree, tree_of_any_procedure_at_any_node_is_the_whole_tree) {
  constexpr int children = 6;  // 3 on a, 3 on b
  constexpr size_t size = children + 1;
  auto g = gates();
  auto root = submit_held(children, g);
  ASSERT_NE(root, 0u);
  view at_a;
  ASSERT_TRUE(eventually(
    [&] {
      at_a = tree_at(0, root);
      return at_a.procs == size && at_a.by_state["SUCCESS"] == size - 1;
    },
    60s, 100ms))
    << describe(at_a.run) << nodes_[0]->log_tail();
  uint64_t on_a = 0, on_b = 0;
  for (const auto& [id, node] : at_a.entries) {
    if (node == "b")
      on_b = id;
    else if (id != root)
      on_a = id;
  }
  ASSERT_NE(on_a, 0u);
  ASSERT_NE(on_b, 0u);

  // Seen from b, the procedures on a say so, and b's own say nothing.
  auto whole_from_b = [&](uint64_t id, const char* phase) {
    auto x = tree_at(1, id);
    ASSERT_EQ(x.run.exit_code, 0) << phase << " " << id << ": " << describe(x.run);
    EXPECT_EQ(x.top, root) << phase << " " << id;
    EXPECT_EQ(x.procs, size) << phase << " " << id;
    EXPECT_EQ(x.by_node["a"], size_t{children / 2 + 1}) << phase << " " << id;
    EXPECT_EQ(x.by_node[""], size_t{children / 2}) << phase << " " << id;
  };
  auto whole_from_a = [&](uint64_t id, const char* phase) {
    auto x = tree_at(0, id);
    ASSERT_EQ(x.run.exit_code, 0) << phase << " " << id << ": " << describe(x.run);
    EXPECT_EQ(x.top, root) << phase << " " << id;
    EXPECT_EQ(x.procs, size) << phase << " " << id;
    EXPECT_EQ(x.by_node["b"], size_t{children / 2}) << phase << " " << id;
  };
  for (auto id : {root, on_a, on_b}) {
    whole_from_b(id, "running");
    whole_from_a(id, "running");
  }

  open_gate(g, "step.1");
  ASSERT_EQ(final_state(0, root), "SUCCESS");
  ASSERT_TRUE(eventually([&] { return holds_none(1); }, 60s, 200ms)) << nodes_[1]->log_tail();
  for (auto id : {root, on_a, on_b}) {
    whole_from_b(id, "ended");
    whole_from_a(id, "ended");
  }
  for (size_t at : {0, 1})
    EXPECT_EQ(log_lines(at, "is down"), 0u) << nodes_[at]->log_tail();
}

}  // namespace
}  // namespace proctor::test
