// Task queues for external workers (docs/workers.md): a step dispatches a task, a worker polls
// it (a lease), heartbeats, completes or fails it; the procedure resumes with the result,
// journaled before it acts on it. Nothing is accepted twice; a restart keeps every task.
#include "actors/wire/wall_clock.hpp"
#include "tests/engine/task_engine.hpp"

namespace proctor::testing {
namespace {

using tasks_test = task_engine;

TEST_F(tasks_test, a_worker_runs_each_step_and_the_procedure_ends_with_their_results) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"billing.charge","steps":2,"ledger_dir":"/x"})");
  auto t0 = poll_one("billing.charge");
  EXPECT_EQ(t0.proc_id(), id);
  EXPECT_EQ(t0.type(), "demo.dispatch");
  EXPECT_EQ(t0.attempt(), 1U);
  EXPECT_NE(t0.input_json().find(R"("step":0)"), std::string::npos) << t0.input_json();
  EXPECT_NE(t0.input_json().find(R"("ledger_dir":"/x")"), std::string::npos) << t0.input_json();
  EXPECT_GT(t0.lease_until_ms(), wall_ms());
  EXPECT_EQ(status(id).waiting_for(), "task on queue billing.charge");
  auto c = complete(t0.token(), R"({"charged":1})");
  ASSERT_EQ(c.code(), pb::Response::OK) << c.error();
  auto t1 = poll_one("billing.charge");
  EXPECT_NE(t1.input_json().find(R"("step":1)"), std::string::npos) << t1.input_json();
  EXPECT_NE(t1.token(), t0.token());
  ASSERT_EQ(complete(t1.token(), R"({"charged":2})").code(), pb::Response::OK);
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.result_json(), R"({"results":[{"charged":1},{"charged":2}]})");
  auto q = queues();
  ASSERT_EQ(q.task().queues_size(), 1);
  EXPECT_EQ(q.task().queues(0).name(), "billing.charge");
  EXPECT_EQ(q.task().queues(0).dispatched(), 2U);
  EXPECT_EQ(q.task().queues(0).completed(), 2U);
  EXPECT_EQ(q.task().queues(0).depth(), 0U);
  ASSERT_EQ(q.task().queues(0).workers_size(), 1);
  EXPECT_EQ(q.task().queues(0).workers(0).worker(), "w1");
}

TEST_F(tasks_test, a_poll_waits_for_a_task_and_an_empty_one_ends_at_its_bound) {
  start();
  auto empty = poll("nothing.here", "w1", 1, 100);
  EXPECT_EQ(empty.code(), pb::Response::OK);
  EXPECT_EQ(empty.task().tasks_size(), 0);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto r = poll("later", "w2", 1, 10'000);
    got = r.task().tasks_size() == 1;
  });
  ASSERT_TRUE(eventually([&] {
    auto q = queues();
    for (const auto& x : q.task().queues())
      if (x.name() == "later" && x.pollers() == 1)
        return true;
    return false;
  }));
  submit("demo.dispatch", R"({"queue":"later"})");
  waiter.join();
  EXPECT_TRUE(got);
}

TEST_F(tasks_test, the_same_complete_twice_answers_the_same_and_nothing_else_is_accepted) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"q"})");
  auto t = poll_one("q");
  ASSERT_EQ(complete(t.token(), R"({"a":1})").code(), pb::Response::OK);
  auto again = complete(t.token(), R"({"a":1})");
  EXPECT_EQ(again.code(), pb::Response::OK) << again.error();
  auto other = complete(t.token(), R"({"a":2})");
  EXPECT_EQ(other.code(), pb::Response::REFUSED);
  EXPECT_NE(other.error().find("has ended"), std::string::npos) << other.error();
  auto fail = report(pb::TaskRequest::FAIL, t.token(), {}, "late");
  EXPECT_EQ(fail.code(), pb::Response::REFUSED);
  EXPECT_EQ(wait(id).result_json(), R"({"results":[{"a":1}]})");
}

TEST_F(tasks_test, a_lease_that_runs_out_queues_the_next_attempt_and_the_late_result_is_refused) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"slow","start_to_close_ms":300,"max_attempts":3})");
  auto first = poll_one("slow", "sleepy");
  EXPECT_EQ(first.attempt(), 1U);
  auto second = poll_one("slow", "fresh");  // waits until attempt 1's lease ran out
  EXPECT_EQ(second.attempt(), 2U);
  EXPECT_EQ(second.proc_id(), id);
  auto late = complete(first.token(), R"({"from":"sleepy"})");
  EXPECT_EQ(late.code(), pb::Response::REFUSED);
  EXPECT_NE(late.error().find("attempt 1"), std::string::npos) << late.error();
  ASSERT_EQ(complete(second.token(), R"({"from":"fresh"})").code(), pb::Response::OK);
  EXPECT_EQ(wait(id).result_json(), R"({"results":[{"from":"fresh"}]})");
  EXPECT_EQ(queues().task().queues(0).timed_out(), 1U);
}

TEST_F(tasks_test, heartbeats_keep_a_lease_and_carry_details_to_the_next_attempt) {
  start();
  auto id = submit("demo.dispatch",
                   R"({"queue":"beat","start_to_close_ms":60000,"heartbeat_ms":1500,
                       "max_attempts":2})");
  auto t = poll_one("beat");
  EXPECT_EQ(t.heartbeat_ms(), 1500);
  for (int i = 0; i < 4; ++i) {  // longer than one heartbeat bound in all
    std::this_thread::sleep_for(std::chrono::milliseconds{500});
    auto b = report(pb::TaskRequest::HEARTBEAT, t.token(), R"({"done":)" + std::to_string(i) + "}");
    ASSERT_EQ(b.code(), pb::Response::OK) << b.error();
    EXPECT_FALSE(b.task().cancel_requested());
  }
  // A heartbeat without details keeps the last ones.
  ASSERT_EQ(report(pb::TaskRequest::HEARTBEAT, t.token()).code(), pb::Response::OK);
  // No heartbeat now: the lease runs out, and the next attempt sees the last details.
  auto next = poll_one("beat", "w2");
  EXPECT_EQ(next.attempt(), 2U);
  EXPECT_EQ(next.details_json(), R"({"done":3})");
  ASSERT_EQ(complete(next.token(), "{}").code(), pb::Response::OK);
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
}

TEST_F(tasks_test, a_failure_is_retried_until_its_attempts_run_out_then_the_procedure_fails) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"flaky","max_attempts":2})");
  auto a1 = poll_one("flaky");
  auto f1 = report(pb::TaskRequest::FAIL, a1.token(), {}, "card declined", true);
  ASSERT_EQ(f1.code(), pb::Response::OK) << f1.error();
  EXPECT_NE(f1.text().find("attempt 2"), std::string::npos) << f1.text();
  auto a2 = poll_one("flaky");
  EXPECT_EQ(a2.attempt(), 2U);
  ASSERT_EQ(report(pb::TaskRequest::FAIL, a2.token(), {}, "card declined again", true).code(),
            pb::Response::OK);
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("failed on attempt 2 of 2"), std::string::npos) << s.error();
  EXPECT_NE(s.error().find("card declined again"), std::string::npos) << s.error();
}

TEST_F(tasks_test, a_failure_that_is_not_retryable_fails_at_once) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"hard","max_attempts":5})");
  auto t = poll_one("hard");
  ASSERT_EQ(report(pb::TaskRequest::FAIL, t.token(), {}, "no such account", false).code(),
            pb::Response::OK);
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("not retryable"), std::string::npos) << s.error();
}

TEST_F(tasks_test, an_abort_tells_the_worker_at_its_heartbeat_and_refuses_its_result) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"q","heartbeat_ms":5000})");
  auto t = poll_one("q");
  pb::Request a;
  a.mutable_abort()->set_id(id);
  ASSERT_EQ(call(a).code(), pb::Response::OK);
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
  auto b = report(pb::TaskRequest::HEARTBEAT, t.token(), "{}");
  ASSERT_EQ(b.code(), pb::Response::OK) << b.error();
  EXPECT_TRUE(b.task().cancel_requested());
  EXPECT_EQ(complete(t.token(), "{}").code(), pb::Response::REFUSED);
}

TEST_F(tasks_test, a_restart_keeps_queued_and_leased_tasks_and_their_tokens) {
  start();
  auto leased = submit("demo.dispatch", R"({"queue":"r","start_to_close_ms":60000})");
  auto t = poll_one("r");
  ASSERT_EQ(t.proc_id(), leased);
  auto queued = submit("demo.dispatch", R"({"queue":"r"})");
  ASSERT_TRUE(eventually([&] { return status(queued).waiting_for() == "task on queue r"; }));
  restart();
  // The queued one is handed out (attempt 1); the leased one is not: its lease goes on.
  auto after = poll_one("r", "w2");
  EXPECT_EQ(after.proc_id(), queued);
  EXPECT_EQ(after.attempt(), 1U);
  EXPECT_EQ(poll("r", "w3", 1, 200).task().tasks_size(), 0);
  ASSERT_EQ(complete(t.token(), R"({"who":"before"})").code(), pb::Response::OK);
  ASSERT_EQ(complete(after.token(), R"({"who":"after"})").code(), pb::Response::OK);
  EXPECT_EQ(wait(leased).result_json(), R"({"results":[{"who":"before"}]})");
  EXPECT_EQ(wait(queued).result_json(), R"({"results":[{"who":"after"}]})");
}

TEST_F(tasks_test, a_result_made_durable_before_a_restart_is_the_one_the_procedure_gets) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"d"})");
  auto t = poll_one("d");
  ASSERT_EQ(complete(t.token(), R"({"n":7})").code(), pb::Response::OK);
  restart();
  EXPECT_EQ(wait(id).result_json(), R"({"results":[{"n":7}]})");
  EXPECT_EQ(poll("d", "w1", 1, 200).task().tasks_size(), 0);  // not handed out again
}

TEST_F(tasks_test, a_passivated_waiter_is_woken_by_its_result) {
  start([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{1}; });
  auto id = submit("demo.dispatch", R"({"queue":"p","steps":2})");
  for (int i = 0; i < 2; ++i) {
    auto t = poll_one("p");
    ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_roots") == 1; }));
    ASSERT_EQ(complete(t.token(), std::to_string(i)).code(), pb::Response::OK);
  }
  EXPECT_EQ(wait(id).result_json(), R"({"results":[0,1]})");
}

TEST_F(tasks_test, malformed_requests_are_refused_with_a_reason) {
  start();
  pb::Request r;
  auto* t = r.mutable_task();
  t->set_op(pb::TaskRequest::POLL);
  t->set_worker("w");
  t->add_queues("bad queue");
  auto bad = call(r);
  EXPECT_EQ(bad.code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(bad.error().find("character ' '"), std::string::npos) << bad.error();
  t->clear_queues();
  t->add_queues("ok");
  t->clear_worker();
  EXPECT_EQ(call(r).code(), pb::Response::BAD_REQUEST);
  EXPECT_EQ(complete("garbage", "{}").code(), pb::Response::BAD_REQUEST);
  EXPECT_EQ(complete("1:2:3.1", "{}").code(), pb::Response::REFUSED);
  auto id = submit("demo.dispatch", R"({"queue":"j"})");
  auto task = poll_one("j");
  auto notjson = complete(task.token(), "{not json");
  EXPECT_EQ(notjson.code(), pb::Response::BAD_REQUEST);
  ASSERT_EQ(complete(task.token(), "true").code(), pb::Response::OK);  // nothing was changed
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  auto refused = submit("demo.dispatch", R"({"queue":"has space"})");
  auto s = wait(refused);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("task queue name"), std::string::npos) << s.error();
}

}  // namespace
}  // namespace proctor::testing
