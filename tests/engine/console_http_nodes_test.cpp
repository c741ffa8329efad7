// The HTTP API of one node of a cluster, about procedures another node holds: a status, a
// wait, an abort and a history go to the node that holds the procedure, as the CLI's
// requests do (actors/executor/executor_forward.cpp), and a node that does not answer is a
// 502. A worker's heartbeat and complete, sent to any node, reach the one holding the task.
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "actors/console/console_http.hpp"
#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class console_http_nodes_test : public nodes_fixture {
protected:
  void TearDown() override {
    if (console_)
      console_->stop();
    console_.reset();
    nodes_fixture::TearDown();
  }

  /// Serves the HTTP API of node `at`; a client of it.
  httplib::Client serve(const std::string& at) {
    console_http_options o;
    o.token = "tok";
    console_ = std::make_unique<console_http>(*sys_, nodes_.at(at)->executor(), o);
    std::string err;
    auto port = console_->start("127.0.0.1", 0, &err);
    EXPECT_NE(port, 0) << err;
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(40s);
    c.set_default_headers({{"Authorization", "Bearer tok"}});
    return c;
  }

  std::unique_ptr<console_http> console_;
};

// A worker polls node b (its own HTTP API here is b's executor through an RPC, as the CLI
// would: the test serves one HTTP API) and reports to node a's HTTP API with the token it got.
TEST_F(console_http_nodes_test, a_worker_reports_to_any_node_over_http) {
  auto c = serve("a");
  auto id = submit("b", R"({"queue":"ship","steps":1,"heartbeat_ms":10000})", "demo.dispatch");
  pb::Request poll;
  poll.mutable_task()->set_op(pb::TaskRequest::POLL);
  poll.mutable_task()->add_queues("ship");
  poll.mutable_task()->set_worker("w");
  poll.mutable_task()->set_max(1);
  poll.mutable_task()->set_wait_ms(5000);
  auto got = call("b", poll);
  ASSERT_EQ(got.task().tasks_size(), 1) << got.error();
  auto path = "/api/tasks/" + got.task().tasks(0).token();
  auto beat = c.Post((path + "/heartbeat").c_str(), R"({"details":{"n":1}})", "application/json");
  ASSERT_TRUE(beat);
  EXPECT_EQ(beat->status, 200) << beat->body;
  auto done =
    c.Post((path + "/complete").c_str(), R"({"result":{"shipped":true}})", "application/json");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200) << done->body;
  auto late = c.Post((path + "/fail").c_str(), R"({"error":"too late"})", "application/json");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 409) << late->body;
  auto s = wait("b", id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_NE(s.result_json().find(R"("shipped":true)"), std::string::npos) << s.result_json();
}

TEST_F(console_http_nodes_test, requests_about_another_nodes_procedure_are_forwarded) {
  auto c = serve("a");
  auto id = submit("b", R"({"key":"never-sent"})", "demo.wait_event");
  ASSERT_NE(id, 0u);
  ASSERT_EQ(id >> 40, node_number_of("b"));
  auto path = "/api/procs/" + std::to_string(id);
  ASSERT_TRUE(eventually([&] {
    auto r = c.Get(path.c_str());
    return r && r->status == 200 && json::parse(r->body)["state"] == "WAITING";
  }));
  auto polled = c.Get((path + "?wait=200ms").c_str());
  ASSERT_TRUE(polled);
  EXPECT_EQ(polled->status, 202) << polled->body;
  auto aborted = c.Post((path + "/abort").c_str(), "", "application/json");
  ASSERT_TRUE(aborted);
  EXPECT_EQ(aborted->status, 200) << aborted->body;
  auto ended = c.Get((path + "?wait=30s").c_str());
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->status, 200) << ended->body;
  EXPECT_EQ(json::parse(ended->body)["state"], "ROLLEDBACK");
  auto history = c.Get((path + "/history").c_str());
  ASSERT_TRUE(history);
  EXPECT_EQ(history->status, 200) << history->body;
  EXPECT_EQ(json::parse(history->body)["status"]["id"], id);

  // A node that does not answer: 502, saying which.
  auto other = submit("c", R"({"key":"never-sent-either"})", "demo.wait_event");
  cut("c");
  auto gone = c.Get(("/api/procs/" + std::to_string(other) + "?wait=1s").c_str());
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 502) << gone->body;
  EXPECT_EQ(json::parse(gone->body)["code"], "UNREACHABLE");
}

}  // namespace
}  // namespace proctor::testing
