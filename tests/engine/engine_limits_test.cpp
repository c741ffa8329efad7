// Per-type limits end to end (docs/flow-control.md): steps of a limited type never run more
// at once than its limit, a parent and its children of one limited type never deadlock
// (also with a crash at every journal boundary), starts follow the rate, an operator's
// limits are journaled and survive a restart, and random interleavings of changes, aborts
// and restarts leave no step held back for ever. PROCTOR_SEED=<n> replays the random test.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include <proctor/crash_harness.hpp>
#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

/// Steps of the test types running now, and the most seen at once.
std::atomic<int> running{0};
std::atomic<int> most{0};
std::mutex starts_mtx;
std::vector<std::chrono::steady_clock::time_point> start_times;

void step_body(std::chrono::microseconds busy) {
  int now = ++running;
  int seen = most.load();
  while (now > seen && !most.compare_exchange_weak(seen, now)) {
  }
  std::this_thread::sleep_for(busy);
  --running;
}

/// Spawns `children` procedures of its own type (with none of their own), then joins
/// them: a parent and its children of one limited type. Each step is busy for a while.
class capped : public state_machine<pb::FanoutData, pb::FanoutState> {
public:
  capped() {
    on(pb::FANOUT_SPAWN, &capped::spawn_them, &capped::nothing);
    on(pb::FANOUT_JOIN, &capped::join, &capped::nothing);
  }

protected:
  virtual std::string own_type() const { return "test.capped"; }

private:
  outcome spawn_them(pb::FanoutData& d, context&) {
    {
      std::lock_guard<std::mutex> g(starts_mtx);
      start_times.push_back(std::chrono::steady_clock::now());
    }
    step_body(std::chrono::milliseconds{d.child_steps() > 0 ? d.child_steps() : 5});
    if (d.children() == 0)
      return done();
    std::vector<child_spec> kids;
    pb::FanoutData c;
    c.set_child_steps(d.child_steps());
    for (int i = 0; i < d.children(); ++i)
      kids.push_back(child(own_type(), c));
    return spawn(std::move(kids), pb::FANOUT_JOIN);
  }
  outcome join(pb::FanoutData& d, context&) {
    step_body(std::chrono::milliseconds{d.child_steps() > 0 ? d.child_steps() : 5});
    return done();
  }
  void nothing(pb::FanoutData&, context&) {}
};

class capped_inline : public capped {
protected:
  std::string own_type() const override { return "test.capped_inline"; }
};

/// No limits in code; its children are of its own type, so that every step counted in
/// `most` is one of its (test.capped's children would be test.capped, limited apart).
class free_type : public capped {
protected:
  std::string own_type() const override { return "test.free"; }
};

/// Yields `children` times on a worker thread, then ends. Its data may also ask it to hold a
/// lock (`place_on` names it), to crash once (`spread`: its supervisor restarts it) or, with
/// `child_steps` 1, to fail its last step (its tree rolls back). Every way a step ends.
std::mutex crashed_mtx;
std::set<uint64_t> crashed;

class yielder : public state_machine<pb::FanoutData, pb::FanoutState> {
public:
  yielder() {
    on(pb::FANOUT_SPAWN, &yielder::turn, &yielder::nothing);
    on(pb::FANOUT_JOIN, &yielder::last, &yielder::nothing);
  }
  lock_set locks() const override {
    const auto& d = typed_data();
    if (d.place_on().empty())
      return {};
    return {resource_lock::exclusive_on(d.place_on())};
  }

private:
  outcome turn(pb::FanoutData& d, context& ctx) {
    step_body(std::chrono::microseconds{200});
    if (d.spread() && ctx.attempt() == 2) {
      std::lock_guard<std::mutex> g(crashed_mtx);
      if (crashed.insert(ctx.id()).second)
        throw std::runtime_error("yielder: crashing once as asked");
    }
    if (ctx.attempt() <= d.children())
      return yield(pb::FANOUT_SPAWN);
    return next(pb::FANOUT_JOIN);
  }
  outcome last(pb::FanoutData& d, context&) {
    if (d.child_steps() == 1)
      return fail("yielder: failing as asked");
    return done();
  }
  void nothing(pb::FanoutData&, context&) {}
};

class type_limits_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    running = 0;
    most = 0;
    start_times.clear();
    types_.add<capped>("test.capped").max_running(1);
    types_.add<capped_inline>("test.capped_inline").nonblocking().max_running(2);
    types_.add<capped>("test.rated").rate(2, std::chrono::milliseconds{200});
    types_.add<free_type>("test.free");
    types_.add<yielder>("test.yielder");
    crashed.clear();
  }

  pb::Response limits(const std::function<void(pb::LimitsRequest&)>& fill = {}) {
    pb::Request req;
    auto* l = req.mutable_limits();
    if (fill)
      fill(*l);
    return call(req);
  }

  static const pb::TypeLimitInfo* find(const pb::Response& r, const std::string& type) {
    for (const auto& l : r.limits())
      if (l.type() == type)
        return &l;
    return nullptr;
  }
};

TEST_F(type_limits_test, a_parent_and_its_children_of_one_type_limited_to_one_never_deadlock) {
  start([](node_options& o) { o.workers = 8; });
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(submit("test.capped", R"({"children":3,"child_steps":20})"));
  // One of them is held back while another's step runs, and says so.
  bool seen = false;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{20};
  while (!seen && std::chrono::steady_clock::now() < until) {
    for (auto id : ids) {
      auto s = status(id);
      if (s.waiting_for().rfind("type limit test.capped: 1 of 1 running", 0) == 0
          || s.waiting_for().rfind("type limit test.capped: behind", 0) == 0) {
        EXPECT_EQ(s.state(), pb::RUNNABLE) << s.ShortDebugString();
        seen = true;
      }
    }
  }
  EXPECT_TRUE(seen) << "no procedure said the type's limit held it back";
  for (auto id : ids)
    EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_EQ(most.load(), 1) << "steps of test.capped ran at once";
  auto r = limits();
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  const auto* l = find(r, "test.capped");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->max_running(), 1u);
  EXPECT_FALSE(l->operator_set());
  EXPECT_EQ(l->running(), 0u);
  EXPECT_EQ(l->waiting(), 0u);
  EXPECT_GT(l->throttled(), 0u);
}

TEST_F(type_limits_test, a_nonblocking_type_with_a_limit_asks_the_scheduler_too) {
  start([](node_options& o) { o.workers = 8; });
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(submit("test.capped_inline", R"({"children":4,"child_steps":2})"));
  for (auto id : ids)
    EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_LE(most.load(), 2);
}

TEST_F(type_limits_test, starts_follow_the_rate_in_bursts_of_its_size) {
  start([](node_options& o) { o.workers = 8; });
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(submit("test.rated", R"({"child_steps":1})"));
  for (auto id : ids)
    EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  std::lock_guard<std::mutex> g(starts_mtx);
  ASSERT_EQ(start_times.size(), 6u);
  std::sort(start_times.begin(), start_times.end());
  // 2 at once, then one each 100 ms: the sixth at least 400 ms after the first (a lower
  // bound: a slow machine only makes it later).
  EXPECT_GE(start_times[5] - start_times[0], std::chrono::milliseconds{390});
}

TEST_F(type_limits_test,
       an_operators_limits_are_journaled_survive_a_restart_and_clear_to_the_code) {
  start();
  auto r = limits([](pb::LimitsRequest& l) {
    l.set_type("test.free");
    l.set_max_running(2);
  });
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  ASSERT_NE(find(r, "test.free"), nullptr);
  EXPECT_EQ(find(r, "test.free")->max_running(), 2u);
  EXPECT_TRUE(find(r, "test.free")->operator_set());
  // A second change sets its field over what is in force.
  r = limits([](pb::LimitsRequest& l) {
    l.set_type("test.free");
    l.set_rate(100);
    l.set_per_ms(60'000);
  });
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  restart();
  r = limits();
  const auto* l = find(r, "test.free");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->max_running(), 2u);
  EXPECT_EQ(l->rate(), 100u);
  EXPECT_EQ(l->per_ms(), 60'000u);
  EXPECT_TRUE(l->operator_set());
  EXPECT_GT(l->set_at_ms(), 0);
  EXPECT_EQ(l->code_max_running(), 0u);
  // The override holds: at most 2 at once.
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(submit("test.free", R"({"children":2,"child_steps":10})"));
  for (auto id : ids)
    EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_LE(most.load(), 2);
  r = limits([](pb::LimitsRequest& l) {
    l.set_type("test.capped");
    l.set_clear(true);
  });
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  r = limits([](pb::LimitsRequest& l) {
    l.set_type("test.free");
    l.set_clear(true);
  });
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  restart();
  r = limits();
  ASSERT_NE(find(r, "test.free"), nullptr);
  EXPECT_FALSE(find(r, "test.free")->operator_set());
  EXPECT_EQ(find(r, "test.free")->max_running(), 0u);
  EXPECT_EQ(find(r, "test.capped")->max_running(), 1u);
}

TEST_F(type_limits_test, a_change_that_cannot_apply_is_refused_saying_why) {
  start();
  auto r = limits([](pb::LimitsRequest& l) {
    l.set_type("test.nope");
    l.set_max_running(1);
  });
  EXPECT_EQ(r.code(), pb::Response::NOT_FOUND);
  EXPECT_NE(r.error().find("unknown procedure type 'test.nope'"), std::string::npos) << r.error();
  r = limits([](pb::LimitsRequest& l) { l.set_type("test.free"); });
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(r.error().find("give max_running, rate"), std::string::npos) << r.error();
  r = limits([](pb::LimitsRequest& l) {
    l.set_type("test.free");
    l.set_clear(true);
    l.set_rate(3);
  });
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  r = limits([](pb::LimitsRequest& l) {
    l.set_type("test.free");
    l.set_rate(3);
    l.set_per_ms(0);
  });
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(r.error().find("period"), std::string::npos) << r.error();
  r = limits([](pb::LimitsRequest& l) { l.set_max_running(3); });
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  // Nothing was changed by any of them.
  r = limits();
  for (const auto& l : r.limits())
    EXPECT_FALSE(l.operator_set()) << l.type();
}

TEST_F(type_limits_test, a_limited_tree_survives_a_crash_at_every_boundary_without_deadlock) {
  crash_matrix_options o;
  o.types = &types_;
  o.type = "test.capped";
  o.args_json = R"({"children":2,"child_steps":1})";
  o.work_dir = dir_ + "/matrix";
  o.workers = 4;
  o.reset = [] { most = 0; };
  o.check = [](const crash_run& r) -> std::string {
    if (r.root.state() != pb::SUCCESS)
      return "ended " + pb::ProcState_Name(r.root.state());
    return most.load() <= 1 ? "" : std::to_string(most.load()) + " steps of test.capped at once";
  };
  auto rep = run_crash_matrix(o);
  EXPECT_TRUE(rep.ok()) << rep.summary();
  EXPECT_GT(rep.boundaries, 5u) << rep.summary();
}

/// A seeded random run: trees of a limited type, an operator changing its limit at random moments
/// (1 to 3, or back to the code's 1), aborts and restarts in between. Every tree must end (SUCCESS,
/// or ROLLEDBACK when aborted): no step is held back for ever whatever comes when.
TEST_F(type_limits_test, random_limit_changes_aborts_and_restarts_never_leave_a_step_held) {
  const uint64_t seed = seed_from_env();
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  start([](node_options& o) { o.workers = 6; });
  std::vector<uint64_t> ids, aborted;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i)
      ids.push_back(submit("test.capped", R"({"children":)" + std::to_string(pick(0, 3))
                                            + R"(,"child_steps":)" + std::to_string(pick(1, 8))
                                            + "}"));
    for (int k = 0; k < 6; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds{pick(0, 30)});
      switch (pick(0, 3)) {
        case 0:
        case 1: {
          int n = pick(1, 3);
          auto r = limits([n](pb::LimitsRequest& l) {
            l.set_type("test.capped");
            l.set_max_running(static_cast<uint32_t>(n));
          });
          ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
          break;
        }
        case 2: {
          auto r = limits([](pb::LimitsRequest& l) {
            l.set_type("test.capped");
            l.set_clear(true);
          });
          ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
          break;
        }
        case 3: {
          auto id = ids[static_cast<size_t>(pick(0, static_cast<int>(ids.size()) - 1))];
          pb::Request req;
          req.mutable_abort()->set_id(id);
          if (call(req).code() == pb::Response::OK)
            aborted.push_back(id);
          break;
        }
      }
    }
    if (pick(0, 1) == 1)
      restart([](node_options& o) { o.workers = 6; });
  }
  for (auto id : ids) {
    auto s = wait(id, std::chrono::seconds{60});
    bool was_aborted = std::find(aborted.begin(), aborted.end(), id) != aborted.end();
    if (was_aborted)
      EXPECT_TRUE(s.state() == pb::ROLLEDBACK || s.state() == pb::SUCCESS)
        << id << ": " << s.ShortDebugString();
    else
      EXPECT_EQ(s.state(), pb::SUCCESS) << id << ": " << s.ShortDebugString();
  }
  EXPECT_LE(most.load(), 3) << "more steps at once than the largest limit set (3)";
  auto r = limits();
  ASSERT_NE(find(r, "test.capped"), nullptr);
  EXPECT_EQ(find(r, "test.capped")->running(), 0u);
  EXPECT_EQ(find(r, "test.capped")->waiting(), 0u);
}

/// The limiter's accounting as an invariant, under a seeded random mix of every way a step
/// ends: yields (the next job may reach the scheduler before the last one's slot), crashes
/// restarted by the supervisor, failures and their rollbacks, lock waits, aborts, a limit set
/// before the yields and changed while they run, and a restart. When every tree has ended,
/// the type counts no step running and holds none back, and a limit of one still lets a new
/// procedure through (before, each yield could leak its count: "60 of 4 running" with nothing
/// running held every new start for ever). PROCTOR_SEED=<n> replays it.
TEST_F(type_limits_test, every_way_a_step_ends_gives_its_count_back) {
  const uint64_t seed = seed_from_env();
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto set_limit = [&](uint32_t n) {
    auto r = limits([n](pb::LimitsRequest& l) {
      l.set_type("test.yielder");
      l.set_max_running(n);
    });
    ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  };
  start([](node_options& o) { o.workers = 4; });
  set_limit(3);
  std::vector<uint64_t> ids, aborted;
  std::set<uint64_t> failing;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 20; ++i) {
      int kind = pick(0, 9);
      std::string args = R"({"children":)" + std::to_string(pick(0, 25));
      if (kind == 0)
        args += R"(,"child_steps":1)";
      if (kind == 1)
        args += R"(,"spread":true)";
      if (kind >= 7)
        args += R"(,"place_on":"res)" + std::to_string(kind) + "\"";
      ids.push_back(submit("test.yielder", args + "}"));
      if (kind == 0)
        failing.insert(ids.back());
    }
    for (int k = 0; k < 5; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds{pick(0, 20)});
      if (pick(0, 2) == 0) {
        set_limit(static_cast<uint32_t>(pick(1, 4)));
      } else {
        auto id = ids[static_cast<size_t>(pick(0, static_cast<int>(ids.size()) - 1))];
        pb::Request req;
        req.mutable_abort()->set_id(id);
        if (call(req).code() == pb::Response::OK)
          aborted.push_back(id);
      }
    }
    if (round == 0 && pick(0, 1) == 1)
      restart([](node_options& o) { o.workers = 4; });
  }
  for (auto id : ids) {
    auto s = wait(id, std::chrono::seconds{60});
    bool may_roll_back =
      failing.contains(id) || std::find(aborted.begin(), aborted.end(), id) != aborted.end();
    if (may_roll_back)
      EXPECT_TRUE(s.state() == pb::ROLLEDBACK || s.state() == pb::SUCCESS)
        << id << ": " << s.ShortDebugString();
    else
      EXPECT_EQ(s.state(), pb::SUCCESS) << id << ": " << s.ShortDebugString();
  }
  auto r = limits();
  ASSERT_NE(find(r, "test.yielder"), nullptr);
  EXPECT_EQ(find(r, "test.yielder")->running(), 0u) << "a step's count was not given back";
  EXPECT_EQ(find(r, "test.yielder")->waiting(), 0u);
  set_limit(1);
  auto last = submit("test.yielder", R"({"children":3})");
  EXPECT_EQ(wait(last, std::chrono::seconds{20}).state(), pb::SUCCESS);
  EXPECT_EQ(find(limits(), "test.yielder")->running(), 0u);
}

}  // namespace
}  // namespace proctor::testing
