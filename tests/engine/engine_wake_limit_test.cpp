// Wake-ups of passivated children beyond max_live_children (proc_waits.hpp) wait in their
// parent until siblings go down: a wide passivated tree whose timers are all due at once
// never has more than that many children's actors at a time, and every child still fires
// exactly once; an abort that comes while wake-ups wait leaves the waiting children unrun.
#include <string>

#include "actors/procedure/internal/proc_waits.hpp"
#include "tests/engine/engine_passivation_fixture.hpp"

namespace proctor::testing {
namespace {

using passivation_wake_limit_test = passivation_test;

TEST_F(passivation_wake_limit_test, a_parent_spawns_at_most_its_limit_of_due_children_at_once) {
  start_with(std::chrono::milliseconds{20});
  constexpr int count = 1'000;  // all due in the same millisecond: four times the limit
  static_assert(max_live_children * 2 < count, "the limit must be met by this test");
  auto first_at = wall() + 3'000;
  auto id = submit("demo.timers", R"({"count":)" + std::to_string(count) + R"(,"first_at_ms":)"
                                    + std::to_string(first_at) + R"(,"spread_ms":0})");
  ASSERT_TRUE(eventually([&] { return passivated() == 1; })) << "the tree never passivated";
  // Back from the journal, passivated: its children passivated until their deadline.
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{20}; });
  ASSERT_EQ(passivated(), 1);
  ASSERT_LT(wall(), first_at) << "the test machine is too slow for this test's first deadline";
  ASSERT_TRUE(
    eventually([&] { return status(id).state() == pb::SUCCESS; }, std::chrono::seconds{60}))
    << "the tree did not end: a queued wake-up was lost?";
  // At least the wake-ups beyond the limit waited for a sibling (more if the first ones
  // came before the parent spawned any).
  EXPECT_GE(metric("proctor_queued_wakes_total"), count - static_cast<int>(max_live_children));
  auto root = status(id);
  ASSERT_EQ(root.children_size(), count);
  for (auto k : root.children()) {
    EXPECT_EQ(status(k).state(), pb::SUCCESS) << "child " << k;
    EXPECT_EQ(starts(k), 2) << "child " << k << " (once before the restart, once when due)";
  }
}

// The abort comes while the parent's first max_live_children children are live, held at a
// gate in their fired step (or waiting for a run slot behind those at it), and the others'
// wake-ups wait in the parent: the tree rolls back, and none of the waiting children runs
// its fired step, then or after.
TEST_F(passivation_wake_limit_test, an_abort_while_wake_ups_wait_leaves_those_children_unrun) {
  start_with(std::chrono::milliseconds{20});
  constexpr int count = 600;
  static_assert(max_live_children * 2 < count, "the limit must be met by this test");
  auto leaf = probe({act(ProbeAction::SLEEP_FOR, {}, 3'000), act(ProbeAction::NEXT)});
  leaf.mutable_actions(1)->set_gate("fired");
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  for (int i = 0; i < count; ++i)
    *r.mutable_actions(0)->add_children() = leaf;
  auto id = submit("test.probe", json(r));
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }, std::chrono::seconds{30}))
    << "the tree never passivated";
  // Read back with its children passivated (also if a slow machine let their deadlines pass:
  // those fire at once).
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{20}; });
  auto ids = tree(id);
  ASSERT_EQ(ids.size(), static_cast<size_t>(count) + 1);
  // No child can end while the gate is shut: every wake-up beyond the limit waits.
  auto beyond = count - static_cast<int>(max_live_children);
  ASSERT_TRUE(eventually([&] { return metric("proctor_queued_wakes_total") >= beyond; },
                         std::chrono::seconds{30}))
    << "the wake-ups did not wait in the parent";
  auto resp = abort(id);
  ASSERT_EQ(resp.code(), pb::Response::OK) << resp.error();
  world().open("fired");
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::ROLLEDBACK) << s.ShortDebugString();
  EXPECT_EQ(world().check_rolled_back(ids), "");
  auto fired = [&] {
    int n = 0;
    auto starts = world().starts();
    for (size_t i = 1; i < ids.size(); ++i)
      n += starts.count(probe_world::key(ids[i], 2)) > 0 ? 1 : 0;
    return n;
  };
  EXPECT_LE(fired(), static_cast<int>(max_live_children))
    << "children whose wake-ups waited ran after the abort";
  for (size_t i = 1; i < ids.size(); ++i)
    EXPECT_EQ(status(ids[i]).state(), pb::ROLLEDBACK) << "child " << ids[i];
  // Back from the journal, the rolled-back tree runs nothing more.
  auto before = fired();
  restart();
  EXPECT_EQ(status(id).state(), pb::ROLLEDBACK);
  EXPECT_EQ(fired(), before);
  expect_clean_world();
}

}  // namespace
}  // namespace proctor::testing
