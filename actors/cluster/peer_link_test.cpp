// A peer link against a fake peer on 127.0.0.1 that answers heartbeats properly and some
// requests with an unreadable frame or an untagged answer: only those requests fail (saying
// why), and the peer stays up (issue 32: one unreadable answer to a `tree` query made the
// link call its peer down, failing every request in flight and the next ones).
#include "actors/cluster/peer_link.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <proctor/wire.pb.h>

#include "actors/cluster/outbox.hpp"
#include "actors/wire/wire_frame.hpp"

namespace proctor {
namespace {

/// Node "b" on a loopback port: answers pings, and status requests by their id: 1 with an
/// unreadable frame, 2 without a tag, any other with OK and the id.
class fake_peer {
public:
  fake_peer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }

  ~fake_peer() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }

  uint16_t port() const { return port_; }
  int connections() const { return connections_; }

private:
  static void send_frame(int fd, const std::string& payload) {
    auto f = make_frame(payload);
    size_t off = 0;
    while (off < f.size()) {
      auto n = ::send(fd, f.data() + off, f.size() - off, MSG_NOSIGNAL);
      if (n <= 0)
        return;
      off += static_cast<size_t>(n);
    }
  }

  static void answer(int fd, const pb::Request& req) {
    pb::Response r;
    if (req.has_ping()) {
      r.mutable_pong()->set_name("b");
      r.mutable_pong()->set_number(2);
    } else if (req.status().id() == 1) {
      return send_frame(fd, std::string("\x0a\x05"
                                        "ab",
                                        4));  // a field longer than the frame
    } else if (req.status().id() == 2) {
      r.set_code(pb::Response::BAD_REQUEST);
      r.set_error("refused, untagged");
      return send_frame(fd, r.SerializeAsString());
    } else {
      r.set_id(req.status().id());
    }
    r.set_tag(req.tag());
    send_frame(fd, r.SerializeAsString());
  }

  void serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0)
        continue;
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0)
        continue;
      ++connections_;
      frame_reader reader;
      while (!stop_) {
        pollfd q{fd, POLLIN, 0};
        if (::poll(&q, 1, 50) <= 0)
          continue;
        char buf[4096];
        auto n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
          break;
        reader.append(std::string_view(buf, static_cast<size_t>(n)));
        std::string payload;
        while (reader.next(&payload) == frame_reader::status::frame) {
          pb::Request req;
          if (req.ParseFromString(payload))
            answer(fd, req);
        }
      }
      ::close(fd);
    }
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

struct status_log {
  std::mutex mtx;
  int downs_after_up = 0;
  bool was_up = false;
};

TEST(peer_link, an_unreadable_or_untagged_answer_fails_no_other_request_and_leaves_the_peer_up) {
  fake_peer peer;
  caf::actor_system_config cfg;
  cfg.load<caf::io::middleman>();
  caf::actor_system sys{cfg};
  auto log = std::make_shared<status_log>();
  auto parent = sys.spawn([log](caf::event_based_actor*) -> caf::behavior {
    return {[log](peer_status_atom, const peer_status& s) {
      std::lock_guard<std::mutex> g(log->mtx);
      if (s.up)
        log->was_up = true;
      else if (log->was_up)
        ++log->downs_after_up;
    }};
  });
  peer_link_config lc;
  lc.self_name = "a";
  lc.peer_name = "b";
  lc.addresses = {peer_endpoint{"127.0.0.1", peer.port()}};
  lc.heartbeat_interval = std::chrono::milliseconds{50};
  lc.heartbeat_timeout = std::chrono::milliseconds{3'000};
  lc.parent = parent;
  auto link = spawn_peer_link(sys, lc);

  caf::scoped_actor self{sys};
  auto status = [&] {
    peer_status s;
    self->request(link, std::chrono::seconds{5}, peer_status_atom::value)
      .receive([&](peer_status& x) { s = std::move(x); }, [](caf::error&) {});
    return s;
  };
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (!status().up && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  auto before = status();
  ASSERT_TRUE(before.up) << before.reason;

  // (ok, error text) of a status request for `id`.
  auto ask = [&](uint64_t id, uint32_t timeout_ms) {
    pb::Request req;
    req.mutable_status()->set_id(id);
    std::pair<bool, std::string> out;
    self
      ->request(link, std::chrono::seconds{10}, peer_request_atom::value, std::string("b"),
                req.SerializeAsString(), timeout_ms)
      .receive(
        [&](std::string& bytes) {
          pb::Response r;
          out.first = r.ParseFromString(bytes) && r.code() == pb::Response::OK && r.id() == id;
        },
        [&](caf::error& e) {
          const auto& ctx = e.context();
          out.second =
            ctx.match_elements<std::string>() ? ctx.get_as<std::string>(0) : sys.render(e);
        });
    return out;
  };
  auto unreadable = ask(1, 400);
  EXPECT_FALSE(unreadable.first);
  EXPECT_NE(unreadable.second.find("did not answer in time"), std::string::npos)
    << unreadable.second;
  EXPECT_NE(unreadable.second.find("unreadable"), std::string::npos) << unreadable.second;
  auto untagged = ask(2, 400);
  EXPECT_FALSE(untagged.first);
  EXPECT_NE(untagged.second.find("without a tag"), std::string::npos) << untagged.second;
  EXPECT_TRUE(ask(3, 5'000).first);

  auto after = status();
  EXPECT_TRUE(after.up) << after.reason;
  EXPECT_EQ(after.since_ms, before.since_ms);
  EXPECT_EQ(after.downs, 0u);
  EXPECT_EQ(after.stray_answers, 2u);
  EXPECT_EQ(peer.connections(), 1);
  {
    std::lock_guard<std::mutex> g(log->mtx);
    EXPECT_EQ(log->downs_after_up, 0);
  }
  caf::anon_send_exit(link, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(parent, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace proctor
