// An operator's bypass (`proctor bypass`): a stuck procedure ends SUCCESS without running or
// undoing anything more of it, its parent carries on, and a restart honours the Bypassed
// record. Also the operator views the CLI draws from: tree and history.
#include <google/protobuf/util/json_util.h>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "actors/wire/wall_clock.hpp"
#include "tests/engine/engine_fixture.hpp"
#include "tests/engine/engine_probe.hpp"

namespace proctor::testing {
namespace {

using testpb::ProbeAction;
using testpb::ProbeData;

/// An action that, when it suspends, waits for the event `event_key`.
ProbeAction act_on(ProbeAction::Kind kind, std::string event_key = {}) {
  ProbeAction a;
  a.set_kind(kind);
  a.set_event_key(std::move(event_key));
  return a;
}

/// Locks `key` exclusively and holds it while it waits for the event "ev-<key>".
class lock_waiter : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  lock_waiter() {
    on(pb::WAIT_EVENT_SUSPEND, &lock_waiter::wait, &lock_waiter::nothing);
    on(pb::WAIT_EVENT_RESUME, &lock_waiter::resume, &lock_waiter::nothing);
  }
  lock_set locks() const override { return {resource_lock::exclusive_on(typed_data().key())}; }

private:
  outcome wait(pb::WaitEventData& d, context&) {
    return suspend("ev-" + d.key(), pb::WAIT_EVENT_RESUME);
  }
  outcome resume(pb::WaitEventData&, context&) { return done(); }
  void nothing(pb::WaitEventData&, context&) {}
};

/// Past its point of no return (RISKY), FINISH fails `crash_times` times.
class pnr : public state_machine<pb::FlakyData, pb::FlakyState> {
public:
  pnr() {
    on(pb::FLAKY_PREPARE, &pnr::prepare, &pnr::nothing);
    on_no_rollback(pb::FLAKY_RISKY, &pnr::risky);
    on(pb::FLAKY_FINISH, &pnr::finish, &pnr::nothing);
  }

private:
  outcome prepare(pb::FlakyData&, context&) { return next(pb::FLAKY_RISKY); }
  outcome risky(pb::FlakyData&, context&) { return next(pb::FLAKY_FINISH); }
  outcome finish(pb::FlakyData& d, context& ctx) {
    if (ctx.attempt() <= d.crash_times())
      throw procedure_failure("not yet (attempt " + std::to_string(ctx.attempt()) + ")");
    return done();
  }
  void nothing(pb::FlakyData&, context&) {}
};

class bypass_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    register_probe(types_);
    types_.add<lock_waiter>("test.lock_waiter");
    retry_policy two;
    two.kind = retry_policy::backoff::fixed;
    two.delay = std::chrono::milliseconds{5};
    two.max_attempts = 1;
    two.max_attempts_past_no_return = 2;
    types_.add<pnr>("test.pnr", 1, {}, two);
    world_name_ = dir_;
  }

  void start_with(std::chrono::milliseconds stuck_after) {
    start([stuck_after](node_options& o) {
      o.executor.stuck_after = stuck_after;
      o.executor.passivate_after = std::chrono::milliseconds{-1};
    });
  }

  probe_world& world() { return probe_world::get(world_name_); }

  ProbeData probe_data(std::vector<ProbeAction> actions) {
    return make_probe(world_name_, std::move(actions));
  }

  /// A root that spawns one child waiting for event "never", then runs `after`.
  uint64_t submit_parent_of_waiter(std::vector<ProbeAction> after) {
    std::vector<ProbeAction> root{act_on(ProbeAction::SPAWN)};
    *root[0].add_children() = probe_data({act_on(ProbeAction::SUSPEND, "never")});
    for (auto& a : after)
      root.push_back(std::move(a));
    return submit("test.probe", json(probe_data(std::move(root))));
  }

  /// The child of `root` once it waits for its event.
  uint64_t waiting_child(uint64_t root) {
    uint64_t child = 0;
    EXPECT_TRUE(eventually([&] {
      auto s = status(root);
      if (s.children_size() == 0)
        return false;
      child = s.children(0);
      return status(child).waiting_for() == "event never";
    }));
    return child;
  }

  pb::Response bypass(uint64_t id, bool force) {
    pb::Request req;
    req.mutable_bypass()->set_id(id);
    req.mutable_bypass()->set_force(force);
    return call(req);
  }

  std::string world_name_;
};

TEST_F(bypass_test, refused_unless_stuck_or_forced_then_the_parent_carries_on) {
  start_with(std::chrono::minutes{10});
  auto root = submit_parent_of_waiter({act_on(ProbeAction::NEXT)});
  auto child = waiting_child(root);
  ASSERT_NE(child, 0u);

  auto r = bypass(child, false);
  EXPECT_EQ(r.code(), pb::Response::REFUSED);
  EXPECT_NE(r.error().find("is not stuck"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("--force"), std::string::npos) << r.error();
  r = bypass(root, true);  // waits for its child: bypass the child instead
  EXPECT_EQ(r.code(), pb::Response::REFUSED);
  EXPECT_NE(r.error().find("child"), std::string::npos) << r.error();
  EXPECT_EQ(status(child).state(), pb::WAITING);

  r = bypass(child, true);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(r.status().state(), pb::SUCCESS);
  auto s = wait(root);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  auto starts = world().starts();
  EXPECT_EQ(starts.count(probe_world::key(root, 2)), 1u);   // the parent carried on
  EXPECT_EQ(starts.count(probe_world::key(child, 2)), 0u);  // the child ran no more
  EXPECT_TRUE(world().undos().empty());
  r = bypass(child, true);
  EXPECT_EQ(r.code(), pb::Response::REFUSED);
  EXPECT_NE(r.error().find("already ended"), std::string::npos) << r.error();
}

TEST_F(bypass_test, a_procedure_waiting_longer_than_stuck_after_needs_no_force) {
  start_with(std::chrono::milliseconds{100});
  auto root = submit_parent_of_waiter({});
  auto child = waiting_child(root);
  ASSERT_NE(child, 0u);
  ASSERT_TRUE(eventually([&] { return wall_ms() - status(child).since_ms() >= 150; }));
  auto r = bypass(child, false);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(wait(root).state(), pb::SUCCESS);
}

TEST_F(bypass_test, survives_a_restart_and_the_parent_carries_on_after_it) {
  start_with(std::chrono::minutes{10});
  // After its child, the root waits for "go": the restart comes between the two.
  auto root = submit_parent_of_waiter({act_on(ProbeAction::SUSPEND, "go")});
  auto child = waiting_child(root);
  ASSERT_NE(child, 0u);
  ASSERT_EQ(bypass(child, true).code(), pb::Response::OK);
  ASSERT_TRUE(eventually([&] { return status(root).waiting_for() == "event go"; }));

  // History, while the tree's records are all there.
  pb::Request h;
  h.mutable_history()->set_id(child);
  auto hist = call(h);
  ASSERT_EQ(hist.code(), pb::Response::OK) << hist.error();
  std::vector<std::string> kinds;
  for (const auto& e : hist.history().entries())
    kinds.push_back(e.kind());
  EXPECT_EQ(kinds, (std::vector<std::string>{"submitted", "step", "suspended", "bypassed"}));
  EXPECT_GT(hist.history().entries(1).at_ms(), 0);
  EXPECT_EQ(hist.history().entries(1).attempt(), 1);

  restart([](node_options& o) {
    o.executor.passivate_after = std::chrono::milliseconds{-1};
    o.executor.history_keep_records = 0;  // ended trees keep their summary only
  });
  EXPECT_EQ(status(child).state(), pb::SUCCESS);
  EXPECT_EQ(starts(child), 1);  // not started again: the record ended it
  ASSERT_TRUE(eventually([&] { return status(root).waiting_for() == "event go"; }));
  event("go", "{}");
  EXPECT_EQ(wait(root).state(), pb::SUCCESS);
  EXPECT_EQ(world().starts().count(probe_world::key(child, 2)), 0u);

  // The tree, root first.
  pb::Request t;
  t.mutable_tree()->set_id(child);
  auto tree = call(t);
  ASSERT_EQ(tree.code(), pb::Response::OK) << tree.error();
  ASSERT_EQ(tree.list_size(), 2);
  EXPECT_EQ(tree.list(0).id(), root);
  EXPECT_EQ(tree.list(1).id(), child);
  EXPECT_NE(tree.list(0).ended_at_ms(), 0);
  EXPECT_TRUE(tree.list(1).bypassed());
  EXPECT_FALSE(tree.list(0).bypassed());
  // Once only the summary is left, it still says so.
  ASSERT_TRUE(eventually([&] {
    auto s = call(h).history();
    return s.entries_size() == 1
           && s.entries(0).detail().find("bypassed by an operator") != std::string::npos;
  }))
    << call(h).ShortDebugString();
}

TEST_F(bypass_test, a_bypassed_root_ends_its_tree_and_stays_ended_after_a_restart) {
  start_with(std::chrono::minutes{10});
  auto root = submit("test.probe", json(probe_data({act_on(ProbeAction::SUSPEND, "never")})));
  ASSERT_TRUE(eventually([&] { return status(root).waiting_for() == "event never"; }));
  auto r = bypass(root, true);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(wait(root).state(), pb::SUCCESS);
  restart();
  EXPECT_EQ(status(root).state(), pb::SUCCESS);
  EXPECT_EQ(starts(root), 1);
  EXPECT_EQ(world().starts().count(probe_world::key(root, 2)), 0u);
}

TEST_F(bypass_test, locks_show_holder_and_waiter_and_a_bypassed_waiter_never_runs) {
  start_with(std::chrono::minutes{10});
  auto holder = submit("test.lock_waiter", R"({"key":"ns/t"})");
  ASSERT_TRUE(eventually([&] { return status(holder).waiting_for() == "event ev-ns/t"; }));
  auto waiter = submit("test.lock_waiter", R"({"key":"ns/t"})");
  ASSERT_TRUE(eventually([&] { return status(waiter).waiting_for() == "lock ns/t"; }));

  pb::Request l;
  l.mutable_locks();
  auto locks = call(l);
  ASSERT_EQ(locks.code(), pb::Response::OK) << locks.error();
  ASSERT_EQ(locks.locks_size(), 2);
  EXPECT_TRUE(locks.locks(0).held());
  EXPECT_EQ(locks.locks(0).proc_id(), holder);
  EXPECT_EQ(locks.locks(0).resource(), "ns/t");
  EXPECT_TRUE(locks.locks(0).exclusive());
  EXPECT_FALSE(locks.locks(1).held());
  EXPECT_EQ(locks.locks(1).proc_id(), waiter);
  EXPECT_EQ(locks.locks(1).blocked_by(), "ns/t");

  // Its step waits for the lock: the bypass takes it off the scheduler's queue.
  auto r = bypass(waiter, true);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(wait(waiter).state(), pb::SUCCESS);
  locks = call(l);
  ASSERT_EQ(locks.locks_size(), 1);
  EXPECT_EQ(locks.locks(0).proc_id(), holder);
  event("ev-ns/t", "{}");
  EXPECT_EQ(wait(holder).state(), pb::SUCCESS);
  EXPECT_EQ(call(l).locks_size(), 0);
  EXPECT_EQ(starts(waiter), 1);
}

TEST_F(bypass_test, a_procedure_failed_for_good_past_its_point_of_no_return_is_stuck) {
  start_with(std::chrono::minutes{10});
  auto id = submit("test.pnr", R"({"crash_times":100})");
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::FAILED; }));
  auto r = bypass(id, false);  // it waits for an operator: stuck at once
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
}

TEST_F(bypass_test, a_passivated_root_is_woken_to_be_bypassed) {
  start([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{0}; });
  auto id = submit("test.probe", json(probe_data({act_on(ProbeAction::SUSPEND, "never")})));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_roots") == 1; }));
  auto r = bypass(id, true);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_EQ(starts(id), 2);  // started, then woken from the journal for the bypass
  EXPECT_EQ(world().starts().count(probe_world::key(id, 2)), 0u);
}

// A child of a passivated tree: the tree comes back with the child passivated (unspawned,
// proc_passivated_children.cpp), and the order on its way down spawns it to be bypassed.
TEST_F(bypass_test, a_passivated_child_is_spawned_to_be_bypassed) {
  start([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{0}; });
  auto root = submit_parent_of_waiter({act_on(ProbeAction::NEXT)});
  auto child = waiting_child(root);
  ASSERT_NE(child, 0u);
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_roots") == 1; }));
  auto r = bypass(child, true);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(r.status().state(), pb::SUCCESS);
  auto s = wait(root);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(starts(child), 2);  // started, then spawned from the journal for the bypass
  EXPECT_EQ(world().starts().count(probe_world::key(child, 2)), 0u);  // it ran no more
  EXPECT_EQ(world().starts().count(probe_world::key(root, 2)), 1u);   // the parent carried on
}

TEST_F(bypass_test, history_shows_the_failure_and_each_undo_of_a_rollback) {
  start_with(std::chrono::minutes{10});
  auto first = act_on(ProbeAction::NEXT);
  first.set_undo_gate("u");
  auto id = submit("test.probe", json(probe_data({first, act_on(ProbeAction::FAIL)})));
  pb::Request h;
  h.mutable_history()->set_id(id);
  std::vector<std::string> kinds;
  pb::Response hist;
  // The partly run state 2 is undone, then the undo of step 1 waits at its gate.
  ASSERT_TRUE(eventually([&] {
    hist = call(h);
    kinds.clear();
    for (const auto& e : hist.history().entries())
      kinds.push_back(e.kind());
    return kinds.size() >= 4;
  }))
    << hist.ShortDebugString();
  EXPECT_EQ(kinds, (std::vector<std::string>{"submitted", "step", "failed", "undone"}));
  EXPECT_EQ(hist.history().entries(2).state(), 2);
  EXPECT_NE(hist.history().entries(2).detail().find("fails as asked"), std::string::npos);
  EXPECT_EQ(hist.history().entries(3).state(), 2);
  // The failure and each undo say when (the console shows the times on their rows).
  const auto submitted_at = hist.history().entries(0).at_ms();
  EXPECT_GT(submitted_at, 0);
  EXPECT_GE(hist.history().entries(2).at_ms(), submitted_at);
  EXPECT_GE(hist.history().entries(3).at_ms(), hist.history().entries(2).at_ms());
  world().open("u");
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
}

}  // namespace
}  // namespace proctor::testing
