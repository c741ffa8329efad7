// Trees across real proctord processes: three named nodes on 127.0.0.1 (free ports, temp
// directories), each with the other two as --peers. demo.ledger spreads its children over
// the nodes; its ledger files (one per committed step) and its undo log say what ran and
// what was undone, in which order, whatever happened to the processes.
#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/process/cluster_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::cluster;
using proctor::test::eventually;
using proctor::test::node;
using proctor::test::parse_json;
using proctor::test::state_of;
namespace fs = std::filesystem;

TEST_F(cluster, a_spread_tree_succeeds_with_every_step_once) {
  auto id = submit(0, R"(,"steps":3,"children":6,"depth":1)");
  ASSERT_NE(id, 0u);
  EXPECT_EQ(final_state(0, id), "SUCCESS") << nodes_[0]->log_tail();
  EXPECT_EQ(ledger_files(), 3u + 6 * 3);
  // A child on another node sees the tree's root as ctx.root_id(), as a local one does
  // (demo.ledger names its files <root>.<procedure>.<step>).
  for (const auto& f : fs::directory_iterator(ledger())) {
    if (f.path().filename() == "undo.log")
      continue;
    EXPECT_EQ(f.path().filename().string().rfind(std::to_string(id) + ".", 0), 0u) << f.path();
  }
}

TEST_F(cluster, a_failing_spread_tree_is_undone_on_every_node_in_reverse_causal_order) {
  // Step 0 spawns two children per node, step 1 runs after they ended, step 2 fails.
  auto id = submit(0, R"(,"steps":4,"children":6,"depth":1,"fail_at":2)");
  ASSERT_NE(id, 0u);
  EXPECT_EQ(final_state(0, id), "ROLLEDBACK") << nodes_[0]->log_tail();
  EXPECT_EQ(ledger_files(), 0u);
  // undo.log: "<node> <id> <parent> <step>" in the order the undos ran (O_APPEND).
  std::ifstream in(ledger() / "undo.log");
  std::string node_name;
  uint64_t pid = 0, parent = 0;
  int step = 0;
  size_t line = 0, root1 = SIZE_MAX, root0 = SIZE_MAX;
  std::vector<std::pair<size_t, std::string>> children;
  while (in >> node_name >> pid >> parent >> step) {
    if (pid == id && step == 1)
      root1 = line;
    if (pid == id && step == 0)
      root0 = line;
    if (parent == id)
      children.emplace_back(line, node_name);
    ++line;
  }
  ASSERT_NE(root1, SIZE_MAX);
  ASSERT_NE(root0, SIZE_MAX);
  EXPECT_EQ(children.size(), 6u * 4);
  std::set<std::string> where;
  for (auto& [at, n] : children) {
    where.insert(n);
    EXPECT_GT(at, root1) << "a child on " << n << " was undone before the step that saw it end";
    EXPECT_LT(at, root0) << "a child on " << n << " was undone after the step that spawned it";
  }
  EXPECT_EQ(where, (std::set<std::string>{"a", "b", "c"}));
}

TEST_F(cluster, sigkilled_nodes_come_back_and_their_trees_end_with_every_step_once) {
  // Children sleep at each step, so the kills come while fragments run on b and c.
  auto ok = submit(0, R"(,"steps":3,"children":9,"depth":1,"step_sleep_ms":150)");
  auto bad = submit(0, R"(,"steps":3,"children":6,"depth":1,"step_sleep_ms":150,"fail_at":1)");
  ASSERT_NE(ok, 0u);
  ASSERT_NE(bad, 0u);
  std::this_thread::sleep_for(300ms);  // a pace for the test's shape, not a synchronisation
  nodes_[1]->kill();
  nodes_[2]->kill();
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(nodes_[1]->start()) << nodes_[1]->log_tail();
  nodes_[0]->kill();  // the roots' node too, while the others carry on
  ASSERT_TRUE(nodes_[2]->start()) << nodes_[2]->log_tail();
  ASSERT_TRUE(nodes_[0]->start()) << nodes_[0]->log_tail();
  EXPECT_EQ(final_state(0, ok), "SUCCESS") << nodes_[0]->log_tail();
  EXPECT_EQ(final_state(0, bad), "ROLLEDBACK") << nodes_[0]->log_tail();
  // The successful tree's files, each exactly once; none of the rolled-back one's.
  EXPECT_EQ(ledger_files(), 3u + 9 * 3);
}

TEST_F(cluster, a_hung_node_holds_its_part_of_the_tree_until_it_wakes) {
  // b accepts connections (the kernel does) but answers nothing while stopped: deliveries
  // to it time out and are tried again; nothing is lost, and the tree ends once it wakes.
  ASSERT_EQ(::kill(nodes_[1]->pid(), SIGSTOP), 0);
  auto id = submit(0, R"(,"steps":2,"children":3,"depth":1)");
  ASSERT_NE(id, 0u);
  EXPECT_TRUE(eventually(
    [&] {
      auto r = nodes_[0]->ctl({"status", std::to_string(id), "--json"}, 10s);
      auto v = parse_json(r.out);
      return v && state_of(*v) == "WAITING";
    },
    20s));
  std::this_thread::sleep_for(500ms);  // deliveries to b are in flight or failing meanwhile
  ASSERT_EQ(::kill(nodes_[1]->pid(), SIGCONT), 0);
  EXPECT_EQ(final_state(0, id), "SUCCESS") << nodes_[0]->log_tail();
  EXPECT_EQ(ledger_files(), 2u + 3 * 2);
}

TEST_F(cluster, any_node_answers_for_any_procedure_and_says_when_its_node_is_unreachable) {
  auto id = submit(0, R"(,"steps":2,"children":3,"depth":1)");
  ASSERT_NE(id, 0u);
  // wait and status asked at c, about a tree of a: the same answer as a's.
  auto w = nodes_[2]->ctl({"wait", std::to_string(id), "--timeout-s", "60"}, 90s);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err;
  auto at_a = nodes_[0]->ctl({"status", std::to_string(id), "--json"}, 30s);
  auto at_c = nodes_[2]->ctl({"status", std::to_string(id), "--json"}, 30s);
  EXPECT_EQ(at_c.exit_code, 0) << at_c.err;
  EXPECT_EQ(at_c.out, at_a.out);
  // abort at b of a running tree of a: acknowledged there, rolled back at a.
  auto slow = submit(0, R"(,"steps":3,"children":3,"depth":1,"step_sleep_ms":300)");
  auto ab = nodes_[1]->ctl({"abort", std::to_string(slow)}, 30s);
  EXPECT_EQ(ab.exit_code, 0) << ab.err;
  EXPECT_EQ(final_state(0, slow), "ROLLEDBACK");
  // An unknown id of a: NOT_FOUND from a, relayed (exit 1); a down: exit 3, saying so.
  auto missing = nodes_[1]->ctl({"status", std::to_string(id + 100000)}, 30s);
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  nodes_[0]->kill();
  auto down = nodes_[1]->ctl({"status", std::to_string(id)}, 60s);
  EXPECT_EQ(down.exit_code, 3) << down.out << down.err;
  EXPECT_NE(down.err.find("node a"), std::string::npos) << down.err;
  EXPECT_NE(down.err.find("unreachable"), std::string::npos) << down.err;
}

TEST_F(cluster, a_node_name_is_fixed_by_its_data_directory) {
  nodes_[1]->stop();
  node renamed{dir_.path() / "b", ports_[1], {"--name", "x"}};
  EXPECT_FALSE(renamed.start(20s));
  EXPECT_NE(renamed.log_tail().find("belongs to node 'b'"), std::string::npos)
    << renamed.log_tail();
}

/// Lines of `file` that contain `text`.
size_t lines_with(const fs::path& file, const std::string& text) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);)
    n += line.find(text) != std::string::npos;
  return n;
}

// Node p believes node q is at r's address. Every heartbeat answer names r: p refuses it and
// logs it at a falling rate (it logged an error line every 0.5-2 s forever), both nodes count
// it in a metric, and r, which logged nothing, says which node expects whom at its address.
TEST(cluster_config, a_wrong_peers_name_is_logged_at_a_falling_rate_and_counted_on_both_sides) {
  proctor::test::temp_dir dir;
  auto port_p = proctor::test::free_port();
  auto port_r = proctor::test::free_port();
  node r{
    dir.path() / "r", port_r, {"--name", "r", "--peers", "p=127.0.0.1:" + std::to_string(port_p)}};
  node p{
    dir.path() / "p", port_p, {"--name", "p", "--peers", "q=127.0.0.1:" + std::to_string(port_r)}};
  ASSERT_TRUE(r.start()) << r.log_tail();
  ASSERT_TRUE(p.start()) << p.log_tail();
  using proctor::test::metric;
  ASSERT_TRUE(eventually([&] { return metric(p, "proctor_peer_refusals_total") >= 6; }, 90s, 250ms))
    << p.log_tail();
  auto lines = lines_with(p.log_file(), "answers as node 'r', not 'q'");
  auto answers = metric(p, "proctor_peer_refusals_total");
  EXPECT_GE(lines, 1u) << p.log_tail();
  // The 1st, 2nd, 4th, 8th, ... answer: at most log2(answers) + 1 lines.
  EXPECT_LE(static_cast<double>(lines), std::floor(std::log2(answers)) + 1)
    << lines << " lines for " << answers << " answers\n"
    << p.log_tail();
  EXPECT_GE(metric(r, "proctor_misdirected_heartbeats_total"), 1) << r.log_tail();
  EXPECT_GE(
    lines_with(r.log_file(), "node 'p' expects node 'q' at this address, but this is node 'r'"), 1u)
    << r.log_tail();
}

}  // namespace

// Placement by key (docs/cluster.md): the same nonce sent at once to every node starts one
// tree, whichever node was asked; a key places the root on its slot's owner; with the owner
// down, a submit for its slot is refused, starting nothing, and answered once it is back.
TEST_F(cluster, a_nonce_sent_to_every_node_at_once_starts_one_tree) {
  const auto args = R"({"ledger_dir":")" + ledger().string()
                    + R"(","spread":true,"undo_log":true,"steps":2,"children":3,"depth":1})";
  std::array<proctor::test::run_result, 3> got;
  std::vector<std::thread> clients;
  for (size_t i = 0; i < 3; ++i)
    clients.emplace_back([&, i] {
      got[i] =
        nodes_[i]->ctl({"submit", "demo.ledger", "--args-json", args, "--nonce", "order-42"}, 30s);
    });
  for (auto& t : clients)
    t.join();
  std::set<std::string> ids;
  for (const auto& r : got) {
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    ids.insert(r.out);
  }
  ASSERT_EQ(ids.size(), 1u) << "one nonce, answered with different ids";
  auto id = proctor::test::parse_id(*ids.begin());
  ASSERT_TRUE(id);
  EXPECT_EQ(final_state(1, *id), "SUCCESS");
  EXPECT_EQ(ledger_files(), 2u + 3 * 2);  // one tree's steps, each once

  // A key: the root runs on the slot's owner, whichever node is asked.
  std::set<uint64_t> owners;
  for (int k = 0; k < 9; ++k) {
    auto r = nodes_[k % 3]->ctl({"submit", "demo.noop", "--args-json", R"({"steps":1})", "--key",
                                 "customer-" + std::to_string(k)},
                                30s);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto kid = proctor::test::parse_id(r.out);
    ASSERT_TRUE(kid);
    owners.insert(*kid >> 40);
  }
  EXPECT_GE(owners.size(), 2u) << "nine keys all placed on one node";

  // c down: a nonce of one of c's slots is refused on a and b, starting nothing; once c is
  // back, the same nonce asked of either node runs once, on c.
  const auto c_number =
    static_cast<uint64_t>(nodes_seen_by(0)["c"].fields().at("number").number_value());
  ASSERT_NE(c_number, 0u);
  nodes_[2]->kill();
  ASSERT_TRUE(sees(0, "c", false, 30s));
  ASSERT_TRUE(sees(1, "c", false, 30s));
  std::string refused;  // a nonce of c's: 64 tries miss all of c's slots once in 10^11
  for (int k = 0; k < 64 && refused.empty(); ++k) {
    auto n = "down-" + std::to_string(k);
    auto r = nodes_[k % 2]->ctl({"submit", "demo.noop", "--nonce", n}, 30s);
    if (r.exit_code == 0)
      continue;  // a's or b's: it ran there
    EXPECT_NE(r.err.find("owned by node c, which is unreachable"), std::string::npos) << r.err;
    refused = n;
  }
  ASSERT_FALSE(refused.empty());
  ASSERT_TRUE(nodes_[2]->start()) << nodes_[2]->log_tail();
  ASSERT_TRUE(sees(0, "c", true, 30s));
  ASSERT_TRUE(sees(1, "c", true, 30s));
  auto again = nodes_[0]->ctl({"submit", "demo.noop", "--nonce", refused}, 30s);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(proctor::test::parse_id(again.out).value_or(0) >> 40, c_number);
  auto twice = nodes_[1]->ctl({"submit", "demo.noop", "--nonce", refused}, 30s);
  EXPECT_EQ(twice.exit_code, 0) << twice.err;
  EXPECT_EQ(twice.out, again.out);
}
