// Join policies and sibling cancellation (docs/flow-control.md, "Join policies";
// actors/procedure/proc_cancel.cpp). Made certain with gates: siblings cancelled once a join
// is met (one stopped mid-step, one waiting for an event), a failure the policy contains, a
// join that can no longer be met failing the tree at once or after the siblings ended, and a
// crash on each side of a cancellation's records. Then a seeded random test: trees of random
// children (fast, slow, failing, waiting, with children of their own), random policies and
// crashes; whatever the timing, the tree ends as its policy says and every state of a
// cancelled or failed child is undone, none of a child that succeeded.
#include <optional>
#include <random>

#include <google/protobuf/util/json_util.h>

#include "actors/testing/fault_store.hpp"
#include "tests/engine/engine_fixture.hpp"
#include "tests/engine/engine_probe.hpp"

namespace proctor::testing {
namespace {

using testpb::ProbeAction;
using testpb::ProbeData;

/// Crashes (fail-stop) the node at the n-th write carrying a record of `kind`, before or
/// after it is durable.
class record_crash_store : public forwarding_store {
public:
  explicit record_crash_store(std::shared_ptr<fault_store> inner)
      : forwarding_store(inner), inner_(std::move(inner)) {}
  void arm(pb::JournalRecord::BodyCase kind, int nth, bool after) {
    std::lock_guard<std::mutex> g(m_);
    kind_ = kind;
    left_ = nth;
    after_ = after;
  }
  rocksdb::Status write(const std::vector<store_op>& ops) override {
    {
      std::lock_guard<std::mutex> g(m_);
      bool hit = false;
      for (const auto& op : ops) {
        pb::JournalRecord r;
        if (op.what == store_op::kind::put && r.ParseFromString(op.value) && r.body_case() == kind_)
          hit = true;
      }
      if (hit && left_ > 0 && --left_ == 0)
        inner_->crash_at(1, after_);  // this very write
    }
    return forwarding_store::write(ops);
  }

private:
  std::shared_ptr<fault_store> inner_;
  std::mutex m_;
  pb::JournalRecord::BodyCase kind_ = pb::JournalRecord::BODY_NOT_SET;
  int left_ = 0;
  bool after_ = false;
};

class join_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    register_probe(types_);
    world_name_ = dir_;  // unique per test
    start_node();
  }
  void TearDown() override {
    stop();
    crashes_.reset();
    faults_.reset();
    engine::TearDown();
  }

  void start_node() {
    start([this](node_options& o) {
      std::string err;
      crashes_.reset();
      faults_.reset();  // the previous incarnation's database must be closed first
      auto inner = open_rocksdb_store(o.data_dir, &err);
      ASSERT_TRUE(inner) << err;
      faults_ = std::make_shared<fault_store>(std::move(inner));
      crashes_ = std::make_shared<record_crash_store>(faults_);
      o.store = crashes_;
      o.on_journal_fatal = [](const std::string&) {};
      if (passivate_after_)
        o.executor.passivate_after = *passivate_after_;
    });
  }
  /// The store froze (a crash); the node goes, a new one recovers from the same directory.
  void crash_and_recover() {
    ASSERT_TRUE(faults_->wait_frozen(std::chrono::seconds{30})) << "the crash never came";
    stop();
    start_node();
  }

  probe_world& world() { return probe_world::get(world_name_); }

  ProbeData probe_data(std::vector<ProbeAction> actions) {
    return make_probe(world_name_, std::move(actions));
  }

  /// A root that spawns `children` with join::at_least(k) (0: all), then runs one more step.
  ProbeData root_of(std::vector<ProbeData> children, uint32_t k, bool wait = false) {
    auto spawn = act(ProbeAction::SPAWN);
    spawn.set_join_at_least(k);
    spawn.set_wait_for_siblings(wait);
    for (auto& c : children)
      *spawn.add_children() = std::move(c);
    return probe_data({act(ProbeAction::NEXT), std::move(spawn), act(ProbeAction::NEXT)});
  }

  std::vector<uint64_t> children_of(uint64_t id) {
    auto s = status(id);
    return {s.children().begin(), s.children().end()};
  }
  void expect_clean_world() {
    for (const auto& e : world().errors())
      ADD_FAILURE() << e;
  }
  std::string history_text(uint64_t id) {
    pb::Request req;
    req.mutable_history()->set_id(id);
    return call(req).DebugString();
  }

  std::string world_name_;
  std::optional<std::chrono::milliseconds> passivate_after_;
  std::shared_ptr<fault_store> faults_;
  std::shared_ptr<record_crash_store> crashes_;
};

std::string seen(uint64_t id, const char* state, bool cancelled = false) {
  return probe_world::join_entry(id, state, cancelled);
}

// join::any: the first child to succeed wins; a sibling stopped in the middle of a step and
// one waiting for an event are cancelled, their committed steps undone in reverse order
// (the running step's too, once it committed); the winner's are kept.
TEST_F(join_test, any_cancels_the_other_children_and_undoes_exactly_what_they_did) {
  auto fast = probe_data({act(ProbeAction::NEXT), act(ProbeAction::NEXT, "fast")});
  auto waiting = probe_data({act(ProbeAction::NEXT), act(ProbeAction::SUSPEND)});
  waiting.mutable_actions(1)->set_event_key("never-" + world_name_);
  auto busy =
    probe_data({act(ProbeAction::NEXT), act(ProbeAction::NEXT, "busy"), act(ProbeAction::NEXT)});
  auto id = submit("test.probe", json(root_of({fast, waiting, busy}, 1)));
  ASSERT_TRUE(eventually([&] { return children_of(id).size() == 3; }));
  auto kids = children_of(id);
  ASSERT_TRUE(world().wait_started(probe_world::key(kids[2], 2)));
  ASSERT_TRUE(eventually([&] { return status(kids[1]).state() == pb::WAITING; }));
  world().open("fast");
  // The busy child's step runs on at its gate: its cancellation waits for its boundary.
  ASSERT_TRUE(eventually([&] {
    return status(id).waiting_for().find("cancelling") != std::string::npos
           || status(kids[1]).state() == pb::ROLLEDBACK;
  }))
    << status(id).ShortDebugString();
  world().open("busy");
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(world().joins(id),
            (std::vector<std::string>{seen(kids[0], "SUCCESS"), seen(kids[1], "ROLLEDBACK", true),
                                      seen(kids[2], "ROLLEDBACK", true)}));
  EXPECT_EQ(world().check_rolled_back({kids[1], kids[2]}), "");
  EXPECT_EQ(world().check_not_undone({id, kids[0]}), "");
  // The busy child's third state never started: nothing of it to undo, and it never ran.
  EXPECT_EQ(world().starts().count(probe_world::key(kids[2], 3)), 0u);
  auto order = world().undo_order();
  auto at = [&](const std::string& k) { return std::find(order.begin(), order.end(), k); };
  EXPECT_LT(at(probe_world::key(kids[2], 2)), at(probe_world::key(kids[2], 1)))
    << "not in reverse order";
  EXPECT_EQ(status(kids[1]).state(), pb::ROLLEDBACK);
  EXPECT_NE(history_text(kids[1]).find("cancelled"), std::string::npos) << history_text(kids[1]);
  expect_clean_world();
}

// A cancelled sibling's step that looks (ctx.cancelled()) ends at its next look: the parent
// runs on at once, not after the loser's whole step, and the loser's state is undone as a
// partly run one. Before, a step could not tell, and the loser's 60 s step held the parent's
// next step for a minute.
TEST_F(join_test, a_cancelled_siblings_step_that_looks_ends_at_once) {
  auto fast = probe_data({act(ProbeAction::NEXT)});
  auto slow = probe_data({act(ProbeAction::NEXT)});
  slow.mutable_actions(0)->set_sleep_ms(60'000);
  slow.mutable_actions(0)->set_sleep_until_cancelled(true);
  auto t0 = std::chrono::steady_clock::now();
  auto id = submit("test.probe", json(root_of({fast, slow}, 1)));
  ASSERT_TRUE(eventually([&] { return children_of(id).size() == 2; }));
  auto kids = children_of(id);
  auto s = wait(id, std::chrono::seconds{40});
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds{20})
    << "the parent waited for the cancelled sibling's whole step";
  EXPECT_EQ(world().joins(id), (std::vector<std::string>{seen(kids[0], "SUCCESS"),
                                                         seen(kids[1], "ROLLEDBACK", true)}));
  EXPECT_EQ(world().check_rolled_back({kids[1]}), "");
  expect_clean_world();
}

// A sibling whose last step is running when the join is met: it is cancelled, and its step
// then ends it SUCCESS. Its end does not count (the cancellation was decided first); its
// steps, the last one included, are undone all the same.
TEST_F(join_test, a_child_ending_exactly_while_it_is_cancelled_is_undone_all_the_same) {
  auto fast = probe_data({act(ProbeAction::NEXT, "fast")});
  auto ending = probe_data({act(ProbeAction::NEXT), act(ProbeAction::NEXT, "ending")});
  auto id = submit("test.probe", json(root_of({fast, ending}, 1)));
  ASSERT_TRUE(eventually([&] { return children_of(id).size() == 2; }));
  auto kids = children_of(id);
  ASSERT_TRUE(world().wait_started(probe_world::key(kids[1], 2)));
  world().open("fast");
  ASSERT_TRUE(
    eventually([&] { return status(id).waiting_for().find("cancelling") != std::string::npos; }))
    << status(id).ShortDebugString();
  world().open("ending");  // its last step ends it while its cancellation waits for it
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(world().joins(id), (std::vector<std::string>{seen(kids[0], "SUCCESS"),
                                                         seen(kids[1], "ROLLEDBACK", true)}));
  EXPECT_EQ(world().check_rolled_back({kids[1]}), "");
  EXPECT_EQ(status(kids[1]).state(), pb::ROLLEDBACK);
  expect_clean_world();
}

// Passivation: a sibling waiting at a long timer gave up its actor (passivated, held by its
// parent) while the other ran; the join met, it is cancelled without being woken, and its
// committed step undone.
TEST_F(join_test, a_passivated_sibling_is_cancelled_without_being_woken) {
  passivate_after_ = std::chrono::milliseconds{20};
  stop();
  start_node();
  auto sleeper = probe_data({act(ProbeAction::NEXT), act(ProbeAction::SLEEP_FOR)});
  sleeper.mutable_actions(1)->set_wait_ms(600'000);
  auto fast = probe_data({act(ProbeAction::NEXT, "fast")});
  auto id = submit("test.probe", json(root_of({sleeper, fast}, 1)));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") >= 1; }))
    << "the sleeper kept its actor";
  auto kids = children_of(id);
  world().open("fast");
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(world().joins(id), (std::vector<std::string>{seen(kids[0], "ROLLEDBACK", true),
                                                         seen(kids[1], "SUCCESS")}));
  EXPECT_EQ(world().check_rolled_back({kids[0]}), "");
  EXPECT_EQ(world().starts().count(probe_world::key(kids[0], 3)), 0u) << "it was woken";
  EXPECT_EQ(metric("proctor_passivated_procedures"), 0);
  EXPECT_EQ(metric("proctor_cancelled_children_total"), 1);
  expect_clean_world();
}

// join::at_least(2) of 3: a child's failure while two can still succeed is contained: it is
// undone (its failed state's partial effects too) and reported failed; the tree succeeds.
TEST_F(join_test, at_least_contains_a_failure_while_the_join_can_still_be_met) {
  auto failing = probe_data({act(ProbeAction::NEXT), act(ProbeAction::FAIL)});
  auto ok1 = probe_data({act(ProbeAction::NEXT, "ok")});
  auto ok2 = probe_data({act(ProbeAction::NEXT, "ok")});
  auto id = submit("test.probe", json(root_of({failing, ok1, ok2}, 2)));
  ASSERT_TRUE(eventually([&] { return children_of(id).size() == 3; }));
  auto kids = children_of(id);
  ASSERT_TRUE(eventually([&] { return status(kids[0]).state() == pb::FAILED; }))
    << status(kids[0]).ShortDebugString();
  EXPECT_NE(status(id).state(), pb::FAILED) << "the tree failed although the join can be met";
  world().open("ok");
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(world().joins(id),
            (std::vector<std::string>{seen(kids[0], "FAILED"), seen(kids[1], "SUCCESS"),
                                      seen(kids[2], "SUCCESS")}));
  EXPECT_EQ(world().check_rolled_back({kids[0]}), "");
  EXPECT_EQ(world().check_not_undone({id, kids[1], kids[2]}), "");
  expect_clean_world();
}

// With cancel_siblings (the default), the failure that makes the join impossible fails the
// tree at once: the sibling still running is stopped at its next boundary and everything is
// rolled back, the contained failure's child included (undone once, not twice).
TEST_F(join_test, a_join_that_can_no_longer_be_met_fails_the_tree_at_once) {
  auto f1 = probe_data({act(ProbeAction::NEXT), act(ProbeAction::FAIL)});
  auto f2 = probe_data({act(ProbeAction::FAIL, "second")});
  auto slow = probe_data({act(ProbeAction::NEXT, "slow"), act(ProbeAction::NEXT)});
  auto id = submit("test.probe", json(root_of({f1, f2, slow}, 2)));
  ASSERT_TRUE(eventually([&] { return children_of(id).size() == 3; }));
  auto kids = children_of(id);
  ASSERT_TRUE(eventually([&] { return status(kids[0]).state() == pb::FAILED; }));
  world().open("second");
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::FAILED; }))
    << "the tree did not fail at the second failure";
  EXPECT_EQ(world().starts().count(probe_world::key(kids[2], 2)), 0u);
  world().open("slow");
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::ROLLEDBACK) << s.ShortDebugString();
  EXPECT_EQ(world().starts().count(probe_world::key(kids[2], 2)), 0u)
    << "the stopped sibling ran on";
  std::set<uint64_t> all{id, kids[0], kids[1], kids[2]};
  EXPECT_EQ(world().check_rolled_back(all), "");
  expect_clean_world();
}

// wait_for_siblings: a failure under join::all lets the siblings run to their ends; then
// the join fails and the tree rolls back, their work included.
TEST_F(join_test, wait_for_siblings_lets_them_end_before_the_join_fails) {
  auto failing = probe_data({act(ProbeAction::FAIL)});
  auto slow = probe_data({act(ProbeAction::NEXT, "slow"), act(ProbeAction::NEXT)});
  auto id = submit("test.probe", json(root_of({failing, slow}, 0, true)));
  ASSERT_TRUE(eventually([&] { return children_of(id).size() == 2; }));
  auto kids = children_of(id);
  ASSERT_TRUE(eventually([&] { return status(kids[0]).state() == pb::FAILED; }))
    << status(kids[0]).ShortDebugString();
  EXPECT_EQ(status(id).state(), pb::WAITING) << "the tree did not wait for the sibling";
  world().open("slow");
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::ROLLEDBACK) << s.ShortDebugString();
  EXPECT_EQ(world().starts().count(probe_world::key(kids[1], 2)), 1u)
    << "the sibling was not let to run to its end";
  EXPECT_NE(s.error().find("join::all not met"), std::string::npos) << s.error();
  EXPECT_EQ(world().check_rolled_back({id, kids[0], kids[1]}), "");
  expect_clean_world();
}

// A spawn asking more successes than it has children fails its step, with the reason.
TEST_F(join_test, at_least_more_than_the_children_is_refused_with_a_reason) {
  auto id = submit("test.probe", json(root_of({probe_data({act(ProbeAction::NEXT)})}, 2)));
  auto s = wait(id);
  ASSERT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("join::at_least(2) of only 1 children"), std::string::npos) << s.error();
}

// A crash on either side of a cancellation's first record, of an undo in it, and of its
// closing records: after recovery the cancellation is carried on (or, before its record,
// decided again), the cancelled children never run forward again, each of their started
// states is undone (once, or twice when a crash came between an undo and its record), and
// the winner is never undone.
TEST_F(join_test, a_crash_around_every_record_of_a_cancellation_loses_nothing) {
  struct point {
    pb::JournalRecord::BodyCase kind;
    bool after;
  };
  const std::vector<point> points = {
    {pb::JournalRecord::kCancelled, false}, {pb::JournalRecord::kCancelled, true},
    {pb::JournalRecord::kUndone, false},    {pb::JournalRecord::kUndone, true},
    {pb::JournalRecord::kFinished, false},  {pb::JournalRecord::kFinished, true}};
  for (const auto& pt : points) {
    SCOPED_TRACE(std::string("crash ") + (pt.after ? "after " : "before ")
                 + pb::JournalRecord::descriptor()->FindFieldByNumber(pt.kind)->name());
    auto fast = probe_data({act(ProbeAction::NEXT), act(ProbeAction::NEXT, "fast-" + world_name_)});
    auto waiting =
      probe_data({act(ProbeAction::NEXT), act(ProbeAction::NEXT), act(ProbeAction::SUSPEND)});
    waiting.mutable_actions(2)->set_event_key("never-" + world_name_);
    auto id = submit("test.probe", json(root_of({fast, waiting}, 1)));
    ASSERT_TRUE(eventually([&] { return children_of(id).size() == 2; }));
    auto kids = children_of(id);
    ASSERT_TRUE(eventually([&] { return status(kids[1]).state() == pb::WAITING; }));
    // The fast child's own Finished comes before the cancellation's: count past it.
    crashes_->arm(pt.kind, pt.kind == pb::JournalRecord::kFinished ? 2 : 1, pt.after);
    int before = starts(kids[1]);
    world().open("fast-" + world_name_);
    crash_and_recover();
    auto s = wait(id);
    ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
    EXPECT_EQ(world().joins(id), (std::vector<std::string>{seen(kids[0], "SUCCESS"),
                                                           seen(kids[1], "ROLLEDBACK", true)}));
    EXPECT_EQ(world().check_rolled_back({kids[1]}, 2), "");
    EXPECT_EQ(world().check_not_undone({id, kids[0]}), "");
    EXPECT_EQ(world().starts().count(probe_world::key(kids[1], 4)), 0u);
    if (pt.kind != pb::JournalRecord::kCancelled || pt.after) {
      EXPECT_EQ(starts(kids[1]), before) << "a cancelled child was run again after the crash";
    }
    expect_clean_world();
    world_name_ += "+";  // a fresh world (and gate names) for the next point
  }
}

// Seeded random trees: 2 to 5 children, each fast, slow, failing at a random step, waiting
// at a timer, or a parent of its own children; a random policy; sometimes a crash of the
// node in the middle. Whatever the timing (a child ending exactly while it is cancelled
// included), the tree ends as its policy says: SUCCESS exactly when enough children cannot
// fail; the parent sees at least k successes; every started state of a child reported
// cancelled or failed is undone, none of a child reported a success; a tree that rolls back
// undoes everything.
TEST_F(join_test, random_trees_end_as_their_policy_says_and_undo_what_they_must) {
  auto seed = static_cast<uint64_t>(std::stoull(std::getenv("PROCTOR_SEED")
                                                  ? std::getenv("PROCTOR_SEED")
                                                  : std::to_string(std::random_device{}())));
  int rounds = std::getenv("PROCTOR_ROUNDS") ? std::atoi(std::getenv("PROCTOR_ROUNDS")) : 12;
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    int n = pick(2, 5);
    std::vector<ProbeData> kids;
    int can_succeed = 0;
    for (int i = 0; i < n; ++i) {
      std::vector<ProbeAction> acts;
      int steps = pick(1, 3);
      int fail_at = pick(0, 2) == 0 ? pick(0, steps - 1) : -1;
      for (int s = 0; s < steps; ++s) {
        auto a = act(s == fail_at ? ProbeAction::FAIL : ProbeAction::NEXT);
        a.set_sleep_ms(pick(0, 2) == 0 ? 0 : pick(1, 15));
        if (s != fail_at && pick(0, 4) == 0) {
          a.set_kind(ProbeAction::SLEEP_FOR);
          a.set_wait_ms(pick(1, 40));
        }
        if (s != fail_at && fail_at < 0 && s == 0 && pick(0, 4) == 0) {
          a.set_kind(ProbeAction::SPAWN);  // a child of its own (join::all)
          *a.add_children() = probe_data({act(ProbeAction::NEXT), act(ProbeAction::NEXT)});
        }
        acts.push_back(std::move(a));
      }
      if (fail_at < 0)
        ++can_succeed;
      kids.push_back(probe_data(std::move(acts)));
    }
    uint32_t k = static_cast<uint32_t>(pick(0, n));  // 0: join::all
    bool wait_siblings = pick(0, 1) == 1;
    bool crash = pick(0, 3) == 0;
    size_t needed = k == 0 ? static_cast<size_t>(n) : k;
    bool should_succeed = static_cast<size_t>(can_succeed) >= needed;
    SCOPED_TRACE("children " + std::to_string(n) + ", at_least " + std::to_string(k)
                 + ", can succeed " + std::to_string(can_succeed) + (wait_siblings ? ", wait" : "")
                 + (crash ? ", crash" : ""));
    auto id = submit("test.probe", json(root_of(kids, k, wait_siblings)));
    if (crash) {
      crashes_->arm(pick(0, 1) == 0 ? pb::JournalRecord::kCancelled : pb::JournalRecord::kStep,
                    pick(1, 3), pick(0, 1) == 1);
      // The armed record may never come (nothing cancelled): then the round runs without.
      bool crashed = faults_->wait_frozen(std::chrono::seconds{3});
      crashes_->arm(pb::JournalRecord::BODY_NOT_SET, 0, false);
      if (crashed || faults_->wait_frozen(std::chrono::milliseconds{0})) {
        stop();
        start_node();
      }
    }
    auto s = wait(id, std::chrono::seconds{60});
    ASSERT_TRUE(s.state() == pb::SUCCESS || s.state() == pb::ROLLEDBACK) << s.ShortDebugString();
    ASSERT_EQ(s.state() == pb::SUCCESS, should_succeed) << s.ShortDebugString();
    int max_undos = crash ? 2 : 1;
    if (s.state() == pb::ROLLEDBACK) {
      EXPECT_EQ(world().check_rolled_back(tree_ids(id), max_undos), "");
    } else {
      auto joined = world().joins(id);
      ASSERT_EQ(joined.size(), static_cast<size_t>(n));
      size_t ok = 0;
      for (const auto& j : joined) {
        auto cid = std::stoull(j);
        if (j.find(":SUCCESS") != std::string::npos) {
          ++ok;
          EXPECT_EQ(world().check_not_undone(tree_ids(cid)), "") << j;
        } else {
          EXPECT_EQ(world().check_rolled_back(tree_ids(cid), max_undos), "") << j;
        }
      }
      EXPECT_GE(ok, needed);
      EXPECT_EQ(world().check_not_undone({id}), "");
    }
    expect_clean_world();
    world_name_ += "+";
  }
}

}  // namespace
}  // namespace proctor::testing

namespace proctor::testing {
namespace {

// A child read back waiting for an event while its tree runs on is held passivated by its
// parent, without an actor: its status must still say what it waits for (it said nothing,
// and a client, or the crash harness, waiting to see "event go" before posting it, waited
// forever). Crashes on either side of the first Suspended record, with its sibling's.
TEST_F(join_test, a_child_read_back_passivated_says_what_it_waits_for) {
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    auto w = probe_data({act(ProbeAction::SUSPEND), act(ProbeAction::NEXT)});
    w.mutable_actions(0)->set_event_key("go" + world_name_);
    auto l = probe_data({act(ProbeAction::SUSPEND)});
    l.mutable_actions(0)->set_event_key("never" + world_name_);
    crashes_->arm(pb::JournalRecord::kSuspended, 1, i % 2 == 0);
    auto id = submit("test.probe", json(root_of({w, l}, 1)));
    crash_and_recover();
    ASSERT_TRUE(eventually([&] {
      auto kids = children_of(id);
      return kids.size() == 2 && status(kids[0]).waiting_for() == "event go" + world_name_;
    }))
      << status(children_of(id).at(0)).ShortDebugString();
    ASSERT_EQ(event("go" + world_name_, "1").code(), pb::Response::OK);
    auto s = wait(id, std::chrono::seconds{10});
    ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
    world_name_ += "+";
  }
}

}  // namespace
}  // namespace proctor::testing
