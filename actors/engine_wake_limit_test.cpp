// Wake-ups of dormant children beyond max_live_children (proc_waits.hpp) wait in their
// parent until siblings go down: a wide passivated tree whose timers are all due at once
// never has more than that many children's actors at a time, and every child still fires
// exactly once.
#include "actors/engine_passivation_fixture.hpp"
#include "actors/proc_waits.hpp"

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
  // Back from the journal, passivated: its children dormant until their deadline.
  restart([](node_options& o) { o.executor.hibernate_after = std::chrono::milliseconds{20}; });
  ASSERT_EQ(passivated(), 1);
  ASSERT_LT(wall(), first_at) << "the test machine is too slow for this test's first deadline";
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::SUCCESS; },
                         std::chrono::seconds{60}))
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

} // namespace
} // namespace proctor::testing
