// The node's client protocol broker against a real node: frames however they arrive, answers
// in request order, bad frames refused, and no answer ever reaching a connection that did not
// ask for it.
#include "actors/cluster/client_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include "actors/wire/wire_client.hpp"
#include "actors/wire/wire_frame.hpp"
#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

using namespace std::chrono_literals;

/// A raw client connection: whatever bytes a test wants to send, frames read back.
class raw_conn {
public:
  explicit raw_conn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~raw_conn() { close(); }

  bool ok() const { return ok_; }

  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

  void send(const std::string& bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  /// The next frame's Response; nullopt on EOF or after `limit`.
  std::optional<pb::Response> read(std::chrono::milliseconds limit = 10s) {
    auto until = std::chrono::steady_clock::now() + limit;
    std::string payload;
    while (reader_.next(&payload) != frame_reader::status::frame) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        return std::nullopt;
      char buf[4096];
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0)
        return std::nullopt;
      reader_.append(std::string_view{buf, static_cast<size_t>(n)});
    }
    pb::Response r;
    if (!r.ParseFromString(payload))
      return std::nullopt;
    return r;
  }

  /// True when the node closed the connection (EOF) within `limit`.
  bool closed_by_peer(std::chrono::milliseconds limit = 10s) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0)
      return false;
    char c;
    return ::recv(fd_, &c, 1, 0) == 0;
  }

private:
  int fd_ = -1;
  bool ok_ = false;
  frame_reader reader_{max_frame_bytes, true};
};

std::string status_frame(uint64_t id) {
  pb::Request r;
  r.mutable_status()->set_id(id);
  return make_frame(r.SerializeAsString());
}

std::string wait_frame(uint64_t id, uint64_t timeout_ms) {
  pb::Request r;
  r.mutable_wait()->set_id(id);
  r.mutable_wait()->set_timeout_ms(timeout_ms);
  return make_frame(r.SerializeAsString());
}

class client_server_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    middleman_ = true;
    start();
    auto p = node_->serve_clients("127.0.0.1", 0);
    ASSERT_TRUE(p) << sys_->render(p.error());
    port_ = *p;
    a_ = submit("demo.noop", R"({"steps":1})");
    b_ = submit("demo.noop", R"({"steps":1})");
  }

  uint16_t port_ = 0;
  uint64_t a_ = 0;
  uint64_t b_ = 0;
};

TEST_F(client_server_test, a_frame_split_across_writes_is_answered) {
  raw_conn c{port_};
  ASSERT_TRUE(c.ok());
  auto f = status_frame(a_);
  for (auto piece : {f.substr(0, 1), f.substr(1, 2), f.substr(3, 3), f.substr(6)})
    c.send(piece);
  auto r = c.read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code(), pb::Response::OK) << r->error();
  EXPECT_EQ(r->status().id(), a_);
}

TEST_F(client_server_test, frames_in_one_write_are_answered_in_order) {
  raw_conn c{port_};
  ASSERT_TRUE(c.ok());
  // A slow request first: its answer must still come before the quick one's.
  auto w = submit("demo.wait_event", R"({"key":"never"})");
  c.send(wait_frame(w, 200) + status_frame(a_) + status_frame(b_));
  auto first = c.read();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->code(), pb::Response::TIMEOUT);
  EXPECT_EQ(first->status().id(), w);
  for (auto id : {a_, b_}) {
    auto r = c.read();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status().id(), id);
  }
}

TEST_F(client_server_test, an_oversize_frame_is_refused_and_the_connection_closed) {
  raw_conn c{port_};
  ASSERT_TRUE(c.ok());
  char h[4];
  put_frame_header(h,
                   static_cast<uint32_t>(client_frame_limit(executor_config{}.max_args_bytes) + 1));
  c.send(std::string(h, 4));
  auto r = c.read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(r->error().find("exceeds the limit"), std::string::npos) << r->error();
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(client_server_test, a_zero_length_frame_is_refused_and_the_connection_closed) {
  raw_conn c{port_};
  ASSERT_TRUE(c.ok());
  c.send(std::string(4, '\0') + status_frame(a_));
  auto r = c.read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(r->error().find("empty frame"), std::string::npos) << r->error();
  EXPECT_TRUE(c.closed_by_peer());
}

TEST_F(client_server_test, garbage_is_a_bad_request_and_the_connection_stays_usable) {
  raw_conn c{port_};
  ASSERT_TRUE(c.ok());
  c.send(make_frame("\xff\xff\xff garbage, not a protobuf") + status_frame(a_));
  auto r = c.read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code(), pb::Response::BAD_REQUEST);
  auto s = c.read();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status().id(), a_);
}

// Past the tagged requests a connection may have in flight (a peer's link), one more is
// refused alone, with its tag: the connection, and the requests on it, carry on (closing it
// took a peer's link down with every request on it).
TEST_F(client_server_test, a_tagged_request_past_the_limit_is_refused_alone_with_its_tag) {
  raw_conn c{port_};
  ASSERT_TRUE(c.ok());
  auto w = submit("demo.wait_event", R"({"key":"never"})");
  constexpr uint64_t in_flight = 1024;
  std::string frames;
  for (uint64_t tag = 1; tag <= in_flight; ++tag) {
    pb::Request r;
    r.set_tag(tag);
    r.mutable_wait()->set_id(w);
    r.mutable_wait()->set_timeout_ms(1'500);
    frames += make_frame(r.SerializeAsString());
  }
  pb::Request more;
  more.set_tag(in_flight + 1);
  more.mutable_status()->set_id(a_);
  c.send(frames + make_frame(more.SerializeAsString()));
  auto refused = c.read();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->tag(), in_flight + 1);
  EXPECT_EQ(refused->code(), pb::Response::REFUSED);
  EXPECT_NE(refused->error().find("tagged requests at once"), std::string::npos)
    << refused->error();
  std::set<uint64_t> answered;
  for (uint64_t i = 0; i < in_flight; ++i) {
    auto r = c.read();
    ASSERT_TRUE(r) << "after " << i << " answers";
    EXPECT_EQ(r->code(), pb::Response::TIMEOUT);
    answered.insert(r->tag());
  }
  EXPECT_EQ(answered.size(), in_flight);
  more.set_tag(in_flight + 2);
  c.send(make_frame(more.SerializeAsString()));
  auto again = c.read();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->tag(), in_flight + 2);
  EXPECT_EQ(again->status().id(), a_);
}

// A client that leaves while its request is served: the late answer must not reach the next
// connection, which on Linux nearly always gets the same fd (the broker's handle). Conn 2
// asks for a wait that ends after conn 1's: had conn 1's answer been misdirected, conn 2's
// first frame would name the other procedure.
TEST_F(client_server_test, a_client_closing_mid_request_loses_nothing_for_the_next) {
  auto w1 = submit("demo.wait_event", R"({"key":"k1"})");
  auto w2 = submit("demo.wait_event", R"({"key":"k2"})");
  for (int round = 0; round < 3; ++round) {
    {
      raw_conn c1{port_};
      ASSERT_TRUE(c1.ok());
      c1.send(wait_frame(w1, 100));
    }
    raw_conn c2{port_};
    ASSERT_TRUE(c2.ok());
    c2.send(wait_frame(w2, 400));
    auto r = c2.read();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->code(), pb::Response::TIMEOUT);
    EXPECT_EQ(r->status().id(), w2);
    c2.send(status_frame(a_));
    auto s = c2.read();
    ASSERT_TRUE(s);
    EXPECT_EQ(s->status().id(), a_);
  }
}

TEST_F(client_server_test, the_blocking_client_gets_answers_and_reports_a_refused_connection) {
  pb::Request req;
  req.mutable_status()->set_id(b_);
  auto r = wire_call("127.0.0.1", port_, req.SerializeAsString());
  ASSERT_TRUE(r.ok()) << r.reason;
  pb::Response resp;
  ASSERT_TRUE(resp.ParseFromString(r.reply));
  EXPECT_EQ(resp.status().id(), b_);

  // Bound, not listening: a refused connection.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto refused = wire_call("127.0.0.1", ntohs(a.sin_port), req.SerializeAsString());
  ::close(fd);
  EXPECT_EQ(refused.what, wire_result::kind::unreachable);
  EXPECT_EQ(refused.reason, "connection refused");

  // A wait that outlives the reply timeout: no answer, said so.
  auto w = submit("demo.wait_event", R"({"key":"late"})");
  pb::Request wr;
  wr.mutable_wait()->set_id(w);
  wr.mutable_wait()->set_timeout_ms(5'000);
  wire_call_options o;
  o.reply_timeout = 100ms;
  auto late = wire_call("127.0.0.1", port_, wr.SerializeAsString(), o);
  EXPECT_EQ(late.what, wire_result::kind::no_answer);
  EXPECT_EQ(late.reason, "the node did not answer within 100 ms");
}

}  // namespace
}  // namespace proctor::testing
