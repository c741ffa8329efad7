// The operator's drills in one sequence (issue 47, "Done when"; docs/operations.md, "Drills"):
// node b as three replicas and plain nodes w1 and w2, every process and the CLI on mutual TLS,
// with load all along (trees spread over the three nodes from w1, procedures submitted to b).
// One after another: b's leader SIGKILLed, b's leader frozen, a follower's machine lost (its
// wiped directory started again under its name: refused) and replaced at a new address, b's
// majority lost and recovered on its survivor (plus a new replica), w2 lost with its disk and
// forgotten, w2 started empty under its name, a backup of w2 taken online and restored. Then: every procedure b acknowledged ended SUCCESS with each of
// its steps' ledger files (b lost nothing through four drills); every tree ended; no
// procedure id was handed out twice (every ledger file names its root and its procedure: no
// id under two roots, no root id twice); w2's new incarnation and its restored backup handed
// out ids above every id w2 had handed out before.
//
// scripts/drills.sh runs it alone (PROCTOR_DRILL_LOAD_MS sets how long the load runs between
// drills).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/drills_fixture.hpp"
#include "tests/process/process_harness.hpp"

namespace {

using namespace std::chrono_literals;
using namespace proctor::test;
namespace fs = std::filesystem;
using drill::drills;
using drill::replica;

bool final_state(const std::string& s) {
  return s == "SUCCESS" || s == "ROLLEDBACK" || s == "FAILED";
}

TEST_F(drills, an_operators_drills_under_load_lose_nothing_acknowledged_and_repeat_no_id) {
  start_load();
  under_load();

  // 1. b's leader SIGKILLed: another takes over; the killed one comes back and catches up.
  {
    std::printf("[ drill ] SIGKILL b's leader\n");
    int l = leader();
    ASSERT_GE(l, 0) << logs();
    b_[l].proc->kill();
    ASSERT_GE(leader(30s, l), 0) << logs();
    ASSERT_TRUE(b_[l].proc->launch()) << b_[l].proc->log_tail();
    ASSERT_TRUE(group_whole()) << b_ctl({"replicas"}).out << logs();
    under_load();
  }
  // 2. b's leader frozen (SIGSTOP) for 3 s: replaced; thawed, it follows.
  {
    std::printf("[ drill ] SIGSTOP b's leader\n");
    int l = leader();
    ASSERT_GE(l, 0) << logs();
    ASSERT_EQ(::kill(b_[l].proc->pid(), SIGSTOP), 0);
    int l2 = leader(30s, l);
    std::this_thread::sleep_for(3s);
    ASSERT_EQ(::kill(b_[l].proc->pid(), SIGCONT), 0);
    ASSERT_GE(l2, 0) << logs();
    ASSERT_TRUE(group_whole()) << b_ctl({"replicas"}).out << logs();
    under_load();
  }
  // 3. A follower's machine lost with its disk; replaced by b4 at a new address.
  {
    std::printf("[ drill ] a follower of b lost for good, replaced at a new address\n");
    int l = leader();
    ASSERT_GE(l, 0) << logs();
    const int f = (l + 1) % 3;
    b_[f].proc->kill();
    fs::remove_all(b_[f].proc->data_dir());
    // The operator's mistake first: the wiped machine started again under its old name. It
    // forgot its Raft term and vote, so it is refused, and the group goes on.
    ASSERT_TRUE(b_[f].proc->launch());
    ASSERT_TRUE(eventually([&] { return !b_[f].proc->running(); }, 30s)) << b_[f].proc->log_tail();
    EXPECT_EQ(b_[f].proc->last_exit_code(), 1);
    EXPECT_NE(b_[f].proc->log_tail().find("its group knows it by another data directory"),
              std::string::npos)
      << b_[f].proc->log_tail();
    auto removed = b_ctl({"replicas", "remove", b_[f].name});
    ASSERT_EQ(removed.exit_code, 0) << describe(removed) << logs();
    replica b4{"b4", free_port(), free_port(), nullptr};
    std::string group;
    for (int i = 0; i < 3; ++i)
      if (i != f)
        group += b_[i].spec() + ",";
    b4.proc = make_replica(b4, group + b4.spec(), {"--join"});
    ASSERT_TRUE(b4.proc->launch()) << b4.proc->log_tail();
    auto added = b_ctl({"replicas", "add", b4.spec(), "--timeout-s", "60"});
    ASSERT_EQ(added.exit_code, 0) << describe(added) << logs() << b4.proc->log_tail();
    b_.erase(b_.begin() + f);
    b_.push_back(std::move(b4));
    set_b_addresses();
    ASSERT_TRUE(group_whole()) << b_ctl({"replicas"}).out << logs();
    under_load();
  }
  // 4. b's majority lost (two replicas with their disks): the survivor with the longest log
  // (the leader) is made the group (--recover-group), and a new replica b5 joins it.
  {
    std::printf("[ drill ] b's majority lost, recovered on its survivor\n");
    int s = leader();
    ASSERT_GE(s, 0) << logs();
    for (int i = 0; i < 3; ++i)
      if (i != s) {
        b_[i].proc->kill();
        fs::remove_all(b_[i].proc->data_dir());
      }
    EXPECT_TRUE(eventually(
      [&] {
        return b_[s].proc->ctl({"list", "--local", "--json"}, 10s).exit_code != 0;
      },
      30s));
    b_[s].proc->kill();
    replica survivor = std::move(b_[s]);
    b_.clear();
    survivor.proc = make_replica(survivor, survivor.spec(), {"--recover-group"});
    ASSERT_TRUE(survivor.proc->launch()) << survivor.proc->log_tail();
    b_.push_back(std::move(survivor));
    set_b_addresses();
    ASSERT_EQ(leader(60s), 0) << logs();
    replica b5{"b5", free_port(), free_port(), nullptr};
    b5.proc = make_replica(b5, b_[0].spec() + "," + b5.spec(), {"--join"});
    ASSERT_TRUE(b5.proc->launch()) << b5.proc->log_tail();
    run_result added;
    // The survivor forgets the lost replicas' data directories first; until then an add may
    // be refused, changing nothing.
    ASSERT_TRUE(eventually(
      [&] {
        added = b_ctl({"replicas", "add", b5.spec(), "--timeout-s", "60"});
        return added.exit_code == 0;
      },
      120s, 1s))
      << describe(added) << logs() << b5.proc->log_tail();
    b_.push_back(std::move(b5));
    set_b_addresses();
    ASSERT_TRUE(group_whole()) << b_ctl({"replicas"}).out << logs();
    under_load();
  }
  // 5. w2 lost with its disk: forgotten on b and w1, then started empty under its name (a new
  // incarnation), its ids above every id its old incarnation handed out.
  uint64_t w2_old = submit_to_w2();
  uint64_t w2_new = 0;
  {
    std::printf("[ drill ] w2 lost with its disk, forgotten, started empty\n");
    w_[1]->kill();
    fs::remove_all(w_dir(1));
    forget_w2();
    w_[1] = make_w(1, w_dir(1), {});
    ASSERT_TRUE(w_[1]->start()) << w_[1]->log_tail();
    w2_new = submit_to_w2();
    EXPECT_GT(w2_new, w2_old);
    under_load();
  }
  stop_load();

  // Every tree ends (trees with a child on w2's old incarnation fail and undo the rest).
  std::map<uint64_t, std::string> tree_states, direct_states;
  auto all_ended = [](const std::vector<uint64_t>& ids, const std::map<uint64_t, std::string>& m) {
    return std::all_of(ids.begin(), ids.end(), [&](uint64_t id) {
      auto it = m.find(id);
      return it != m.end() && final_state(it->second);
    });
  };
  EXPECT_TRUE(eventually(
    [&] {
      tree_states = states(w_[0]->ctl({"list", "--local", "--json"}, 30s));
      direct_states = states(b_ctl({"list", "--local", "--json"}, 30s));
      return all_ended(acked_.trees, tree_states) && all_ended(acked_.direct, direct_states);
    },
    180s, 1s))
    << logs();

  // 6. An online backup of w2, work acknowledged after it, w2 lost, forgotten and restored
  // from the backup: a new incarnation with ids above everything w2 handed out.
  {
    std::printf("[ drill ] w2 backed up online, lost, forgotten, restored\n");
    const auto backup = (dir_.path() / "w2-backup").string();
    auto b = w_[1]->ctl({"backup", backup}, 60s);
    ASSERT_EQ(b.exit_code, 0) << describe(b) << w_[1]->log_tail();
    uint64_t after = submit_to_w2();
    ASSERT_GT(after, w2_new);
    w_[1]->kill();
    forget_w2();
    w_[1] = make_w(1, dir_.path() / "w2-restored", {"--restore-from", backup});
    ASSERT_TRUE(w_[1]->start()) << w_[1]->log_tail();
    auto gone = w_[1]->ctl({"status", std::to_string(after)}, 30s);
    EXPECT_EQ(gone.exit_code, 1) << describe(gone);
    auto kept = w_[1]->ctl({"status", std::to_string(w2_new), "--json"}, 30s);
    auto v = parse_json(kept.out);
    EXPECT_EQ(v ? state_of(*v) : describe(kept), "SUCCESS");
    EXPECT_GT(submit_to_w2(), after);
    // The restored w2 takes part: a tree from w1 spread over the three nodes succeeds.
    auto t = w_[0]->ctl({"submit", "demo.ledger", "--args-json",
                         R"({"steps":2,"children":3,"depth":1,"spread":true,"ledger_dir":")"
                           + ledger().string() + "\"}"},
                        60s);
    ASSERT_EQ(t.exit_code, 0) << describe(t);
    auto w = w_[0]->ctl({"wait", trim(t.out), "--json", "--timeout-s", "60"}, 90s);
    auto tv = parse_json(w.out);
    EXPECT_EQ(tv ? state_of(*tv) : describe(w), "SUCCESS") << logs();
  }

  // b lost nothing it acknowledged: every procedure ended SUCCESS with its three steps.
  std::printf("[ info ] %zu trees from w1, %zu procedures on b acknowledged\n", acked_.trees.size(),
              acked_.direct.size());
  EXPECT_GT(acked_.trees.size(), 0u);
  EXPECT_GT(acked_.direct.size(), 0u);
  std::map<uint64_t, std::set<std::string>> steps_of;  // root -> "id.step"
  std::map<uint64_t, uint64_t> root_of;                // procedure id -> its root
  for (const auto& f : file_names(ledger())) {
    auto a = f.find('.');
    auto b = f.find('.', a + 1);
    if (a == std::string::npos || b == std::string::npos)
      continue;  // undo.log
    const uint64_t root = std::stoull(f.substr(0, a));
    const uint64_t id = std::stoull(f.substr(a + 1, b - a - 1));
    steps_of[root].insert(f.substr(a + 1));
    auto [it, fresh] = root_of.emplace(id, root);
    EXPECT_TRUE(fresh || it->second == root)
      << "id " << id << " was handed out twice: under roots " << it->second << " and " << root;
  }
  size_t succeeded = 0;
  for (auto id : acked_.direct) {
    EXPECT_EQ(direct_states[id], "SUCCESS") << "procedure " << id << " on b";
    EXPECT_EQ(steps_of[id].size(), 3u) << "procedure " << id << " on b";
  }
  for (auto id : acked_.trees) {
    if (tree_states[id] == "SUCCESS") {
      ++succeeded;
      EXPECT_EQ(steps_of[id].size(), 8u) << "tree " << id;  // 2 steps + 3 children × 2
    }
  }
  std::printf("[ info ] %zu of the trees succeeded (the others had a part on w2's lost "
              "incarnation)\n",
              succeeded);
  // No root id twice, across b, w1 and w2's three incarnations.
  std::set<uint64_t> roots(acked_.trees.begin(), acked_.trees.end());
  roots.insert(acked_.direct.begin(), acked_.direct.end());
  EXPECT_EQ(roots.size(), acked_.trees.size() + acked_.direct.size());
}

}  // namespace
