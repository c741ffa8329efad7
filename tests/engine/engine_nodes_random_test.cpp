// Randomized trees across three in-process nodes: random shapes spread over the nodes,
// failures, aborts at random moments, nodes cut off and restarted while trees run and roll
// back. Every tree must end as expected (an acknowledged abort or a failure: ROLLEDBACK
// with no ledger file left; otherwise SUCCESS with every step's file exactly once), and the
// fragments on other nodes must be released once their tree ended.
//
// The seed is printed with every failure; PROCTOR_SEED=<n> replays one, PROCTOR_ROUNDS=<n>
// runs more rounds.
#include <cstdlib>
#include <random>

#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::strtoull(v, nullptr, 10) : fallback;
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    n += e.path().filename() == "undo.log" ? 0 : 1;
  return n;
}

using nodes_random = nodes_fixture;

TEST_F(nodes_random, trees_across_nodes_end_as_expected_whatever_happens_to_the_nodes) {
  auto seed = env_or("PROCTOR_SEED", std::random_device{}());
  auto rounds = env_or("PROCTOR_ROUNDS", 12);
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  RecordProperty("seed", std::to_string(seed));
  spdlog::warn("nodes_random: PROCTOR_SEED={}", seed);  // also when the process dies
  std::mt19937_64 rng(seed);
  const std::vector<std::string> names{"a", "b", "c"};
  for (uint64_t round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto ledger = dir_ + "/ledger/" + std::to_string(round);
    std::filesystem::create_directories(ledger);
    int steps = 1 + static_cast<int>(rng() % 3);
    int children = static_cast<int>(rng() % 5);
    int depth = static_cast<int>(rng() % 3);
    int fail_at = rng() % 4 == 0 ? static_cast<int>(rng() % static_cast<uint64_t>(steps)) : -1;
    int sleep_ms = static_cast<int>(rng() % 4);
    auto at = names[rng() % 3];
    auto args = R"({"ledger_dir":")" + ledger + R"(","spread":true,"steps":)"
                + std::to_string(steps) + R"(,"children":)" + std::to_string(children)
                + R"(,"depth":)" + std::to_string(depth) + R"(,"fail_at":)"
                + std::to_string(fail_at) + R"(,"step_sleep_ms":)" + std::to_string(sleep_ms) + "}";
    SCOPED_TRACE(args + " at " + at);
    auto id = submit(at, args);
    ASSERT_NE(id, 0u);
    // Disturb: cut a node off for a while, restart one, abort the tree — or not.
    bool aborted = false;
    auto dice = rng() % 6;
    std::this_thread::sleep_for(std::chrono::milliseconds{rng() % 30});
    if (dice == 0) {
      auto victim = names[rng() % 3];
      cut(victim);
      std::this_thread::sleep_for(std::chrono::milliseconds{rng() % 60});
      uncut(victim);
    } else if (dice == 1) {
      auto victim = names[rng() % 3];
      if (victim != at) {
        stop_node(victim);
        start_node(victim);
      }
    } else if (dice == 2) {
      pb::Request req;
      req.mutable_abort()->set_id(id);
      aborted = call(at, req).code() == pb::Response::OK;
    }
    auto s = wait(at, id);
    int total = steps, width = 1;
    for (int d = 0; d < depth && children > 0; ++d) {
      width *= children;
      total += width * steps;
    }
    if (aborted || fail_at >= 0) {
      EXPECT_EQ(s.state(), pb::ROLLEDBACK) << s.error();
      EXPECT_EQ(files_in(ledger), 0u);
    } else {
      EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
      EXPECT_EQ(files_in(ledger), static_cast<size_t>(total));
    }
    if (::testing::Test::HasFailure())
      return;
  }
  // Every fragment was released once its tree ended.
  for (const auto& n : names)
    EXPECT_TRUE(eventually([&] { return fragments_on(n) == 0; }))
      << n << " holds " << fragments_on(n) << " fragment(s)";
}

}  // namespace
}  // namespace proctor::testing
