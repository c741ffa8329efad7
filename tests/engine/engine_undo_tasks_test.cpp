// Undos run by external workers (context::dispatch_undo; docs/workers.md, "Undos run by
// workers"): a rollback hands each undo to a task queue, waits for a worker's result before
// the next undo, retries a failed one by running its handler again, and after a restart waits
// for the same task (the same token) rather than dispatch it again.
#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "tests/engine/task_engine.hpp"

namespace proctor::testing {
namespace {

using undo_tasks_test = task_engine;

/// Races two demo.dispatch children under join::any: one on queue "slow" whose undo is a task
/// too, one on queue "fast". The first to end wins; the other is cancelled, and undone.
class race_tasks : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  race_tasks() {
    on(pb::WAIT_EVENT_SUSPEND, &race_tasks::race, &race_tasks::nothing);
    on(pb::WAIT_EVENT_RESUME, &race_tasks::joined, &race_tasks::nothing);
  }

private:
  outcome race(pb::WaitEventData&, context&) {
    pb::DispatchData slow;
    slow.set_queue("slow");
    slow.set_steps(1);
    slow.set_undo_on_queue(true);
    slow.set_start_to_close_ms(60'000);
    pb::DispatchData fast;
    fast.set_queue("fast");
    fast.set_steps(1);
    return spawn({child("demo.dispatch", slow), child("demo.dispatch", fast)},
                 pb::WAIT_EVENT_RESUME)
      .join(join::any());
  }
  outcome joined(pb::WaitEventData&, context&) { return done(); }
  void nothing(pb::WaitEventData&, context&) {}
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// An abort while a worker holds the second task: its heartbeat is told to cancel, then the
// undos of both tasks reach the queue, newest first, one at a time, and the tree rolls back
// only once both were completed.
TEST_F(undo_tasks_test, an_abort_mid_task_hands_each_tasks_undo_to_a_worker_newest_first) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"pay","steps":2,"undo_on_queue":true,)"
                                    R"("heartbeat_ms":5000})");
  auto t0 = poll_one("pay");
  ASSERT_EQ(complete(t0.token(), R"({"charged":0})").code(), pb::Response::OK);
  auto t1 = poll_one("pay");
  ASSERT_TRUE(has(t1.input_json(), R"("step":1)")) << t1.input_json();
  pb::Request a;
  a.mutable_abort()->set_id(id);
  ASSERT_EQ(call(a).code(), pb::Response::OK);
  auto u1 = poll_one("pay", "refunder");
  EXPECT_EQ(u1.proc_id(), id);
  EXPECT_TRUE(has(u1.input_json(), R"("undo":true)")) << u1.input_json();
  EXPECT_TRUE(has(u1.input_json(), R"("step":1)")) << u1.input_json();
  auto beat = report(pb::TaskRequest::HEARTBEAT, t1.token(), "{}");
  ASSERT_EQ(beat.code(), pb::Response::OK) << beat.error();
  EXPECT_TRUE(beat.task().cancel_requested());
  auto s = status(id);
  EXPECT_EQ(s.state(), pb::FAILED);
  EXPECT_TRUE(has(s.waiting_for(), "task on queue pay")) << s.waiting_for();
  // One undo at a time: the next is not handed out before this one's result.
  EXPECT_EQ(poll("pay", "other", 1, 300).task().tasks_size(), 0);
  ASSERT_EQ(complete(u1.token(), R"({"refunded":1})").code(), pb::Response::OK);
  auto u0 = poll_one("pay", "refunder");
  EXPECT_TRUE(has(u0.input_json(), R"("step":0)")) << u0.input_json();
  EXPECT_EQ(status(id).state(), pb::FAILED);  // still waits for u0
  ASSERT_EQ(complete(u0.token(), R"({"refunded":0})").code(), pb::Response::OK);
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
  auto q = queues();
  ASSERT_EQ(q.task().queues_size(), 1);
  EXPECT_EQ(q.task().queues(0).completed(), 3U);  // t0, u1, u0 (t1 was withdrawn)
}

// A worker fails an undo's task for good: the rollback runs its handler again after a
// back-off, which dispatches a new task (a new token); the first one's token is refused.
TEST_F(undo_tasks_test, an_undo_task_that_fails_is_dispatched_again_until_a_worker_completes_it) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"q","undo_on_queue":true,"fail_at_end":true,)"
                                    R"("max_attempts":1})");
  auto t = poll_one("q");
  ASSERT_EQ(complete(t.token(), "{}").code(), pb::Response::OK);
  auto u = poll_one("q");
  EXPECT_TRUE(has(u.input_json(), R"("undo":true)")) << u.input_json();
  ASSERT_EQ(report(pb::TaskRequest::FAIL, u.token(), {}, "refund service down", false).code(),
            pb::Response::OK);
  auto again = poll_one("q");
  EXPECT_NE(again.token(), u.token());
  EXPECT_TRUE(has(again.input_json(), R"("undo":true)")) << again.input_json();
  EXPECT_EQ(complete(u.token(), "{}").code(), pb::Response::REFUSED);
  ASSERT_EQ(complete(again.token(), R"({"refunded":true})").code(), pb::Response::OK);
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_TRUE(has(s.error(), "fails after its last task")) << s.error();

  pb::Request h;
  h.mutable_history()->set_id(id);
  auto hist = call(h);
  ASSERT_EQ(hist.code(), pb::Response::OK) << hist.error();
  int dispatched = 0;
  for (const auto& e : hist.history().entries())
    if (e.kind() == "undo dispatched") {
      ++dispatched;
      EXPECT_TRUE(has(e.detail(), "on queue q")) << e.detail();
    }
  // Its records may have been folded into the summary by now; if not, both dispatches show.
  EXPECT_TRUE(dispatched == 0 || dispatched == 2) << dispatched;
}

// An undo's task failed for good, and the node restarts (before or after the handler ran again):
// that the task failed is journaled with its end's delete, so the restarted rollback runs the
// handler again and hands out a new task, never the failed one under its old token.
TEST_F(undo_tasks_test, after_a_restart_a_failed_undo_task_is_not_handed_out_again) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"f","undo_on_queue":true,"fail_at_end":true,)"
                                    R"("max_attempts":1})");
  ASSERT_EQ(complete(poll_one("f").token(), "{}").code(), pb::Response::OK);
  auto u = poll_one("f");
  ASSERT_TRUE(has(u.input_json(), R"("undo":true)")) << u.input_json();
  ASSERT_EQ(report(pb::TaskRequest::FAIL, u.token(), {}, "refund service down", false).code(),
            pb::Response::OK);
  pb::Request h;
  h.mutable_history()->set_id(id);
  ASSERT_TRUE(eventually([&] {
    auto hist = call(h);  // held: a range-for over a temporary's field would dangle
    for (const auto& e : hist.history().entries())
      if (e.kind() == "undo task failed" && has(e.detail(), "refund service down"))
        return true;
    return false;
  }))
    << "no 'undo task failed' in the history";
  restart();
  auto again = poll_one("f");
  EXPECT_NE(again.token(), u.token());
  EXPECT_EQ(again.attempt(), 1U);
  EXPECT_TRUE(has(again.input_json(), R"("undo":true)")) << again.input_json();
  EXPECT_EQ(complete(u.token(), "{}").code(), pb::Response::REFUSED);
  ASSERT_EQ(complete(again.token(), R"({"refunded":true})").code(), pb::Response::OK);
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
}

// A join policy cancels a child whose undo is a task, and the node restarts while a worker holds
// that task: the parent's cancellation waits for the same task, whose lease goes on with the
// same token (its TaskState is kept at recovery, as a rolling-back tree's is).
TEST_F(undo_tasks_test, a_restart_during_a_cancellations_undo_task_keeps_its_lease) {
  types_.add<race_tasks>("test.race_tasks");
  start();
  auto id = submit("test.race_tasks", "{}");
  auto slow = poll_one("slow", "w0");  // the slow child's task, leased: not handed out again
  ASSERT_FALSE(has(slow.input_json(), R"("undo":true)")) << slow.input_json();
  ASSERT_EQ(complete(poll_one("fast").token(), R"({"fast":1})").code(), pb::Response::OK);
  auto u = poll_one("slow", "w1");  // the cancelled child's undo
  ASSERT_TRUE(has(u.input_json(), R"("undo":true)")) << u.input_json();
  EXPECT_EQ(u.proc_id(), slow.proc_id());
  restart();
  EXPECT_EQ(poll("slow", "w2", 1, 300).task().tasks_size(), 0);  // still leased to w1
  ASSERT_EQ(complete(u.token(), R"({"refunded":true})").code(), pb::Response::OK);
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
}

// A restart while a worker holds an undo's task: the rollback waits for the same task, whose
// lease goes on with the same token; nothing is handed out again.
TEST_F(undo_tasks_test, a_restart_during_an_undo_task_keeps_its_lease_and_its_token) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"r","undo_on_queue":true,"fail_at_end":true,)"
                                    R"("start_to_close_ms":60000})");
  ASSERT_EQ(complete(poll_one("r").token(), "{}").code(), pb::Response::OK);
  auto u = poll_one("r");
  ASSERT_TRUE(has(u.input_json(), R"("undo":true)")) << u.input_json();
  restart();
  EXPECT_EQ(poll("r", "w2", 1, 300).task().tasks_size(), 0);  // still leased to w1
  EXPECT_TRUE(has(status(id).waiting_for(), "task on queue r")) << status(id).waiting_for();
  ASSERT_EQ(complete(u.token(), R"({"refunded":true})").code(), pb::Response::OK);
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
}

// The undo's result was durable when the node went down: the rollback ends with it and hands
// out nothing more.
TEST_F(undo_tasks_test, an_undo_result_durable_before_a_restart_ends_the_undo) {
  start();
  auto id = submit("demo.dispatch", R"({"queue":"d","undo_on_queue":true,"fail_at_end":true})");
  ASSERT_EQ(complete(poll_one("d").token(), "{}").code(), pb::Response::OK);
  auto u = poll_one("d");
  ASSERT_EQ(complete(u.token(), R"({"refunded":true})").code(), pb::Response::OK);
  restart();
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
  EXPECT_EQ(poll("d", "w1", 1, 300).task().tasks_size(), 0);
}

}  // namespace
}  // namespace proctor::testing
