// The metrics endpoint's server: a stop right after a start returns (httplib's stop() did
// nothing before its listening loop began, and the loop then ran for ever), and a second
// server cannot bind the port of the first (httplib's default sets SO_REUSEPORT, with which
// it could, and would take part of the connections).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>

#include <gtest/gtest.h>

#include "actors/http/metrics_http.hpp"

namespace proctor {
namespace {

uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0
      || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return 0;
  ::close(fd);
  return ntohs(a.sin_port);
}

/// Runs `f` with a bound: a hang fails the test and ends the process (a thread stuck in
/// httplib cannot be joined).
template <class F>
void within_10s(const char* what, F f) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(std::chrono::seconds{10}) != std::future_status::ready) {
    std::fprintf(stderr, "metrics_http_test: %s did not return within 10 s\n", what);
    std::_Exit(1);
  }
}

class metrics_http_test : public ::testing::Test {
protected:
  caf::actor_system_config cfg_;
  caf::actor_system sys_{cfg_};
};

TEST_F(metrics_http_test, a_stop_right_after_a_start_returns) {
  for (int i = 0; i < 20; ++i) {
    auto port = free_port();
    ASSERT_NE(port, 0);
    metrics_http m(sys_, caf::actor{});
    std::string err;
    ASSERT_TRUE(m.start("127.0.0.1", port, &err)) << err;
    within_10s("stop() right after start()", [&m] { m.stop(); });
  }
}

TEST_F(metrics_http_test, a_second_server_cannot_bind_the_same_port) {
  auto port = free_port();
  ASSERT_NE(port, 0);
  metrics_http first(sys_, caf::actor{});
  std::string err;
  ASSERT_TRUE(first.start("127.0.0.1", port, &err)) << err;
  metrics_http second(sys_, caf::actor{});
  EXPECT_FALSE(second.start("127.0.0.1", port, &err));
  EXPECT_NE(err.find("bind failed"), std::string::npos) << err;
  within_10s("stop()", [&] {
    second.stop();
    first.stop();
  });
}

}  // namespace
}  // namespace proctor
