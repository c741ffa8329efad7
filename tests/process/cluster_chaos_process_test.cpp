// Seeded SIGKILLs of every node of a three-node cluster while trees that span all three run
// and roll back. Each tree must end as it would have without the kills, and the ledger must
// hold exactly the files of the trees that succeeded: no step lost, none left behind by a
// rollback. PROCTOR_SEED replays a run (the seed is printed with any failure).
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/cluster_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::cluster;

uint64_t seed_from_env() {
  if (const char* s = std::getenv("PROCTOR_SEED"))
    return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

struct planned_tree {
  size_t at = 0;  ///< the node it is submitted to (its root runs there)
  std::string args;
  bool succeeds = true;
  size_t files = 0;  ///< ledger files it leaves if it succeeds
  uint64_t id = 0;
};

/// Files a demo.ledger tree leaves: each procedure one per step, its children alike.
size_t ledger_files_of(int steps, int children, int depth) {
  return static_cast<size_t>(steps)
         + (depth > 0 ? static_cast<size_t>(children) * ledger_files_of(steps, children, depth - 1)
                      : 0);
}

TEST_F(cluster, seeded_sigkills_of_every_node_lose_and_double_no_step_of_trees_spanning_them) {
  auto seed = seed_from_env();
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  RecordProperty("seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return rng() % n; };

  std::vector<planned_tree> trees(6);
  for (auto& t : trees) {
    t.at = pick(3);
    int steps = 2 + static_cast<int>(pick(2));
    int depth = pick(4) == 0 ? 2 : 1;
    int children = depth == 2 ? 2 : 3 + static_cast<int>(pick(4));
    t.args = ",\"steps\":" + std::to_string(steps) + ",\"children\":" + std::to_string(children)
             + ",\"depth\":" + std::to_string(depth)
             + ",\"step_sleep_ms\":" + std::to_string(50 + pick(100));
    if (pick(3) == 0) {
      t.succeeds = false;
      t.args += ",\"fail_at\":" + std::to_string(1 + pick(static_cast<uint64_t>(steps - 1)));
    } else {
      t.files = ledger_files_of(steps, children, depth);
    }
    if (pick(4) == 0)
      t.args += R"(,"spread":false,"place_on":"*")";
    t.id = submit(t.at, t.args);
    ASSERT_NE(t.id, 0u) << t.args;
  }

  // Kills while the trees run: a node, now and then two; each comes back after a while.
  for (int round = 0; round < 6; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds{pick(400)});
    std::vector<size_t> victims{pick(3)};
    if (pick(3) == 0)
      victims.push_back((victims[0] + 1 + pick(2)) % 3);
    for (auto v : victims)
      nodes_[v]->kill();
    std::this_thread::sleep_for(std::chrono::milliseconds{pick(600)});
    for (auto v : victims)
      ASSERT_TRUE(nodes_[v]->start()) << "round " << round << ": " << nodes_[v]->log_tail();
  }

  size_t files = 0;
  for (const auto& t : trees) {
    EXPECT_EQ(final_state(t.at, t.id), t.succeeds ? "SUCCESS" : "ROLLEDBACK")
      << "tree " << t.id << " at node " << names_[t.at] << " (" << t.args << ")\n"
      << nodes_[t.at]->log_tail();
    files += t.files;
  }
  EXPECT_EQ(ledger_files(), files);
}

}  // namespace
