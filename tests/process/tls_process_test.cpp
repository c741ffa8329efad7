// Mutual TLS (docs/tls.md) between real proctord processes and the proctor CLI, with
// certificates made by scripts/make-certs.sh: a CLI with a certificate from the CA is
// served; one without TLS, one with a certificate from another CA and garbage bytes on the
// port are refused, the node logs it and keeps serving; two TLS nodes link up and a tree
// spans them; a node whose certificate the others' CA did not sign stays down for them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::clear_cli_tls;
using proctor::test::eventually;
using proctor::test::make_certs;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::read_file;
using proctor::test::run_proctor;
using proctor::test::run_program;
using proctor::test::run_result;
using proctor::test::set_cli_tls;
using proctor::test::state_of;
using proctor::test::temp_dir;
namespace fs = std::filesystem;

class tls : public ::testing::Test {
protected:
  void SetUp() override {
    if (run_program("/bin/sh", {"-c", "command -v openssl"}, 10s).exit_code != 0)
      GTEST_SKIP() << "openssl not found: the TLS tests need it (apt-get install openssl)";
    auto r = make_certs(certs(), {"a", "b"});
    ASSERT_EQ(r.exit_code, 0) << proctor::test::describe(r);
    use_cli_cert("client", "ca");
    fs::create_directories(ledger());
  }

  void TearDown() override { clear_cli_tls(); }

  fs::path certs() const { return dir_.path() / "certs"; }
  fs::path ledger() const { return dir_.path() / "ledger"; }
  fs::path pem(const std::string& name) const { return certs() / (name + ".pem"); }
  fs::path key(const std::string& name) const { return certs() / (name + ".key"); }

  void use_cli_cert(const std::string& cert, const std::string& ca) {
    set_cli_tls(pem(cert), key(cert), pem(ca));
  }

  std::vector<std::string> tls_args(const std::string& cert, const std::string& ca = "ca") {
    return {"--tls-cert",       pem(cert).string(), "--tls-key",
            key(cert).string(), "--tls-ca",         pem(ca).string()};
  }

  std::unique_ptr<node> make(const std::string& name, uint16_t port,
                             std::vector<std::string> extra) {
    auto args = tls_args(name);
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<node>(dir_.path() / name, port, std::move(args));
  }

  std::string ledger_args(const std::string& extra) const {
    return R"({"ledger_dir":")" + ledger().string() + R"(")" + extra + "}";
  }

  temp_dir dir_;
};

/// Connects to 127.0.0.1:port, sends `bytes`, and reads until the node closes the
/// connection; false if it did not close it within `limit`.
bool closed_after_sending(uint16_t port, const std::string& bytes,
                          std::chrono::milliseconds limit) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool closed = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0
      && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL)
           == static_cast<ssize_t>(bytes.size())) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    char buf[4096];
    while (!closed && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      auto n = ::recv(fd, buf, sizeof buf, 0);
      closed = n == 0 || (n < 0 && errno == ECONNRESET);
    }
  }
  ::close(fd);
  return closed;
}

TEST_F(tls, a_node_serves_a_cli_with_a_valid_certificate_and_refuses_every_other) {
  auto a = make("a", 0, {});
  ASSERT_TRUE(a->start()) << a->log_tail();
  auto submitted = a->ctl({"submit", "demo.ledger", "--args-json", ledger_args(R"(,"steps":2)")});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  auto id = parse_id(submitted.out);
  ASSERT_TRUE(id) << submitted.out;
  auto waited = a->ctl({"wait", std::to_string(*id), "--timeout-s", "60"}, 90s);
  EXPECT_EQ(waited.exit_code, 0) << waited.out << waited.err;

  // No TLS at all.
  clear_cli_tls();
  auto plain = a->ctl({"status", std::to_string(*id), "--json"}, 30s);
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_NE(plain.err.find("TLS"), std::string::npos) << plain.err;

  // A certificate from another CA: the node refuses it (the CLI trusts the node's CA).
  use_cli_cert("other-client", "ca");
  auto stranger = a->ctl({"status", std::to_string(*id), "--json"}, 30s);
  EXPECT_EQ(stranger.exit_code, 3);
  EXPECT_NE(stranger.err.find("TLS handshake with " + a->address() + " failed"), std::string::npos)
    << stranger.err;

  // Trusting another CA: the CLI refuses the node's certificate.
  use_cli_cert("other-client", "other-ca");
  auto distrust = a->ctl({"status", std::to_string(*id), "--json"}, 30s);
  EXPECT_EQ(distrust.exit_code, 3);
  EXPECT_NE(distrust.err.find("certificate verify failed"), std::string::npos) << distrust.err;
  // ... and names it: its subject and issuer.
  EXPECT_NE(distrust.err.find("issued by CN=Proctor throw-away CA"), std::string::npos)
    << distrust.err;

  // Garbage bytes, then a frame of the plain protocol.
  EXPECT_TRUE(closed_after_sending(a->port(), std::string(64, '\x17') + "garbage\r\n\r\n", 10s));
  EXPECT_TRUE(closed_after_sending(a->port(), std::string{"\0\0\0\2\x08\x01", 6}, 10s));

  // The node is alive, logged the refusals, and serves a valid client.
  EXPECT_TRUE(a->running());
  use_cli_cert("client", "ca");
  auto after = a->ctl({"status", std::to_string(*id), "--json"}, 30s);
  ASSERT_EQ(after.exit_code, 0) << after.err;
  auto v = parse_json(after.out);
  ASSERT_TRUE(v) << after.out;
  EXPECT_EQ(state_of(*v), "SUCCESS");
  auto log = read_file(a->log_file());
  EXPECT_NE(log.find("TLS with the connection from 127.0.0.1"), std::string::npos) << a->log_tail();
  EXPECT_NE(log.find("certificate"), std::string::npos) << a->log_tail();
  // The refused certificate is named in the log: its subject and its issuer.
  EXPECT_NE(log.find("other-client"), std::string::npos) << a->log_tail();
  EXPECT_NE(log.find("issued by CN=Another throw-away CA"), std::string::npos) << a->log_tail();
}

TEST_F(tls, the_cli_and_the_node_name_a_bad_option_in_one_line) {
  clear_cli_tls();
  auto r =
    run_proctor({"--node", "127.0.0.1:1", "--tls-cert", pem("client").string(), "status", "1"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("--tls-key is missing"), std::string::npos) << r.err;
  auto missing = (certs() / "nope.pem").string();
  r = run_proctor({"--node", "127.0.0.1:1", "--tls-cert", missing, "--tls-key",
                   key("client").string(), "--tls-ca", pem("ca").string(), "status", "1"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("cannot read --tls-cert " + missing), std::string::npos) << r.err;
  r = run_proctor({"--node", "127.0.0.1:1", "--tls-cert", pem("client").string(), "--tls-key",
                   key("a").string(), "--tls-ca", pem("ca").string(), "status", "1"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_NE(r.err.find("is not the key of --tls-cert"), std::string::npos) << r.err;
  auto d = run_program(proctor::test::bin_path("proctord"),
                       {"--data-dir", (dir_.path() / "d").string(), "--listen", "127.0.0.1:0",
                        "--tls-cert", pem("a").string(), "--tls-ca", pem("ca").string()},
                       30s);
  EXPECT_EQ(d.exit_code, 64);
  EXPECT_NE(d.err.find("--tls-key is missing"), std::string::npos) << d.err;
}

TEST_F(tls, two_tls_nodes_link_up_and_a_tree_spans_them) {
  auto pa = proctor::test::free_port(), pb = proctor::test::free_port();
  auto a = make("a", pa, {"--name", "a", "--peers", "b=127.0.0.1:" + std::to_string(pb)});
  auto b = make("b", pb, {"--name", "b", "--peers", "a=127.0.0.1:" + std::to_string(pa)});
  ASSERT_TRUE(a->start()) << a->log_tail();
  ASSERT_TRUE(b->start()) << b->log_tail();
  auto sees_up = [&](node& n, const std::string& peer) {
    return eventually(
      [&] {
        auto r = n.ctl({"nodes", "--json"}, 10s);
        auto v = parse_json(r.out);
        if (r.exit_code != 0 || !v)
          return false;
        for (const auto& x : v->list_value().values()) {
          const auto& f = x.struct_value().fields();
          if (f.at("name").string_value() == peer)
            return f.at("up").bool_value();
        }
        return false;
      },
      30s, 200ms);
  };
  ASSERT_TRUE(sees_up(*a, "b")) << a->log_tail();
  ASSERT_TRUE(sees_up(*b, "a")) << b->log_tail();
  auto r = a->ctl({"submit", "demo.ledger", "--args-json",
                   ledger_args(R"(,"steps":3,"children":4,"depth":1,"spread":true)")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto id = parse_id(r.out);
  ASSERT_TRUE(id) << r.out;
  auto w = a->ctl({"wait", std::to_string(*id), "--timeout-s", "90"}, 120s);
  EXPECT_EQ(w.exit_code, 0) << w.out << w.err << a->log_tail() << b->log_tail();
  EXPECT_EQ(proctor::test::count_files(ledger()), 3u + 4 * 3);
  // A failing tree is undone on both nodes; undo.log says where: "<node> <id> <parent> <step>".
  r = a->ctl({"submit", "demo.ledger", "--args-json",
              ledger_args(R"(,"steps":3,"children":4,"depth":1,"spread":true,"fail_at":2,)"
                          R"("undo_log":true)")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  id = parse_id(r.out);
  ASSERT_TRUE(id) << r.out;
  w = a->ctl({"wait", std::to_string(*id), "--timeout-s", "90"}, 120s);
  EXPECT_EQ(w.exit_code, 1) << w.out << w.err << a->log_tail() << b->log_tail();
  std::ifstream in(ledger() / "undo.log");
  std::set<std::string> where;
  std::string node_name;
  uint64_t pid = 0, parent = 0;
  int step = 0;
  while (in >> node_name >> pid >> parent >> step)
    where.insert(node_name);
  EXPECT_EQ(where, (std::set<std::string>{"a", "b"})) << "the tree did not span both nodes";
}

TEST_F(tls, a_node_with_a_certificate_from_another_ca_is_never_up) {
  auto pa = proctor::test::free_port(), pb = proctor::test::free_port();
  auto a = make("a", pa, {"--name", "a", "--peers", "b=127.0.0.1:" + std::to_string(pb)});
  ASSERT_TRUE(a->start()) << a->log_tail();
  // b presents a certificate from the other CA (it trusts a's CA, and a CLI trusting b's).
  auto args = tls_args("other-node");
  args.insert(args.end(), {"--name", "b", "--peers", "a=127.0.0.1:" + std::to_string(pa)});
  node b{dir_.path() / "b", pb, args};
  use_cli_cert("client", "other-ca");
  ASSERT_TRUE(b.start()) << b.log_tail();
  use_cli_cert("client", "ca");
  EXPECT_TRUE(
    eventually([&] { return read_file(a->log_file()).find("TLS with") != std::string::npos; }, 20s))
    << a->log_tail();
  // a sees b down, and why.
  std::string seen;
  EXPECT_TRUE(eventually(
    [&] {
      auto r = a->ctl({"nodes", "--json"}, 10s);
      seen = r.out + r.err;
      auto v = parse_json(r.out);
      if (!v)
        return false;
      for (const auto& x : v->list_value().values()) {
        const auto& f = x.struct_value().fields();
        if (f.at("name").string_value() == "b")
          return !f.at("up").bool_value()
                 && f.at("reason").string_value().find("TLS") != std::string::npos;
      }
      return false;
    },
    20s, 200ms))
    << seen;
  EXPECT_TRUE(a->running());
}

}  // namespace

namespace {

// A standby pings its active over the node's TLS: a ping refused for want of a certificate
// would look like a hung active and have a healthy one killed (--fence-after-ms).
TEST_F(tls, a_tls_standby_leaves_a_healthy_active_alone_and_takes_over_when_it_dies) {
  std::vector<std::string> standby{"--standby", "--fence-after-ms", "1000"};
  auto b0 = make("b", 0, standby);
  auto b1 = make("b", 0, standby);  // same data directory (dir/b), its own port
  ASSERT_TRUE(b0->start()) << b0->log_tail();
  ASSERT_TRUE(b1->launch());
  ASSERT_TRUE(eventually(
    [&] { return b1->log_tail(50).find("waiting for its lock") != std::string::npos; }, 30s));
  // Five fence periods: a standby that could not ping would have killed b0 by now.
  std::this_thread::sleep_for(5s);
  EXPECT_TRUE(b0->running()) << b1->log_tail();
  EXPECT_EQ(b1->log_tail(100).find("killing it"), std::string::npos) << b1->log_tail();
  b0->kill();
  ASSERT_TRUE(b1->wait_ready(60s)) << b1->log_tail();
  auto r = b1->ctl({"submit", "demo.ledger", "--args-json", ledger_args(R"(,"steps":1)")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace

namespace {

// Nothing waits without a bound: a connection that never starts its TLS handshake (or, on a
// plain node, never sends a request) is closed, and the node goes on serving.
TEST_F(tls, a_connection_that_never_starts_its_handshake_is_closed) {
  auto a = make("a", 0, {});
  ASSERT_TRUE(a->start()) << a->log_tail();
  EXPECT_TRUE(closed_after_sending(a->port(), "", 30s)) << a->log_tail();
  EXPECT_NE(a->log_tail(50).find("no request within"), std::string::npos) << a->log_tail();
  EXPECT_EQ(a->ctl({"list", "--json"}, 30s).exit_code, 0);
}

}  // namespace
