// Procedure trees through a real node: a 13-procedure demo.ledger tree (steps 3, children 3,
// depth 2) succeeds with exactly 39 ledger files; the same tree with a failing root rolls back
// to an empty ledger, also when the node is SIGKILLed in the middle of that rollback (held
// there by demo.ledger's undo gate, so the kill cannot come too early or too late).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using proctor::test::count_files;
using proctor::test::eventually;
using proctor::test::file_names;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::run_result;
using proctor::test::temp_dir;
using proctor::test::trim;

constexpr size_t tree_size = 13;  // 1 + 3 + 9
constexpr int steps = 3;

/// A procedure's status as `status --json` prints it.
struct proc_status {
  uint64_t id = 0;
  uint64_t root_id = 0;
  uint64_t parent_id = 0;
  std::string state;
  std::string error;
  std::vector<uint64_t> children;
};

std::optional<proc_status> parse_status(const std::string& text) {
  google::protobuf::Value v;
  if (!google::protobuf::util::JsonStringToMessage(trim(text), &v).ok() || !v.has_struct_value())
    return std::nullopt;
  const auto& f = v.struct_value().fields();
  for (const char* key : {"id", "root_id", "parent_id", "state", "error", "children"})
    if (!f.count(key))
      return std::nullopt;
  proc_status s;
  s.id = static_cast<uint64_t>(f.at("id").number_value());
  s.root_id = static_cast<uint64_t>(f.at("root_id").number_value());
  s.parent_id = static_cast<uint64_t>(f.at("parent_id").number_value());
  s.state = f.at("state").string_value();
  s.error = f.at("error").string_value();
  for (auto& c : f.at("children").list_value().values())
    s.children.push_back(static_cast<uint64_t>(c.number_value()));
  return s;
}

std::optional<proc_status> status_of(const node& n, uint64_t id) {
  auto r = n.ctl({"status", std::to_string(id), "--json"}, 10s);
  if (r.exit_code != 0)
    return std::nullopt;
  return parse_status(r.out);
}

std::string tree_args(const fs::path& ledger, const std::string& extra = "") {
  return R"({"steps":3,"children":3,"depth":2,"ledger_dir":")" + ledger.string() + "\"" + extra
         + "}";
}

/// The tree under `root` (root first, breadth first), read through `status`; nullopt until
/// every procedure of a full 13-procedure tree exists and checks out (root_id, parent_id).
std::optional<std::vector<proc_status>> read_tree(const node& n, uint64_t root) {
  std::vector<proc_status> tree;
  auto r = status_of(n, root);
  if (!r || r->parent_id != 0 || r->root_id != root)
    return std::nullopt;
  tree.push_back(*r);
  for (size_t i = 0; i < tree.size(); ++i) {
    auto children = tree[i].children;
    for (auto c : children) {
      auto s = status_of(n, c);
      if (!s || s->parent_id != tree[i].id || s->root_id != root)
        return std::nullopt;
      tree.push_back(*s);
    }
  }
  if (tree.size() != tree_size)
    return std::nullopt;
  return tree;
}

TEST(tree_process, thirteen_procedure_tree_succeeds_with_exactly_39_ledger_files) {
  temp_dir dir;
  auto ledger = dir.path() / "ledger";
  fs::create_directories(ledger);
  node n{dir.path() / "data"};
  ASSERT_TRUE(n.start()) << n.log_tail();

  auto sub = n.ctl({"submit", "demo.ledger", "--args-json", tree_args(ledger)}, 30s);
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto root = parse_id(sub.out);
  ASSERT_TRUE(root) << sub.out;

  auto w = n.ctl({"wait", std::to_string(*root), "--timeout-s", "60"}, 90s);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << n.log_tail();
  auto ws = parse_status(w.out);
  ASSERT_TRUE(ws) << w.out;
  EXPECT_EQ(ws->state, "SUCCESS");
  EXPECT_EQ(ws->children.size(), 3u);

  auto tree = read_tree(n, *root);
  ASSERT_TRUE(tree) << "the tree under " << *root << " is not 13 well-linked procedures";
  std::set<uint64_t> ids;
  std::set<std::string> want;
  for (auto& p : *tree) {
    ids.insert(p.id);
    EXPECT_EQ(p.state, "SUCCESS") << "procedure " << p.id;
    EXPECT_EQ(p.error, "") << "procedure " << p.id;
    for (int s = 0; s < steps; ++s)
      want.insert(std::to_string(*root) + "." + std::to_string(p.id) + "." + std::to_string(s));
  }
  EXPECT_EQ(ids.size(), tree_size) << "a procedure appears twice in the tree";
  // Depth: the root's three children have three children each, the nine leaves none.
  for (size_t i = 0; i < tree->size(); ++i)
    EXPECT_EQ((*tree)[i].children.size(), i < 4 ? 3u : 0u) << "procedure " << (*tree)[i].id;

  EXPECT_EQ(count_files(ledger), tree_size * steps);
  EXPECT_EQ(file_names(ledger), want);

  // Children are not roots: `list` shows the root only, `list --all` all 13.
  auto roots = n.ctl({"list", "--json"}, 10s);
  ASSERT_EQ(roots.exit_code, 0) << roots.err;
  google::protobuf::Value v;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(trim(roots.out), &v).ok());
  EXPECT_EQ(v.list_value().values_size(), 1);
  auto everything = n.ctl({"list", "--all", "--json"}, 10s);
  ASSERT_EQ(everything.exit_code, 0) << everything.err;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(trim(everything.out), &v).ok());
  EXPECT_EQ(v.list_value().values_size(), static_cast<int>(tree_size));
  n.kill();
}

TEST(tree_process, failing_tree_killed_mid_rollback_ends_rolledback_with_an_empty_ledger) {
  temp_dir dir;
  auto ledger = dir.path() / "ledger";
  fs::create_directories(ledger);
  node n{dir.path() / "data"};
  ASSERT_TRUE(n.start()) << n.log_tail();

  // The root fails at its step 2, once its 12 descendants succeeded: 12 * 3 + 2 files.
  // Every step's gate is open; the undos of the nine leaves (depth 0) wait behind gate
  // undo.0, opened only after the SIGKILL. The rollback undoes in descending journal order,
  // so it first undoes the root's step 1 (its last commit) and then stops, at the latest,
  // at the first leaf: the kill certainly comes mid-rollback, with the leaves' 27 files left.
  constexpr size_t peak = (tree_size - 1) * steps + 2;
  constexpr size_t leaf_files = 9 * steps;
  auto gates = dir.path() / "gates";
  fs::create_directories(gates);
  for (const char* g : {"step.0", "step.1", "step.2", "undo.1", "undo.2"})
    std::ofstream(gates / g).put('\n');
  auto sub = n.ctl({"submit", "demo.ledger", "--args-json",
                    tree_args(ledger, R"(,"fail_at":2,"gate_dir":")" + gates.string() + "\"")},
                   30s);
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto root = parse_id(sub.out);
  ASSERT_TRUE(root) << sub.out;

  std::optional<std::vector<proc_status>> tree;
  ASSERT_TRUE(eventually([&] { return (tree = read_tree(n, *root)).has_value(); }, 60s, 20ms))
    << "the tree was never complete\n"
    << n.log_tail();

  auto root_step_1 = ledger / (std::to_string(*root) + "." + std::to_string(*root) + ".1");
  size_t most = 0;
  std::string state;
  bool rolling_back = eventually(
    [&] {
      most = std::max(most, count_files(ledger));
      auto s = status_of(n, *root);
      state = s ? s->state : "?";
      return state == "FAILED" && !fs::exists(root_step_1);
    },
    120s, 10ms);
  n.kill();
  auto files_at_kill = count_files(ledger);
  ASSERT_TRUE(rolling_back) << "the root never started its rollback (state " << state << ", "
                            << files_at_kill << " files)\n"
                            << n.log_tail();
  EXPECT_GE(files_at_kill, leaf_files) << "a leaf's undo ran past its closed gate";
  EXPECT_LT(files_at_kill, peak);
  EXPECT_LE(most, peak) << "more ledger files than the tree ever commits";
  std::printf("  SIGKILL mid-rollback: %zu of %zu ledger files left\n", files_at_kill, peak);
  // The root never ran its failing step.
  EXPECT_FALSE(fs::exists(ledger / (std::to_string(*root) + "." + std::to_string(*root) + ".2")));

  std::ofstream(gates / "undo.0").put('\n');
  ASSERT_TRUE(n.start()) << n.log_tail();
  auto w = n.ctl({"wait", std::to_string(*root), "--timeout-s", "60"}, 90s);
  EXPECT_EQ(w.exit_code, 1) << w.out << w.err;
  auto ws = parse_status(w.out);
  ASSERT_TRUE(ws) << w.out << w.err << n.log_tail();
  EXPECT_EQ(ws->state, "ROLLEDBACK");
  EXPECT_NE(ws->error.find("fail_at"), std::string::npos) << ws->error;
  auto left = file_names(ledger);
  EXPECT_TRUE(left.empty()) << left.size() << " ledger files left, e.g. " << *left.begin();

  for (auto& p : *tree) {
    if (p.id == *root)
      continue;
    auto s = status_of(n, p.id);
    ASSERT_TRUE(s) << "no status for child " << p.id;
    EXPECT_EQ(s->state, "ROLLEDBACK") << "child " << p.id;
  }
  n.kill();
}

}  // namespace
