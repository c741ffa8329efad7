// Parents waiting for their children give up their actors with their subtrees (passivation at any
// depth, "children" among the waits): a parent whose children all gave up theirs while the tree
// runs goes too (proc_passivate_waiter.cpp), and a tree woken from its image keeps each subtree
// that only waits passivated until the earliest wake-up in it (proc_passivated_children.cpp). Each
// is checked for the wake-ups, an abort, a bypass and a restart.
#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "tests/engine/engine_passivation_fixture.hpp"

namespace proctor::testing {
namespace {

class passivate_subtree_test : public passivation_test {
protected:
  /// root -> [a step waiting at "busy", mid -> [a timer of `timer_ms`, an event `key`,
  /// sub -> [a timer of `deep_timer_ms`]]]; each waiter runs NEXT once woken, each parent
  /// NEXT once its children ended.
  ProbeData deep_waiters_beside_a_busy_step(int timer_ms, const std::string& key,
                                            int deep_timer_ms) {
    auto busy = probe({act(ProbeAction::NEXT)});
    busy.mutable_actions(0)->set_gate("busy");
    auto sub = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
    *sub.mutable_actions(0)->add_children() =
      probe({act(ProbeAction::SLEEP_FOR, {}, deep_timer_ms), act(ProbeAction::NEXT)});
    auto mid = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
    *mid.mutable_actions(0)->add_children() =
      probe({act(ProbeAction::SLEEP_FOR, {}, timer_ms), act(ProbeAction::NEXT)});
    *mid.mutable_actions(0)->add_children() =
      probe({act(ProbeAction::SUSPEND, key), act(ProbeAction::NEXT)});
    *mid.mutable_actions(0)->add_children() = sub;
    auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
    *r.mutable_actions(0)->add_children() = busy;
    *r.mutable_actions(0)->add_children() = mid;
    return r;
  }

  /// The ids of deep_waiters_beside_a_busy_step's tree once all of it is journaled.
  struct deep_ids {
    uint64_t root = 0, busy = 0, mid = 0, timer = 0, event = 0, sub = 0, deep = 0;
  };
  deep_ids ids_of(uint64_t root) {
    std::vector<uint64_t> ids;  // depth first: root, busy, mid, timer, event, sub, deep
    EXPECT_TRUE(eventually([&] { return (ids = tree(root)).size() == 7; }));
    if (ids.size() != 7)
      return {};
    return {ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]};
  }

  /// Submits deep_waiters_beside_a_busy_step(...) and waits until mid, its three children
  /// and sub's child (five procedures) gave up their actors; false if they did not.
  bool submit_deep(int timer_ms, const std::string& key, int deep_timer_ms, deep_ids* t) {
    auto id =
      submit("test.probe", json(deep_waiters_beside_a_busy_step(timer_ms, key, deep_timer_ms)));
    *t = ids_of(id);
    t->root = id;
    return t->deep != 0 && eventually([&] { return metric("proctor_passivated_procedures") == 5; });
  }

  /// Every state of every procedure of the tree ran at most once.
  void expect_each_state_once(uint64_t root) {
    for (auto p : tree(root))
      for (int state = 1; state <= 3; ++state)
        EXPECT_LE(world().starts()[probe_world::key(p, state)], 1)
          << "state " << state << " of procedure " << p << " ran twice";
  }
};

// While a sibling's step runs, a parent whose children all gave up their actors gives up its
// own, at depth 2 and 3; the event of one of its children brings back that child and the
// parents above it, not the rest; the timers then come in their order, and each state runs
// once.
TEST_F(passivate_subtree_test, a_parent_whose_children_all_gave_up_their_actors_gives_up_its_own) {
  start_with(std::chrono::milliseconds{20});
  deep_ids t;
  ASSERT_TRUE(submit_deep(3'000, "mid.ev", 4'000, &t)) << "the parents kept their actors";
  auto id = t.root;
  EXPECT_EQ(passivated(), 0) << "the tree passivated with a step running";
  for (auto p : {t.mid, t.sub, t.timer, t.event, t.deep})
    EXPECT_EQ(starts(p), 1) << "procedure " << p;
  EXPECT_EQ(status(t.mid).waiting_for(), "children");
  auto e = event("mid.ev", "7");
  ASSERT_EQ(e.code(), pb::Response::OK) << e.error();
  EXPECT_NE(e.text().find("delivered to 1 "), std::string::npos) << e.text();
  ASSERT_TRUE(eventually([&] { return status(t.event).state() == pb::SUCCESS; }));
  EXPECT_EQ(starts(t.mid), 2) << "the event's parent came back to spawn it";
  EXPECT_EQ(starts(t.event), 2);
  EXPECT_EQ(starts(t.sub), 1) << "a subtree whose time had not come was spawned";
  EXPECT_EQ(starts(t.deep), 1);
  for (auto p : {t.timer, t.deep})
    ASSERT_TRUE(
      eventually([&] { return status(p).state() == pb::SUCCESS; }, std::chrono::seconds{15}));
  ASSERT_TRUE(eventually([&] { return status(t.mid).state() == pb::SUCCESS; }));
  EXPECT_EQ(starts(t.deep), 2) << "started, then woken once";
  EXPECT_EQ(starts(t.timer), 2) << "started, then woken once";
  EXPECT_EQ(metric("proctor_passivated_procedures"), 0);
  world().open("busy");
  ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  expect_each_state_once(id);
  expect_clean_world();
}

// A tree woken from passivation by one event spawns the subtree that event is in, down to
// its waiter, and keeps its other subtree passivated as a whole (its parent unspawned too) until
// that subtree's timer.
TEST_F(passivate_subtree_test, a_woken_tree_keeps_its_waiting_subtrees_passivated) {
  start_with(std::chrono::milliseconds{20});
  auto a = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *a.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::SLEEP_FOR, {}, 4'000), act(ProbeAction::NEXT)});
  auto b = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *b.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::SUSPEND, "b.ev"), act(ProbeAction::NEXT)});
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = a;
  *r.mutable_actions(0)->add_children() = b;
  auto id = submit("test.probe", json(r));
  std::vector<uint64_t> ids;  // root, a, a's timer, b, b's waiter
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 5; }));
  ASSERT_TRUE(eventually([&] { return passivated() == 1; })) << "the tree never passivated";
  ASSERT_EQ(event("b.ev", "1").code(), pb::Response::OK);
  ASSERT_TRUE(eventually([&] { return status(ids[3]).state() == pb::SUCCESS; }));
  EXPECT_EQ(starts(ids[3]), 2);
  EXPECT_EQ(starts(ids[4]), 2);
  EXPECT_EQ(starts(ids[1]), 1) << "a subtree whose time had not come was spawned";
  EXPECT_EQ(starts(ids[2]), 1);
  auto s = wait(id, std::chrono::seconds{20});
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(starts(ids[2]), 2) << "its timer brought the subtree back once";
  expect_each_state_once(id);
  EXPECT_EQ(metric("proctor_passivated_procedures"), 0);
  expect_clean_world();
}

// An abort stops passivated subtrees with the rest: every procedure in them reports its waiting
// state never started, so the rollback undoes exactly the states that committed.
TEST_F(passivate_subtree_test, an_abort_rolls_back_passivated_subtrees) {
  start_with(std::chrono::milliseconds{20});
  deep_ids t;
  ASSERT_TRUE(submit_deep(60'000, "never", 60'000, &t)) << "the parents kept their actors";
  auto id = t.root;
  ASSERT_EQ(abort(id).code(), pb::Response::OK);
  world().open("busy");
  ASSERT_EQ(wait(id).state(), pb::ROLLEDBACK);
  auto ids = tree(id);
  EXPECT_EQ(world().check_rolled_back(ids), "");
  EXPECT_EQ(metric("proctor_passivated_procedures"), 0);
  expect_clean_world();
}

// An operator's bypass of a procedure at the bottom of a passivated subtree brings back the
// parents on its way down, then the procedure, which ends without running its next state;
// its parents carry on.
TEST_F(passivate_subtree_test, a_procedure_in_a_passivated_subtree_is_spawned_to_be_bypassed) {
  start_with(std::chrono::milliseconds{20});
  deep_ids t;
  ASSERT_TRUE(submit_deep(1'500, "b.ev", 60'000, &t)) << "the parents kept their actors";
  auto id = t.root;
  pb::Request req;
  req.mutable_bypass()->set_id(t.deep);
  req.mutable_bypass()->set_force(true);
  auto r = call(req);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  ASSERT_TRUE(eventually([&] { return status(t.sub).state() == pb::SUCCESS; }));
  EXPECT_EQ(starts(t.deep), 2) << "started, then spawned for the bypass";
  EXPECT_EQ(world().starts().count(probe_world::key(t.deep, 2)), 0u) << "it ran on";
  EXPECT_EQ(world().starts()[probe_world::key(t.sub, 2)], 1) << "its parent carried on";
  ASSERT_EQ(event("b.ev", "1").code(), pb::Response::OK);
  world().open("busy");
  auto s = wait(id, std::chrono::seconds{20});
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  expect_each_state_once(id);
  expect_clean_world();
}

// A node that stops with passivated subtrees loses nothing: after the restart the tree comes
// back from the journal (its busy step runs again), the subtrees passivated, and each waiter is
// woken once, by its timer or its event.
TEST_F(passivate_subtree_test, passivated_subtrees_are_woken_once_after_a_restart) {
  start_with(std::chrono::milliseconds{20});
  deep_ids t;
  ASSERT_TRUE(submit_deep(2'000, "after", 3'000, &t)) << "the parents kept their actors";
  auto id = t.root;
  world().open("busy");  // the busy step ran partly: it runs again after the restart
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{20}; });
  ASSERT_EQ(event("after", "1").code(), pb::Response::OK);
  auto s = wait(id, std::chrono::seconds{30});
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  for (auto w : {t.timer, t.event, t.deep})
    EXPECT_EQ(world().starts()[probe_world::key(w, 2)], 1)
      << "the next state of waiter " << w << " ran more than once, or not at all";
  for (auto p : {t.mid, t.sub})
    EXPECT_EQ(world().starts()[probe_world::key(p, 2)], 1) << "parent " << p;
  expect_clean_world();
}

// A parent that goes after some of its children ended takes their ends along in the image
// it composes (not read from the journal): back from it, it joins with their results, and
// the tree's summary, read back after a node restart, holds every ended procedure of its
// subtree as it ended, its children and results included.
TEST_F(passivate_subtree_test, a_parent_gone_after_children_ended_keeps_their_ends) {
  start_with(std::chrono::milliseconds{20});
  auto busy = probe({act(ProbeAction::NEXT)});
  busy.mutable_actions(0)->set_gate("busy");
  auto c2 = probe({act(ProbeAction::SPAWN), act(ProbeAction::FAIL_TWICE)});
  *c2.mutable_actions(0)->add_children() = probe({act(ProbeAction::FAIL_TWICE)});
  auto mid = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *mid.mutable_actions(0)->add_children() = probe({act(ProbeAction::FAIL_TWICE)});
  *mid.mutable_actions(0)->add_children() = c2;
  *mid.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::SLEEP_FOR, {}, 2'500), act(ProbeAction::NEXT)});
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = busy;
  *r.mutable_actions(0)->add_children() = mid;
  auto id = submit("test.probe", json(r));
  std::vector<uint64_t> ids;  // root, busy, mid, c1, c2, c2's child, the timer's waiter
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 7; }));
  const auto mid_id = ids[2], c1 = ids[3], c2_id = ids[4], g = ids[5], w = ids[6];
  ASSERT_TRUE(eventually([&] { return status(c2_id).state() == pb::SUCCESS; }));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 2; }))
    << "mid did not go with its waiting child after the others ended";
  EXPECT_EQ(starts(mid_id), 1);
  ASSERT_TRUE(
    eventually([&] { return status(mid_id).state() == pb::SUCCESS; }, std::chrono::seconds{15}));
  EXPECT_EQ(starts(mid_id), 2) << "the timer brought mid back once";
  EXPECT_EQ(world().starts()[probe_world::key(mid_id, 2)], 1) << "mid joined once";
  world().open("busy");
  ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{20}; });
  auto m = status(mid_id);
  EXPECT_EQ(std::vector<uint64_t>(m.children().begin(), m.children().end()),
            (std::vector<uint64_t>{c1, c2_id, w}));
  auto c2s = status(c2_id);
  EXPECT_EQ(std::vector<uint64_t>(c2s.children().begin(), c2s.children().end()),
            std::vector<uint64_t>{g});
  for (auto p : {c1, c2_id, g, w}) {
    auto st = status(p);
    EXPECT_EQ(st.state(), pb::SUCCESS) << "procedure " << p;
    EXPECT_EQ(st.parent_id(), p == g ? c2_id : mid_id) << "procedure " << p;
  }
  // FAIL_TWICE adds 5 to the sum it ends with.
  for (auto p : {c1, c2_id, g})
    EXPECT_EQ(status(p).result_json(), R"({"sum":5})") << "procedure " << p;
  expect_clean_world();
}

// A supervisor restarting all its children (one_for_all, after a sibling crashed) stops a
// passivated subtree with them and restarts it from the journal: its waiters still wait, and
// each is woken once.
TEST_F(passivate_subtree_test, a_restart_of_all_children_restarts_a_passivated_subtree) {
  supervision_policy all;
  all.strategy = restart_strategy::one_for_all;
  all.backoff_min = std::chrono::milliseconds{5};
  all.backoff_max = std::chrono::milliseconds{20};
  types_.add<testing::probe>("test.probe_all", 1, all);
  start_with(std::chrono::milliseconds{20});
  auto crasher = probe({act(ProbeAction::NEXT), act(ProbeAction::CRASH_ONCE)});
  crasher.mutable_actions(0)->set_gate("crash");
  auto mid = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *mid.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::SLEEP_FOR, {}, 3'000), act(ProbeAction::NEXT)});
  *mid.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::SUSPEND, "all.ev"), act(ProbeAction::NEXT)});
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = crasher;
  *r.mutable_actions(0)->add_children() = mid;
  auto id = submit("test.probe_all", json(r));
  std::vector<uint64_t> ids;  // root, crasher, mid, the timer's waiter, the event's
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 5; }));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 3; }));
  EXPECT_EQ(starts(ids[2]), 1);
  world().open("crash");  // it crashes once: both children restart
  ASSERT_TRUE(eventually([&] { return status(ids[1]).state() == pb::SUCCESS; }));
  EXPECT_EQ(starts(ids[1]), 2) << "the crashed child was restarted once";
  EXPECT_EQ(starts(ids[2]), 2) << "the passivated subtree was restarted with it";
  ASSERT_EQ(event("all.ev", "1").code(), pb::Response::OK);
  auto s = wait(id, std::chrono::seconds{20});
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  for (auto w : {ids[3], ids[4]})
    EXPECT_EQ(world().starts()[probe_world::key(w, 2)], 1)
      << "the next state of waiter " << w << " ran more than once, or not at all";
  EXPECT_EQ(metric("proctor_passivated_procedures"), 0);
  expect_clean_world();
}

// Random moments: events for waiters deep in subtrees, aborts, bypasses and the busy step's
// end come while parents offer, give up their actors, or are brought back by a wake-up; each
// tree ends once, as it should, each state ran at most once, and nothing stays passivated.
TEST_F(passivate_subtree_test,
       subtrees_giving_up_their_actors_race_with_events_aborts_and_bypasses) {
  auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  start([](node_options& o) {
    o.executor.passivate_after = std::chrono::milliseconds{0};
    o.workers = 16;  // the busy steps hold 12 run slots until their gate opens
  });
  struct tree_case {
    uint64_t id = 0;
    std::string key;
    bool aborted = false;
  };
  std::vector<tree_case> cases;
  for (int i = 0; i < 12; ++i) {
    tree_case t;
    t.key = "deep" + std::to_string(i);
    // The busy step's gate is shared ("busy"): opened at a random moment for all trees.
    t.id =
      submit("test.probe",
             json(deep_waiters_beside_a_busy_step(1'050 + static_cast<int>(rng() % 1'500), t.key,
                                                  1'050 + static_cast<int>(rng() % 2'000))));
    cases.push_back(t);
  }
  auto open_at = std::chrono::steady_clock::now() + std::chrono::milliseconds{rng() % 3'000};
  std::vector<size_t> order(cases.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  bool opened = false;
  for (auto i : order) {  // the first ones while the trees are still spawning
    std::this_thread::sleep_for(std::chrono::milliseconds{rng() % 250});
    if (!opened && std::chrono::steady_clock::now() >= open_at) {
      world().open("busy");
      opened = true;
    }
    auto& t = cases[i];
    switch (rng() % 4) {
      case 0:
        if (abort(t.id).code() == pb::Response::OK)
          t.aborted = true;
        break;
      case 1: {  // a forced bypass of the deepest waiter (refused if it ended meanwhile)
        auto ids = tree(t.id);  // depth first; the deepest waiter is last once spawned
        if (ids.size() != 7)
          break;
        pb::Request req;
        req.mutable_bypass()->set_id(ids.back());
        req.mutable_bypass()->set_force(true);
        call(req);
        break;
      }
      default:
        break;
    }
    if (rng() % 2 == 0)
      event(t.key, "1");
  }
  world().open("busy");
  for (auto& t : cases)
    event(t.key, "2");  // a second one for some: each wakes its waiter once
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
    expect_each_state_once(t.id);
  }
  EXPECT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 0; }));
  expect_clean_world();
}

}  // namespace
}  // namespace proctor::testing
