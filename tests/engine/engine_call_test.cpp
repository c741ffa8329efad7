// Procedures as message handlers: a step calls a service (of this node or another) and
// resumes with the reply, journaled before it is acted on; a restart re-sends the call.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actors/node/echo_service.hpp"
#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

/// Never answers (until the node goes away).
caf::behavior black_hole(caf::event_based_actor* self) {
  return {
    [self](service_call_atom, const std::string&, const std::string&) {
      return self->make_response_promise<std::string>();
    },
  };
}

class call_test : public engine {
protected:
  void with_echo(node_options& o) { o.services["demo.echo"] = spawn_echo_service(*sys_); }
};

TEST_F(call_test, a_step_calls_a_local_service_and_resumes_with_the_reply) {
  start([this](node_options& o) { with_echo(o); });
  auto id = submit("demo.call", R"({"service":"demo.echo","request":"hello"})");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.result_json(), R"({"echo":"hello"})");
}

TEST_F(call_test, a_call_to_an_unknown_service_fails_the_procedure) {
  start();
  auto id = submit("demo.call", R"({"service":"nobody","request":"x"})");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("no service 'nobody'"), std::string::npos) << s.error();
}

// A service address is parsed as HOST:PORT is everywhere: a port past 65535 or with
// trailing text fails the call (it was wrapped or cut, and another port was called).
TEST_F(call_test, a_call_to_a_malformed_address_fails_the_procedure) {
  start();
  for (const char* where : {"127.0.0.1:70000/demo.echo", "127.0.0.1:80x/demo.echo",
                            "127.0.0.1:/demo.echo", ":80/demo.echo", "127.0.0.1:80/"}) {
    auto id = submit("demo.call", std::string(R"({"service":")") + where + R"(","request":"x"})");
    auto s = wait(id);
    EXPECT_EQ(s.state(), pb::ROLLEDBACK) << where;
    EXPECT_NE(s.error().find("is not host:port/service"), std::string::npos)
      << where << ": " << s.error();
  }
}

TEST_F(call_test, an_unanswered_call_times_out) {
  start([this](node_options& o) { o.services["hole"] = sys_->spawn(black_hole); });
  auto id = submit("demo.call", R"({"service":"hole","request":"x","timeout_ms":50})");
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
}

// A call waits for its reply under a key of its own: no event can pass for that reply, and
// no step can wait under such a key.
TEST_F(call_test, keys_of_calls_are_reserved_for_their_replies) {
  start([this](node_options& o) { o.services["hole"] = sys_->spawn(black_hole); });
  auto id = submit("demo.call", R"({"service":"hole","request":"x"})");
  ASSERT_TRUE(eventually([&] { return status(id).waiting_for() == "reply from hole"; }));
  auto r = event("call:" + std::to_string(id) + ":1:1", "{}");
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(r.error().find("is reserved"), std::string::npos) << r.error();
  EXPECT_EQ(status(id).state(), pb::WAITING);
  auto w = submit("demo.wait_event", R"({"key":"call:1:1:1"})");
  auto s = wait(w);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("is reserved"), std::string::npos) << s.error();
}

TEST_F(call_test, a_call_pending_at_a_restart_is_sent_again) {
  start([this](node_options& o) { o.services["demo.echo"] = sys_->spawn(black_hole); });
  auto id = submit("demo.call", R"({"service":"demo.echo","request":"again"})");
  ASSERT_TRUE(eventually([&] { return status(id).waiting_for() == "reply from demo.echo"; }));
  restart([this](node_options& o) { with_echo(o); });
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.result_json(), R"({"echo":"again"})");
}

// The caller needs no middleman: calls to other nodes go over the client protocol.
TEST_F(call_test, a_step_calls_a_service_of_another_node) {
  // The other node: its own actor system and data directory, serving clients on a free port.
  caf::actor_system_config other_cfg;
  tune_actor_system(other_cfg);
  other_cfg.load<caf::io::middleman>();
  uint16_t port = 0;
  {
    caf::actor_system other_sys{other_cfg};
    node other{other_sys, types_};
    node_options oo;
    oo.data_dir = dir_ + "/other";
    oo.services["demo.echo"] = spawn_echo_service(other_sys);
    ASSERT_TRUE(other.start(oo));
    auto p = other.serve_clients("127.0.0.1", 0);
    ASSERT_TRUE(p) << other_sys.render(p.error());
    port = *p;
    start();
    auto id = submit("demo.call", R"({"service":"127.0.0.1:)" + std::to_string(port)
                                    + R"(/demo.echo","request":"far"})");
    auto s = wait(id);
    EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
    EXPECT_EQ(s.result_json(), R"({"echo":"far"})");
    stop();
    other.stop();
  }
}

// A node that cannot be reached is a transport failure: retried with back-off until the
// call's deadline, which then fails the procedure (and says why).
TEST_F(call_test, a_call_to_an_unreachable_node_is_retried_until_its_deadline) {
  start();
  // A port nobody listens on: bound, never listened on, kept until the test ends.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto id = submit("demo.call", R"({"service":"127.0.0.1:)" + std::to_string(ntohs(a.sin_port))
                                  + R"(/demo.echo","request":"x","timeout_ms":400})");
  auto s = wait(id);
  ::close(fd);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_FALSE(s.error().empty());
}

}  // namespace
}  // namespace proctor::testing
