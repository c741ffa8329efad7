// Supervision end to end: restart strategies, restart intensity and escalation.
#include <mutex>
#include <set>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

/// Keys whose member already crashed once (a member crashes once, on an event payload
/// that asks for it).
std::mutex crashed_mtx;
std::set<std::string> crashed;

/// Suspends on its key; on the event, crashes once if the payload is "crash", then ends.
class member : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  member() {
    on(pb::WAIT_EVENT_SUSPEND, &member::wait, &member::nothing);
    on(pb::WAIT_EVENT_RESUME, &member::resume, &member::nothing);
  }

private:
  outcome wait(pb::WaitEventData& d, context&) { return suspend(d.key(), pb::WAIT_EVENT_RESUME); }
  outcome resume(pb::WaitEventData& d, context& ctx) {
    if (ctx.event_payload() == R"("crash")") {
      std::lock_guard<std::mutex> g(crashed_mtx);
      if (crashed.insert(d.key()).second)
        throw std::runtime_error("member " + d.key() + " crashes once");
    }
    return done();
  }
  void nothing(pb::WaitEventData&, context&) {}
};

/// Spawns three members with keys <key>-0, <key>-1, <key>-2, then ends.
class parent : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  parent() {
    on(pb::WAIT_EVENT_SUSPEND, &parent::fan, &parent::nothing);
    on(pb::WAIT_EVENT_RESUME, &parent::join, &parent::nothing);
  }

private:
  outcome fan(pb::WaitEventData& d, context&) {
    std::vector<child_spec> kids;
    for (int i = 0; i < 3; ++i) {
      pb::WaitEventData m;
      m.set_key(d.key() + "-" + std::to_string(i));
      kids.push_back(child("test.member", m));
    }
    return spawn(std::move(kids), pb::WAIT_EVENT_RESUME);
  }
  outcome join(pb::WaitEventData&, context&) { return done(); }
  void nothing(pb::WaitEventData&, context&) {}
};

/// Always crashes.
class crasher : public state_machine<pb::NoopData, pb::NoopState> {
public:
  crasher() { on(pb::NOOP_STEP, &crasher::step, &crasher::nothing); }

private:
  outcome step(pb::NoopData&, context&) { throw std::runtime_error("always crashes"); }
  void nothing(pb::NoopData&, context&) {}
};

/// Spawns one child of the type named in `key`, then ends.
class chain : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  chain() {
    on(pb::WAIT_EVENT_SUSPEND, &chain::fan, &chain::nothing);
    on(pb::WAIT_EVENT_RESUME, &chain::join, &chain::nothing);
  }

private:
  outcome fan(pb::WaitEventData& d, context&) {
    auto dot = d.key().find('|');
    pb::WaitEventData c;
    c.set_key(dot == std::string::npos ? "" : d.key().substr(dot + 1));
    return spawn({child(d.key().substr(0, dot), c)}, pb::WAIT_EVENT_RESUME);
  }
  outcome join(pb::WaitEventData&, context&) { return done(); }
  void nothing(pb::WaitEventData&, context&) {}
};

class supervision_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    {
      std::lock_guard<std::mutex> g(crashed_mtx);
      crashed.clear();
    }
    supervision_policy p;
    p.backoff_min = std::chrono::milliseconds{1};
    p.backoff_max = std::chrono::milliseconds{5};
    types_.add<member>("test.member");
    p.strategy = restart_strategy::one_for_one;
    types_.add<parent>("test.parent_one_for_one", 1, p);
    p.strategy = restart_strategy::one_for_all;
    types_.add<parent>("test.parent_one_for_all", 1, p);
    p.strategy = restart_strategy::rest_for_one;
    types_.add<parent>("test.parent_rest_for_one", 1, p);
    types_.add<crasher>("test.crasher");
    supervision_policy once = p;
    once.strategy = restart_strategy::one_for_one;
    once.max_restarts = 1;
    types_.add<chain>("test.chain", 1, once);
  }

  /// Runs a parent of `type`, crashes member `victim` once, and returns how often each
  /// member's actor started.
  std::vector<int> run_strategy(const std::string& type, const std::string& key, int victim) {
    auto id = submit(type, R"({"key":")" + key + "\"}");
    pb::ProcStatus s;
    EXPECT_TRUE(eventually([&] {
      s = status(id);
      if (s.children_size() != 3)
        return false;
      for (auto c : s.children())
        if (status(c).state() != pb::WAITING)
          return false;
      return true;
    }));
    std::vector<uint64_t> kids(s.children().begin(), s.children().end());
    if (kids.size() != 3)
      return {};
    event(key + "-" + std::to_string(victim), R"("crash")");
    // The victim crashes, is restarted (with its siblings, by strategy) and ends; the
    // restarted siblings are WAITING again.
    EXPECT_TRUE(eventually([&] { return status(kids[victim]).state() == pb::SUCCESS; }));
    for (int i = 0; i < 3; ++i) {
      if (i != victim) {
        EXPECT_TRUE(eventually([&] { return status(kids[i]).state() == pb::WAITING; }));
      }
    }
    std::vector<int> out;
    for (auto k : kids)
      out.push_back(starts(k));
    for (int i = 0; i < 3; ++i)
      if (i != victim)
        event(key + "-" + std::to_string(i), "{}");
    EXPECT_EQ(wait(id).state(), pb::SUCCESS);
    return out;
  }
};

TEST_F(supervision_test, one_for_one_restarts_only_the_crashed_child) {
  start();
  EXPECT_EQ(run_strategy("test.parent_one_for_one", "ofo", 1), (std::vector<int>{1, 2, 1}));
}

TEST_F(supervision_test, one_for_all_restarts_every_child) {
  start();
  EXPECT_EQ(run_strategy("test.parent_one_for_all", "ofa", 1), (std::vector<int>{2, 2, 2}));
}

TEST_F(supervision_test, rest_for_one_restarts_the_crashed_child_and_those_after_it) {
  start();
  EXPECT_EQ(run_strategy("test.parent_rest_for_one", "rfo", 1), (std::vector<int>{1, 2, 2}));
}

TEST_F(supervision_test, a_crash_restarts_from_the_last_journaled_state) {
  start();
  auto flaky_dir = dir_ + "/ledger";
  auto id = submit("demo.flaky", R"({"crash_times":2,"ledger_dir":")" + flaky_dir + "\"}");
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_EQ(starts(id), 3);  // first start + two restarts by its supervisor
}

TEST_F(supervision_test, past_the_intensity_supervisors_escalate_and_the_root_rolls_back) {
  start();
  // root (chain, max 1 restart) -> mid (chain, max 1 restart) -> leaf (always crashes)
  auto id = submit("test.chain", R"({"key":"test.chain|test.crasher"})");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("escalated"), std::string::npos) << s.error();
  ASSERT_EQ(s.children_size(), 1);
  auto mid = s.children(0);
  // Each supervisor's reason quotes the one below in its own words, down to the step's
  // exception: no CAF rendering (error(1, 'proctor', ("..."))) anywhere in it.
  auto leaf_id = status(mid).children_size() == 1 ? status(mid).children(0) : 0;
  EXPECT_EQ(s.error(), "escalated: child " + std::to_string(mid)
                         + " crashed more than 1 times within 60000 ms (last: child "
                         + std::to_string(leaf_id)
                         + " crashed more than 1 times within 60000 ms (last: always crashes))");
  EXPECT_EQ(status(mid).state(), pb::ROLLEDBACK);
  // mid restarted once by the root after its first escalation, then escalated again.
  EXPECT_EQ(starts(mid), 2);
  auto leaf = status(mid).children(0);
  EXPECT_EQ(status(leaf).state(), pb::ROLLEDBACK);
  EXPECT_EQ(starts(leaf), 4);  // two incarnations of mid, each restarting it once
}

TEST_F(supervision_test, a_crashing_root_escalates_to_a_rollback) {
  start();
  auto id = submit("demo.flaky", R"({"crash_times":1000,"ledger_dir":")" + dir_ + "/ledger\"}");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("escalated"), std::string::npos) << s.error();
  // The crash in the words of the step's exception, not CAF's rendering of the exit reason.
  EXPECT_EQ(s.error().find("error("), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("(last: demo.flaky: simulated crash "), std::string::npos) << s.error();
  // The PREPARE step's file is undone.
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/ledger"))
    EXPECT_EQ(e.path().string().find(".prepared"), std::string::npos) << e.path();
}

}  // namespace
}  // namespace proctor::testing
