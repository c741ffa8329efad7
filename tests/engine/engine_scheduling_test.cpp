// The scheduler's order: priorities first, then round-robin between roots.
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

std::mutex order_mtx;
std::vector<uint64_t> order;  // procedures in the order their steps ran

/// The test's gate: while it is closed, a marker's step waits in its run slot (at most
/// 30 s), so the test decides when the slot frees up instead of hoping that its submits
/// are faster than the work queued before them.
std::atomic<bool> gate_open{true};
std::atomic<int> steps_started{0};

void pass_gate() {
  ++steps_started;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
  while (!gate_open.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
}

/// One step that notes its procedure id, after the gate and `steps` milliseconds of work.
class marker : public state_machine<pb::NoopData, pb::NoopState> {
public:
  marker() { on(pb::NOOP_STEP, &marker::step, &marker::nothing); }

private:
  outcome step(pb::NoopData& d, context& ctx) {
    pass_gate();
    std::this_thread::sleep_for(std::chrono::milliseconds{d.steps()});
    std::lock_guard<std::mutex> g(order_mtx);
    order.push_back(ctx.id());
    return done();
  }
  void nothing(pb::NoopData&, context&) {}
};

/// Spawns `steps` markers (of 2 ms each) and ends.
class crowd : public state_machine<pb::NoopData, pb::NoopState> {
public:
  crowd() { on(pb::NOOP_STEP, &crowd::step, &crowd::nothing); }

private:
  outcome step(pb::NoopData& d, context& ctx) {
    if (!ctx.children().empty())
      return done();
    pb::NoopData m;
    m.set_steps(2);
    std::vector<child_spec> kids(static_cast<size_t>(d.steps()), child("test.marker", m));
    return spawn(std::move(kids), pb::NOOP_STEP);
  }
  void nothing(pb::NoopData&, context&) {}
};

/// A quick first state declared nonblocking (it notes that it ran), then a marker's step.
class quick_then_marker : public state_machine<pb::TimerData, pb::TimerState> {
public:
  quick_then_marker() {
    on(pb::TIMER_WAIT, &quick_then_marker::quick, &quick_then_marker::nothing);
    on(pb::TIMER_FIRE, &quick_then_marker::slow, &quick_then_marker::nothing);
    nonblocking(pb::TIMER_WAIT);
  }

  static inline std::atomic<int> quick_ran{0};

private:
  outcome quick(pb::TimerData&, context&) {
    ++quick_ran;
    return next(pb::TIMER_FIRE);
  }
  outcome slow(pb::TimerData&, context& ctx) {
    pass_gate();
    std::lock_guard<std::mutex> g(order_mtx);
    order.push_back(ctx.id());
    return done();
  }
  void nothing(pb::TimerData&, context&) {}
};

class scheduling_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    std::lock_guard<std::mutex> g(order_mtx);
    order.clear();
    gate_open = true;
    steps_started = 0;
    types_.add<marker>("test.marker");
    types_.add<crowd>("test.crowd");
    types_.add<quick_then_marker>("test.quick_then_marker");
    quick_then_marker::quick_ran = 0;
  }

  size_t position(uint64_t id) {
    std::lock_guard<std::mutex> g(order_mtx);
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i] == id)
        return i;
    return order.size();
  }
};

TEST_F(scheduling_test, higher_priority_runs_first) {
  start([](node_options& o) { o.workers = 1; });
  // The one run slot is held by the blocker's step until the gate opens; everything below
  // queues behind it.
  gate_open = false;
  auto blocker = submit("test.marker", R"({"steps":1})");
  ASSERT_TRUE(eventually([&] { return steps_started.load() == 1; }))
    << "the blocker's step never started";
  std::vector<uint64_t> low;
  for (int i = 0; i < 5; ++i)
    low.push_back(submit("test.marker", R"({"steps":1})", {}, 0));
  auto high = submit("test.marker", R"({"steps":1})", {}, 10);
  ASSERT_TRUE(eventually([&] { return metric("proctor_queue_depth") >= 6; }))
    << "the six steps never all queued for the run slot";
  gate_open = true;
  for (auto id : low)
    EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_EQ(wait(high).state(), pb::SUCCESS);
  EXPECT_EQ(position(blocker), 0u);
  EXPECT_EQ(position(high), 1u) << "the high-priority procedure did not run next";
}

TEST_F(scheduling_test, one_huge_tree_does_not_starve_another_root) {
  start([](node_options& o) { o.workers = 1; });
  // The tree's first marker holds the one run slot until the small root is queued too.
  gate_open = false;
  auto big = submit("test.crowd", R"({"steps":60})");
  ASSERT_TRUE(eventually([&] { return status(big).children_size() == 60; }));
  ASSERT_TRUE(eventually([&] { return steps_started.load() == 1; }))
    << "no marker of the tree started";
  auto small = submit("test.marker", R"({"steps":1})");
  ASSERT_TRUE(eventually([&] { return metric("proctor_queue_depth") >= 60; }))
    << "the tree's 59 other markers and the small root never all queued for the run slot";
  gate_open = true;
  EXPECT_EQ(wait(small).state(), pb::SUCCESS);
  EXPECT_EQ(wait(big).state(), pb::SUCCESS);
  // Round-robin between roots: the small root waits for at most a few of the tree's 60 steps.
  EXPECT_LT(position(small), 10u) << "ran after " << position(small) << " steps of the big tree";
}

TEST_F(scheduling_test, a_state_declared_nonblocking_runs_while_every_run_slot_is_taken) {
  start([](node_options& o) { o.workers = 1; });
  gate_open = false;
  auto blocker = submit("test.marker", R"({"steps":1})");
  ASSERT_TRUE(eventually([&] { return steps_started.load() == 1; }))
    << "the blocker's step never started";
  // Its first state runs on its actor, although the one run slot is held; its second,
  // blocking, waits for the slot.
  auto id = submit("test.quick_then_marker", R"({"wake_at_ms":1})");
  EXPECT_TRUE(eventually([&] { return quick_then_marker::quick_ran.load() == 1; }))
    << "the nonblocking state waited for a run slot";
  EXPECT_TRUE(eventually([&] { return metric("proctor_queue_depth") >= 1; }))
    << "the blocking state did not queue for the run slot";
  EXPECT_EQ(steps_started.load(), 1) << "the blocking state ran without a run slot";
  gate_open = true;
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_EQ(wait(blocker).state(), pb::SUCCESS);
  EXPECT_EQ(position(blocker), 0u);
  EXPECT_EQ(position(id), 1u);
  EXPECT_EQ(quick_then_marker::quick_ran.load(), 1);
}

}  // namespace
}  // namespace proctor::testing
