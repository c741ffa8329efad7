// A worker's reports go to any node (docs/workers.md, "Any node takes a report"): the token names
// the procedure, and so the node that holds the task; a heartbeat, complete or fail sent to
// another node is passed on to it and its answer comes back unchanged. A node that cannot reach
// the task's node says so, and nothing changes.
#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

using nodes_tasks_test = nodes_fixture;

pb::Request poll_request(const std::string& queue) {
  pb::Request r;
  auto* t = r.mutable_task();
  t->set_op(pb::TaskRequest::POLL);
  t->add_queues(queue);
  t->set_worker("w1");
  t->set_max(1);
  t->set_wait_ms(5000);
  return r;
}

pb::Request report_request(pb::TaskRequest::Op op, const std::string& token,
                           const std::string& json) {
  pb::Request r;
  auto* t = r.mutable_task();
  t->set_op(op);
  t->set_token(token);
  t->set_json(json);
  return r;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A task of a procedure on b, polled from b: its heartbeat goes through a, its complete through
// c, the same complete again through a answers as the first did, and an earlier attempt's token
// through c is refused there as on b.
TEST_F(nodes_tasks_test, a_report_sent_to_another_node_reaches_the_node_that_holds_the_task) {
  auto id = submit("b", R"({"queue":"pay","steps":1,"heartbeat_ms":10000})", "demo.dispatch");
  auto p = call("b", poll_request("pay"));
  ASSERT_EQ(p.code(), pb::Response::OK) << p.error();
  ASSERT_EQ(p.task().tasks_size(), 1);
  auto token = p.task().tasks(0).token();
  // Polled from a node that does not hold it: not there (a poll is served by its own node).
  auto elsewhere = call("a", poll_request("pay"));
  ASSERT_EQ(elsewhere.code(), pb::Response::OK) << elsewhere.error();
  EXPECT_EQ(elsewhere.task().tasks_size(), 0);

  auto beat = call("a", report_request(pb::TaskRequest::HEARTBEAT, token, R"({"at":1})"));
  ASSERT_EQ(beat.code(), pb::Response::OK) << beat.error();
  EXPECT_FALSE(beat.task().cancel_requested());
  auto done = call("c", report_request(pb::TaskRequest::COMPLETE, token, R"({"charged":7})"));
  ASSERT_EQ(done.code(), pb::Response::OK) << done.error();
  auto s = wait("a", id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_TRUE(has(s.result_json(), R"("charged":7)")) << s.result_json();

  auto again = call("a", report_request(pb::TaskRequest::COMPLETE, token, R"({"charged":7})"));
  EXPECT_EQ(again.code(), pb::Response::OK) << again.error();
  EXPECT_TRUE(has(again.text(), "already")) << again.text();
  auto other = call("a", report_request(pb::TaskRequest::COMPLETE, token, R"({"charged":8})"));
  EXPECT_EQ(other.code(), pb::Response::REFUSED);
  EXPECT_TRUE(has(other.error(), "has ended")) << other.error();
  auto stale = token.substr(0, token.rfind('.')) + ".7";
  auto r = call("c", report_request(pb::TaskRequest::FAIL, stale, {}));
  EXPECT_EQ(r.code(), pb::Response::REFUSED);
}

// With b cut off, a complete sent to a cannot reach the task: a says b is unreachable, and the
// task is still b's, leased to its worker; the same complete once b is back ends it.
TEST_F(nodes_tasks_test, a_report_for_an_unreachable_node_is_refused_and_changes_nothing) {
  auto id = submit("b", R"({"queue":"pay","steps":1,"start_to_close_ms":60000})", "demo.dispatch");
  auto p = call("b", poll_request("pay"));
  ASSERT_EQ(p.task().tasks_size(), 1) << p.error();
  auto token = p.task().tasks(0).token();
  cut("b");
  auto r = call("a", report_request(pb::TaskRequest::COMPLETE, token, R"({"ok":1})"));
  EXPECT_EQ(r.code(), pb::Response::UNREACHABLE) << r.error();
  EXPECT_TRUE(has(r.error(), "node b")) << r.error();
  uncut("b");
  pb::Request q;
  q.mutable_task()->set_op(pb::TaskRequest::QUEUES);
  auto queues = call("b", q);
  ASSERT_EQ(queues.task().queues_size(), 1);
  EXPECT_EQ(queues.task().queues(0).leased(), 1U);
  EXPECT_EQ(queues.task().queues(0).completed(), 0U);
  ASSERT_TRUE(eventually(
    [&] {
      return call("a", report_request(pb::TaskRequest::COMPLETE, token, R"({"ok":1})")).code()
             == pb::Response::OK;
    },
    std::chrono::seconds{20}));
  EXPECT_EQ(wait("b", id).state(), pb::SUCCESS);
}

// A token that names no procedure of the cluster (a malformed one, or a number no node hands
// out) is answered by the node it was sent to, saying why.
TEST_F(nodes_tasks_test, a_token_that_names_no_node_is_refused_where_it_was_sent) {
  auto bad = call("a", report_request(pb::TaskRequest::COMPLETE, "nonsense", "{}"));
  EXPECT_EQ(bad.code(), pb::Response::BAD_REQUEST);
  EXPECT_TRUE(has(bad.error(), "malformed task token")) << bad.error();
  uint64_t foreign = (uint64_t{4000} << id_node_shift) + 1;
  auto none =
    call("a", report_request(pb::TaskRequest::COMPLETE, std::to_string(foreign) + ":1:1.1", "{}"));
  EXPECT_EQ(none.code(), pb::Response::NOT_FOUND);
  EXPECT_TRUE(has(none.error(), "not among this node's peers")) << none.error();
}

}  // namespace
}  // namespace proctor::testing
