// The scheduler's per-type limits, driven through its messages: jobs run on the "procedure"
// (run_inline) so that the test actor sees each job the scheduler lets go, and every reason
// it gives a procedure it holds back.
#include <gtest/gtest.h>

#include "actors/base/messages.hpp"
#include "actors/scheduling/step_scheduler.hpp"

namespace proctor {
namespace {

using namespace std::chrono_literals;

struct fixture : ::testing::Test {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};

  std::vector<caf::actor> spawned;

  ~fixture() override {
    for (auto& a : spawned)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  caf::actor spawn(std::map<std::string, type_limits> declared) {
    spawned.push_back(spawn_step_scheduler(sys, 4, 30s, std::move(declared)));
    return spawned.back();
  }

  void ready(const caf::actor& sched, uint64_t id, const std::string& type, bool first,
             bool undo = false, int32_t priority = 0, lock_set locks = {}, caf::actor proc = {}) {
    step_job job;
    job.locks = std::move(locks);
    job.proc = proc ? std::move(proc) : caf::actor_cast<caf::actor>(self);
    job.ctx.id_ = id;
    job.ctx.root_id_ = id;
    job.type = type;
    job.first = first;
    job.undo = undo;
    job.priority = priority;
    job.run_inline = true;
    self->send(sched, ready_atom::value, std::move(job));
  }

  /// The next message to the "procedures" (this test's actor is every one of them): "run N"
  /// for job N let go, "wait: REASON" for a reason given ("wait: " when one is let go).
  std::string next(std::chrono::milliseconds within = 2s) {
    std::string out = "nothing";
    self->receive(
      [&](run_inline_atom, step_job& job) {
        out = "run " + std::to_string(job.ctx.id());
        tickets[job.ctx.id()] = job.ticket;
      },
      [&](lock_wait_atom, const std::string& why) { out = "wait: " + why; },
      caf::after(caf::duration{within}) >> [] {});
    return out;
  }

  /// The job of procedure `id` the scheduler let go last ended (its slot comes back).
  void end(const caf::actor& sched, uint64_t id) {
    self->send(sched, slot_atom::value, tickets.at(id));
  }
  std::map<uint64_t, uint64_t> tickets;  ///< by procedure: the ticket of its last job let go

  step_scheduler_stats stats(const caf::actor& sched) {
    step_scheduler_stats out;
    self->request(sched, caf::infinite, stats_atom::value)
      .receive([&](step_scheduler_stats& s) { out = std::move(s); },
               [](caf::error& e) { FAIL() << caf::to_string(e); });
    return out;
  }

  const type_limit_view* view(const step_scheduler_stats& s, const std::string& type) {
    for (const auto& v : s.types)
      if (v.type == type)
        return &v;
    return nullptr;
  }
};

TEST_F(fixture, at_most_max_running_steps_of_a_type_run_and_an_end_lets_the_next_go) {
  auto sched = spawn({{"x", type_limits{2, 0, 1s}}, {"y", {}}});
  for (uint64_t id = 1; id <= 4; ++id)
    ready(sched, id, "x", false);
  ready(sched, 5, "y", false);  // another type is not held up
  EXPECT_EQ(next(), "run 1");
  EXPECT_EQ(next(), "run 2");
  EXPECT_EQ(next(), "wait: type limit x: 2 of 2 running");
  EXPECT_EQ(next(), "wait: type limit x: behind 1 held back before it (at most 2 running)");
  EXPECT_EQ(next(), "run 5");
  EXPECT_EQ(next(200ms), "nothing");
  auto s = stats(sched);
  EXPECT_EQ(s.limit_waiting, 2u);
  ASSERT_NE(view(s, "x"), nullptr);
  EXPECT_EQ(view(s, "x")->running, 2u);
  EXPECT_EQ(view(s, "x")->waiting, 2u);
  EXPECT_EQ(view(s, "x")->throttled, 2u);
  EXPECT_EQ(view(s, "y")->running, 1u);
  end(sched, 1);
  EXPECT_EQ(next(), "wait: ");  // procedure 3 is told it goes
  EXPECT_EQ(next(), "run 3");
  EXPECT_EQ(next(200ms), "nothing") << "still 2 of 2 running";
  // A stopped procedure's held step is dropped.
  self->request(sched, caf::infinite, cancel_atom::value, uint64_t{4})
    .receive([](bool dropped) { EXPECT_TRUE(dropped); }, [](caf::error&) { FAIL(); });
  end(sched, 2);
  EXPECT_EQ(next(200ms), "nothing");
  EXPECT_EQ(stats(sched).limit_waiting, 0u);
  EXPECT_EQ(view(stats(sched), "x")->running, 1u);
}

TEST_F(fixture, undos_are_neither_held_back_nor_counted) {
  auto sched = spawn({{"x", type_limits{1, 0, 1s}}});
  ready(sched, 1, "x", false);
  EXPECT_EQ(next(), "run 1");
  ready(sched, 2, "x", false, /*undo=*/true);
  EXPECT_EQ(next(), "run 2");
  EXPECT_EQ(view(stats(sched), "x")->running, 1u);
}

TEST_F(fixture, a_procedure_under_way_goes_before_starts_and_higher_priorities_first) {
  auto sched = spawn({{"x", type_limits{1, 0, 1s}}});
  ready(sched, 1, "x", true);
  EXPECT_EQ(next(), "run 1");
  ready(sched, 2, "x", true);             // a start
  ready(sched, 3, "x", false);            // a step of a procedure under way
  ready(sched, 4, "x", false, false, 5);  // the same, of a higher priority
  EXPECT_EQ(next(), "wait: type limit x: 1 of 1 running");
  EXPECT_EQ(next(), "wait: type limit x: 1 of 1 running");  // a step is not behind a start
  EXPECT_EQ(next(), "wait: type limit x: behind 1 held back before it (at most 1 running)");
  end(sched, 1);
  EXPECT_EQ(next(), "wait: ");
  EXPECT_EQ(next(), "run 4");
  end(sched, 4);
  EXPECT_EQ(next(), "wait: ");
  EXPECT_EQ(next(), "run 3");
  end(sched, 3);
  EXPECT_EQ(next(), "wait: ");
  EXPECT_EQ(next(), "run 2");
}

TEST_F(fixture, a_step_that_comes_after_an_end_does_not_pass_the_one_held_before_it) {
  auto sched = spawn({{"x", type_limits{1, 0, 1s}}});
  ready(sched, 1, "x", false);
  EXPECT_EQ(next(), "run 1");
  ready(sched, 2, "x", false);
  EXPECT_EQ(next(), "wait: type limit x: 1 of 1 running");
  end(sched, 1);
  ready(sched, 3, "x", false);  // arrives after 1 ended, while 2 is let go
  EXPECT_EQ(next(), "wait: ");
  EXPECT_EQ(next(), "run 2");
  EXPECT_EQ(next(), "wait: type limit x: 1 of 1 running");
}

TEST_F(fixture, starts_follow_the_rate_and_wake_when_the_next_token_comes) {
  auto sched = spawn({{"x", type_limits{0, 1, 300ms}}});
  auto t0 = std::chrono::steady_clock::now();
  ready(sched, 1, "x", true);
  ready(sched, 2, "x", true);
  ready(sched, 3, "x", false);  // under way: no token needed
  EXPECT_EQ(next(), "run 1");
  EXPECT_EQ(next(), "wait: type rate x: 1 starts per 300ms");
  EXPECT_EQ(next(), "run 3");
  EXPECT_EQ(next(), "wait: ");
  EXPECT_EQ(next(), "run 2");
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 290ms);
  EXPECT_LT(waited, 2s);
}

TEST_F(fixture, an_operator_change_applies_at_once_to_the_held_steps) {
  auto sched = spawn({{"x", type_limits{1, 0, 1s}}});
  for (uint64_t id = 1; id <= 3; ++id)
    ready(sched, id, "x", false);
  EXPECT_EQ(next(), "run 1");
  EXPECT_EQ(next(), "wait: type limit x: 1 of 1 running");
  EXPECT_EQ(next(), "wait: type limit x: behind 1 held back before it (at most 1 running)");
  self->send(sched, limits_set_atom::value, type_limit_change{"x", type_limits{3, 0, 1s}, 99});
  EXPECT_EQ(next(), "wait: ");
  EXPECT_EQ(next(), "run 2");
  EXPECT_EQ(next(), "wait: ");
  EXPECT_EQ(next(), "run 3");
  std::vector<type_limit_view> views;
  self->request(sched, caf::infinite, limits_atom::value)
    .receive([&](std::vector<type_limit_view>& v) { views = std::move(v); },
             [](caf::error&) { FAIL(); });
  ASSERT_EQ(views.size(), 1u);
  EXPECT_EQ(views[0].effective.max_running, 3u);
  EXPECT_EQ(views[0].code.max_running, 1u);
  EXPECT_EQ(views[0].running, 3u);
  // Back to the code's 1: nothing new runs until two have ended.
  self->send(sched, limits_set_atom::value, type_limit_change{"x", std::nullopt, 0});
  ready(sched, 4, "x", false);
  EXPECT_EQ(next(), "wait: type limit x: 3 of 1 running");
  end(sched, 1);
  end(sched, 2);
  EXPECT_EQ(next(200ms), "nothing");
  end(sched, 3);
  EXPECT_EQ(next(), "wait: ");
  EXPECT_EQ(next(), "run 4");
}

// A yield: the procedure's next job reaches the scheduler before the slot of the job that
// yielded (a worker thread sends the slot, the procedure its next job). Each job's end gives
// back exactly its own count: before tickets, the second job took the first's place in the
// table by procedure, the first's count was never given back, and "1 of 1 running" with
// nothing running held every later start for ever.
TEST_F(fixture, a_next_job_that_comes_before_the_last_ones_slot_loses_no_count) {
  auto sched = spawn({{"x", type_limits{2, 0, 1s}}, {"y", {}}});
  for (const char* type : {"x", "y"}) {  // limited, and declared without a limit (counted too)
    ready(sched, 1, type, false);
    EXPECT_EQ(next(), "run 1");
    auto first = tickets.at(1);
    ready(sched, 1, type, false);  // its next job, before the first one's slot
    EXPECT_EQ(next(), "run 1");
    auto second = tickets.at(1);
    EXPECT_NE(first, second);
    EXPECT_EQ(view(stats(sched), type)->running, 2u) << type;
    self->send(sched, slot_atom::value, first);
    self->send(sched, slot_atom::value, second);
    EXPECT_EQ(view(stats(sched), type)->running, 0u) << type;
    EXPECT_EQ(stats(sched).running, 0u) << type;
    self->send(sched, slot_atom::value, second);  // told twice: nothing changes
    EXPECT_EQ(stats(sched).running, 0u) << type;
  }
  // Nothing leaked: two run at once again.
  ready(sched, 2, "x", false);
  ready(sched, 3, "x", false);
  EXPECT_EQ(next(), "run 2");
  EXPECT_EQ(next(), "run 3");
}

// A procedure's actor gone with a job at the scheduler: one sent back to run on the actor
// gives its slot and count back, one queued or held is dropped; a job on a worker is not
// touched (its worker gives its slot back). Jobs are the actor's, by its address: another
// actor's job (a restarted procedure's new actor, the test's own) stays.
TEST_F(fixture, a_gone_procedures_jobs_give_their_slots_and_counts_back) {
  auto sched = spawn({{"x", type_limits{1, 0, 1s}}});
  auto quiet = [](caf::event_based_actor*) -> caf::behavior {
    return {[](run_inline_atom, step_job&) {}, [](lock_wait_atom, const std::string&) {}};
  };
  auto one = sys.spawn(quiet);
  auto two = sys.spawn(quiet);
  ready(sched, 1, "x", false, false, 0, {}, one);  // sent to run on its actor, which goes
  ready(sched, 2, "x", false, false, 0, {}, two);  // held: 1 of 1 running
  ready(sched, 2, "x", false);                     // the same procedure's new actor: held too
  EXPECT_EQ(next(), "wait: type limit x: behind 1 held back before it (at most 1 running)");
  EXPECT_EQ(stats(sched).limit_waiting, 2u);
  self->send(sched, proc_gone_atom::value, two.address());
  self->send(sched, proc_gone_atom::value, one.address());
  EXPECT_EQ(next(), "wait: ");  // the new actor's job goes
  EXPECT_EQ(next(), "run 2");
  EXPECT_EQ(view(stats(sched), "x")->running, 1u);
  EXPECT_EQ(stats(sched).limit_waiting, 0u);
  caf::anon_send_exit(one, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(two, caf::exit_reason::user_shutdown);
}

// A job its limits let go that then waits for a lock gives its count back, and with it room
// for a job of its type held back meanwhile: here the lock's holder, whose next step waits for
// a run slot. Before, nothing let the holder go, and both waited for ever.
TEST_F(fixture, a_lock_wait_lets_a_held_job_of_its_type_go) {
  auto sched = spawn({{"x", type_limits{1, 0, 1s}}});
  const lock_set r{resource_lock::exclusive_on("r")};
  ready(sched, 1, "x", false, false, 0, r);
  EXPECT_EQ(next(), "run 1");  // procedure 1 holds lock r from now on
  end(sched, 1);
  ready(sched, 4, "x", false);
  EXPECT_EQ(next(), "run 4");
  ready(sched, 2, "x", false, false, 0, r);
  EXPECT_EQ(next(), "wait: type limit x: 1 of 1 running");
  ready(sched, 1, "x", false, false, 0, r);  // the holder's next step
  EXPECT_EQ(next(), "wait: type limit x: behind 1 held back before it (at most 1 running)");
  end(sched, 4);
  EXPECT_EQ(next(), "wait: ");                     // 2 goes ...
  EXPECT_EQ(next().rfind("wait: lock r", 0), 0u);  // ... and waits for r
  EXPECT_EQ(next(), "wait: ");                     // so 1, r's holder, goes
  EXPECT_EQ(next(), "run 1");
  EXPECT_EQ(view(stats(sched), "x")->running, 1u);
}

}  // namespace
}  // namespace proctor
