// Per-queue limits (docs/workers.md, "Limits"): `limits set queue:NAME` bounds the tasks of a
// queue leased at once and how fast they are handed out; journaled, so a restart keeps them.
#include "tests/engine/task_engine.hpp"

namespace proctor::testing {
namespace {

class task_limits_test : public task_engine {
protected:
  pb::Response limits(const std::string& name, uint32_t max_leased, uint32_t rate,
                      uint64_t per_ms = 0) {
    pb::Request req;
    auto* l = req.mutable_limits();
    l->set_type(name);
    l->set_max_running(max_leased);
    l->set_rate(rate);
    if (per_ms != 0)
      l->set_per_ms(per_ms);
    return call(req);
  }

  pb::QueueInfo queue(const std::string& name) {
    auto all = queues();  // (held: the loop reads into it)
    for (const auto& q : all.task().queues())
      if (q.name() == name)
        return q;
    ADD_FAILURE() << "no queue " << name;
    return {};
  }
};

TEST_F(task_limits_test, a_bound_on_leases_holds_tasks_back_until_a_lease_ends) {
  start();
  auto set = limits("queue:one.at.a.time", 1, 0);
  ASSERT_EQ(set.code(), pb::Response::OK) << set.error();
  for (int i = 0; i < 3; ++i)
    submit("demo.dispatch", R"({"queue":"one.at.a.time"})");
  ASSERT_TRUE(eventually([&] { return queue("one.at.a.time").depth() == 3; }));
  auto first = poll("one.at.a.time", "w1", 3);
  ASSERT_EQ(first.task().tasks_size(), 1);
  EXPECT_EQ(poll("one.at.a.time", "w2", 3, 200).task().tasks_size(), 0);
  auto q = queue("one.at.a.time");
  EXPECT_EQ(q.max_leased(), 1U);
  EXPECT_EQ(q.leased(), 1U);
  EXPECT_EQ(q.depth(), 2U);
  EXPECT_GE(q.throttled(), 1U);
  // A waiting poll is served as soon as the lease ends.
  std::atomic<int> got{0};
  std::thread waiter([&] { got = poll("one.at.a.time", "w3", 3, 10'000).task().tasks_size(); });
  ASSERT_TRUE(eventually([&] { return queue("one.at.a.time").pollers() == 1; }));
  ASSERT_EQ(complete(first.task().tasks(0).token(), "{}").code(), pb::Response::OK);
  waiter.join();
  EXPECT_EQ(got, 1);
  // `limits` lists the queue beside the types.
  pb::Request list;
  list.mutable_limits();
  auto all = call(list);
  bool listed = false;
  for (const auto& l : all.limits())
    if (l.type() == "queue:one.at.a.time") {
      listed = true;
      EXPECT_EQ(l.max_running(), 1U);
      EXPECT_EQ(l.running(), 1U);
    }
  EXPECT_TRUE(listed);
}

TEST_F(task_limits_test, a_rate_hands_out_at_most_its_tokens_and_a_restart_keeps_it) {
  start();
  ASSERT_EQ(limits("queue:slow", 0, 2, 3'600'000).code(), pb::Response::OK);
  for (int i = 0; i < 4; ++i)
    submit("demo.dispatch", R"({"queue":"slow"})");
  ASSERT_TRUE(eventually([&] { return queue("slow").depth() == 4; }));
  EXPECT_EQ(poll("slow", "w1", 4).task().tasks_size(), 2);  // a full bucket: 2 tokens
  EXPECT_EQ(poll("slow", "w1", 4, 200).task().tasks_size(), 0);
  restart();
  auto q = queue("slow");
  EXPECT_EQ(q.rate(), 2U);
  EXPECT_EQ(q.per_ms(), 3'600'000U);
  // Lifted: the rest goes out at once.
  pb::Request clear;
  clear.mutable_limits()->set_type("queue:slow");
  clear.mutable_limits()->set_clear(true);
  ASSERT_EQ(call(clear).code(), pb::Response::OK);
  EXPECT_EQ(poll("slow", "w1", 4).task().tasks_size(), 2);
}

TEST_F(task_limits_test, a_queue_name_no_worker_could_poll_is_refused) {
  start();
  auto r = limits("queue:bad name", 1, 0);
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(r.error().find("character ' '"), std::string::npos) << r.error();
}

}  // namespace
}  // namespace proctor::testing
