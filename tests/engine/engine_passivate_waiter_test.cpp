// Waiters that give up their actors while their tree runs (proc_passivate_waiter.cpp): a leaf
// waiting for its timer or its event, thawed after its tree could not passivate as a whole, is held
// passivated by its parent until its wake-up, at depth 2 and 3, through aborts, events and a node
// restart. The random test's seed is printed.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "tests/engine/engine_passivation_fixture.hpp"

namespace proctor::testing {
namespace {

class passivate_waiter_test : public passivation_test {
protected:
  /// root -> [a step waiting at `gate`, leaves that wait (`waits`: SLEEP_FOR or SUSPEND; the
  /// last one, or the last two of three or more, under an intermediate parent, at depth 3)];
  /// each leaf runs NEXT once woken, the intermediate parent once they ended.
  ProbeData sleepers_beside_a_busy_step(const std::string& gate,
                                        const std::vector<ProbeAction>& waits) {
    auto busy = probe({act(ProbeAction::NEXT)});
    busy.mutable_actions(0)->set_gate(gate);
    auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
    *r.mutable_actions(0)->add_children() = busy;
    size_t deep = waits.size() == 1 ? 0 : waits.size() < 3 ? 1 : 2;
    auto mid = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
    for (size_t i = 0; i < waits.size(); ++i) {
      auto w = probe({waits[i], act(ProbeAction::NEXT)});
      auto& under = i + deep < waits.size() ? r : mid;
      *under.mutable_actions(0)->add_children() = w;
    }
    if (deep > 0)
      *r.mutable_actions(0)->add_children() = mid;
    return r;
  }
};

// A parent thawed while one of its children ran goes as soon as that child ends, its other
// children having gone: at the child's end, not at its root's next passivation attempt.
TEST_F(passivate_waiter_test, a_parent_goes_when_its_last_running_child_ends) {
  start_with(std::chrono::seconds{1});  // attempts a second apart at least
  auto quick = probe({act(ProbeAction::NEXT)});
  quick.mutable_actions(0)->set_gate("quick");
  auto mid = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *mid.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::SUSPEND, "never"), act(ProbeAction::NEXT)});
  *mid.mutable_actions(0)->add_children() = quick;
  auto busy = probe({act(ProbeAction::NEXT)});
  busy.mutable_actions(0)->set_gate("busy");
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = busy;
  *r.mutable_actions(0)->add_children() = mid;
  auto id = submit("test.probe", json(r));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 1; }))
    << "the event waiter kept its actor";
  auto attempts = metric("proctor_passivation_attempts_total");
  world().open("quick");
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 2; }))
    << "the parent kept its actor";
  EXPECT_EQ(metric("proctor_passivation_attempts_total"), attempts)
    << "the parent went only at the next attempt";
  ASSERT_EQ(abort(id).code(), pb::Response::OK);
  world().open("busy");
  ASSERT_EQ(wait(id).state(), pb::ROLLEDBACK);
  EXPECT_EQ(world().check_rolled_back(tree(id)), "");
  expect_clean_world();
}

// A procedure waiting for its timer gives up its actor while a sibling's step runs (its tree
// cannot passivate as a whole), at depth 2 and 3; each comes back once, when due, and runs
// its next state once (proc_passivate_waiter.cpp).
TEST_F(passivate_waiter_test, timer_waiters_give_up_their_actors_while_their_tree_runs) {
  start_with(std::chrono::milliseconds{20});
  auto r = sleepers_beside_a_busy_step(
    "busy", {act(ProbeAction::SLEEP_FOR, {}, 2'500), act(ProbeAction::SLEEP_FOR, {}, 3'000)});
  auto id = submit("test.probe", json(r));
  std::vector<uint64_t> ids;  // root, busy, sleeper, mid, sleeper at depth 3
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 5; }));
  const std::vector<uint64_t> sleepers{ids[2], ids[4]};
  // The parent at depth 2 goes too once its only child did (a passivated subtree of two).
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 3; }))
    << "the timer waiters, or the parent of one, kept their actors";
  EXPECT_EQ(passivated(), 0) << "the tree passivated with a step running";
  for (auto s : sleepers) {
    EXPECT_EQ(starts(s), 1);
    EXPECT_EQ(status(s).state(), pb::WAITING_TIMEOUT);
  }
  for (auto s : sleepers)
    ASSERT_TRUE(
      eventually([&] { return status(s).state() == pb::SUCCESS; }, std::chrono::seconds{15}));
  for (auto s : sleepers) {
    EXPECT_EQ(starts(s), 2) << "procedure " << s << ": started, then woken once";
    EXPECT_EQ(world().starts()[probe_world::key(s, 2)], 1) << "its next state ran once";
  }
  EXPECT_EQ(metric("proctor_passivated_procedures"), 0);
  world().open("busy");
  ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  expect_clean_world();
}

// The same for procedures waiting for an event: the event comes through the parent, which
// spawns the child to take it; one with a deadline comes back when the deadline passes.
TEST_F(passivate_waiter_test, event_waiters_give_up_their_actors_while_their_tree_runs) {
  start_with(std::chrono::milliseconds{20});
  auto r = sleepers_beside_a_busy_step(
    "busy", {act(ProbeAction::SUSPEND, "go"), act(ProbeAction::SUSPEND, "late", 2'500)});
  auto id = submit("test.probe", json(r));
  std::vector<uint64_t> ids;  // root, busy, waiter, mid, waiter at depth 3
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 5; }));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 3; }))
    << "the event waiters, or the parent of one, kept their actors";
  EXPECT_EQ(status(ids[2]).waiting_for(), "event go");
  EXPECT_EQ(starts(ids[2]), 1);
  auto e = event("go", "42");
  ASSERT_EQ(e.code(), pb::Response::OK) << e.error();
  EXPECT_NE(e.text().find("delivered to 1 "), std::string::npos) << e.text();
  ASSERT_TRUE(eventually([&] { return status(ids[2]).state() == pb::SUCCESS; }));
  EXPECT_EQ(starts(ids[2]), 2);
  // No event: its deadline brings it back (a probe resumes after a timed-out wait).
  ASSERT_TRUE(
    eventually([&] { return status(ids[4]).state() == pb::SUCCESS; }, std::chrono::seconds{15}))
    << "the deadline did not bring the waiter back";
  EXPECT_EQ(starts(ids[4]), 2);
  EXPECT_EQ(metric("proctor_passivated_procedures"), 0);
  world().open("busy");
  ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  expect_clean_world();
}

// A node that stops while waiters are passivated under a running tree loses nothing: their
// waits are in the journal (giving up an actor writes nothing), and after the restart each
// is woken once, by its timer or its event, and runs its next state once.
TEST_F(passivate_waiter_test, waiters_that_gave_up_their_actors_are_woken_once_after_a_restart) {
  start_with(std::chrono::milliseconds{20});
  auto r = sleepers_beside_a_busy_step(
    "busy", {act(ProbeAction::SLEEP_FOR, {}, 3'000), act(ProbeAction::SUSPEND, "after")});
  auto id = submit("test.probe", json(r));
  std::vector<uint64_t> ids;  // root, busy, timer waiter, mid, event waiter at depth 3
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 5; }));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 3; }));
  world().open("busy");  // the busy step ran partly: it runs again after the restart
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{20}; });
  EXPECT_EQ(status(ids[2]).state(), pb::WAITING_TIMEOUT);
  EXPECT_EQ(status(ids[4]).state(), pb::WAITING);
  auto e = event("after", "1");
  ASSERT_EQ(e.code(), pb::Response::OK) << e.error();
  auto s = wait(id, std::chrono::seconds{30});
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  for (auto w : {ids[2], ids[4]})
    EXPECT_EQ(world().starts()[probe_world::key(w, 2)], 1)
      << "the next state of waiter " << w << " ran more than once, or not at all";
  expect_clean_world();
}

// Procedures that gave up their actors while their tree ran (one waiting for a timer, one for
// an event) are stopped and rolled back with it: the state that committed their wait is
// undone, the one that never started is not.
TEST_F(passivate_waiter_test, an_abort_rolls_back_waiters_that_gave_up_their_actors) {
  start_with(std::chrono::milliseconds{20});
  auto r = sleepers_beside_a_busy_step(
    "busy", {act(ProbeAction::SLEEP_FOR, {}, 60'000), act(ProbeAction::SUSPEND, "never")});
  auto id = submit("test.probe", json(r));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 3; }));
  ASSERT_EQ(abort(id).code(), pb::Response::OK);
  world().open("busy");
  ASSERT_EQ(wait(id).state(), pb::ROLLEDBACK);
  auto ids = tree(id);
  EXPECT_EQ(world().check_rolled_back(ids), "");
  EXPECT_EQ(metric("proctor_passivated_procedures"), 0);
  expect_clean_world();
}

// Random moments: the busy step ends, the tree is aborted, or events come, while timer and
// event waiters offer, give up their actors or come due; each tree ends once, as it should.
TEST_F(passivate_waiter_test, waiters_giving_up_their_actors_race_with_events_aborts_and_ends) {
  auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  start_with(std::chrono::milliseconds{0});
  struct tree_case {
    uint64_t id = 0;
    std::string gate;
    std::vector<std::string> keys;  ///< of its event waiters
    bool aborted = false;
  };
  std::vector<tree_case> cases;
  for (int i = 0; i < 16; ++i) {
    tree_case t;
    t.gate = "busy" + std::to_string(i);
    std::vector<ProbeAction> waits;
    for (size_t k = 0, n = 1 + rng() % 3; k < n; ++k) {
      if (rng() % 2 == 0) {
        waits.push_back(act(ProbeAction::SLEEP_FOR, {}, 1'050 + static_cast<int>(rng() % 1'500)));
        continue;
      }
      t.keys.push_back("ev" + std::to_string(i) + "." + std::to_string(k));
      waits.push_back(act(ProbeAction::SUSPEND, t.keys.back()));
    }
    t.id = submit("test.probe", json(sleepers_beside_a_busy_step(t.gate, waits)));
    cases.push_back(t);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds{2'500};
  std::vector<size_t> order(cases.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  for (auto i : order) {
    std::this_thread::sleep_for(std::chrono::milliseconds{rng() % 150});
    auto& t = cases[i];
    if (rng() % 3 == 0 && abort(t.id).code() == pb::Response::OK)
      t.aborted = true;
    if (rng() % 2 == 0)
      world().open(t.gate);
    for (const auto& k : t.keys)
      if (rng() % 2 == 0)
        event(k, "1");
  }
  std::this_thread::sleep_until(deadline - std::chrono::milliseconds{rng() % 2'000});
  for (auto& t : cases) {
    world().open(t.gate);
    for (const auto& k : t.keys)
      event(k, "2");  // a second one for some: events are kept, and each wakes its waiter once
  }
  for (auto& t : cases) {
    auto s = wait(t.id, std::chrono::seconds{30});
    auto ids = tree(t.id);
    if (t.aborted) {
      EXPECT_EQ(s.state(), pb::ROLLEDBACK) << "tree " << t.id << ": " << s.ShortDebugString();
      EXPECT_EQ(world().check_rolled_back(ids), "")
        << "tree (depth first) " << ::testing::PrintToString(ids);
      continue;
    }
    EXPECT_EQ(s.state(), pb::SUCCESS) << "tree " << t.id << ": " << s.ShortDebugString();
    for (auto p : ids)
      for (int state = 1; state <= 3; ++state)
        EXPECT_LE(world().starts()[probe_world::key(p, state)], 1)
          << "state " << state << " of procedure " << p << " ran twice";
  }
  EXPECT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 0; }));
  expect_clean_world();
}

}  // namespace
}  // namespace proctor::testing
