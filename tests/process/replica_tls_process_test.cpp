// A replica group with mutual TLS (docs/replication.md, "TLS on the Raft port"): the node's
// --tls-* options protect its Raft port too. Node b as three proctord processes with
// certificates from scripts/make-certs.sh: the group elects, replicates and fails over over
// TLS; a plaintext peer (raft_uv_tcp's handshake) is refused; a replica whose certificate the
// group's CA did not sign gets nothing, and the same replica with a good certificate catches
// up.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/replica_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using namespace proctor::test;
namespace fs = std::filesystem;

class replicas_tls : public replicas {
protected:
  void SetUp() override {
    replicas::SetUp();
    if (IsSkipped())
      return;
    if (run_program("/bin/sh", {"-c", "command -v openssl"}, 10s).exit_code != 0)
      GTEST_SKIP() << "openssl not found: the TLS tests need it (apt-get install openssl)";
    std::string why;
    ASSERT_TRUE(use_tls({"b/b1", "b/b2", "b/b3"}, &why)) << why;
  }

  /// Replica `i` presenting certificate `cert` and trusting CA `ca`.
  std::unique_ptr<node> make(size_t i, const std::string& cert, const std::string& ca = "ca") {
    auto args = replica_args(i);
    for (auto& x : tls_args(cert, ca))
      args.push_back(x);
    return std::make_unique<node>(dir_.path() / name(i), ports_[i], std::move(args));
  }

  /// A demo.ledger of `steps` steps submitted to b and waited for: its end state.
  std::string run_ledger(size_t steps) {
    return waited(submit("demo.ledger", R"({"steps":)" + std::to_string(steps)
                                          + R"(,"ledger_dir":")" + ledger().string() + "\"}"));
  }

  /// Replica `name`'s entry in the leader's `replicas --json`.
  std::string entry_of(const std::string& json, const std::string& n) {
    auto at = json.find("\"name\":\"" + n + "\"");
    if (at == std::string::npos)
      return {};
    auto end = json.find('}', at);
    return json.substr(at, end - at);
  }
};

/// Connects to 127.0.0.1:`port` and sends what raft_uv_tcp sends first (protocol 1, server
/// id, address): true when the other side then closes the connection within `limit`.
bool plaintext_peer_is_closed(uint16_t port, std::chrono::milliseconds limit) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  const char address[16] = "127.0.0.1:9";
  uint64_t preamble[3] = {1, 9, sizeof(address)};  // little-endian, as libraft's
  bool sent = ::send(fd, preamble, sizeof(preamble), MSG_NOSIGNAL) == sizeof(preamble)
              && ::send(fd, address, sizeof(address), MSG_NOSIGNAL) == sizeof(address);
  timeval tv{};
  tv.tv_sec = static_cast<long>(limit.count() / 1000);
  tv.tv_usec = static_cast<long>(limit.count() % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  bool closed = false;
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0)
      continue;  // a TLS alert
    closed = n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    break;
  }
  ::close(fd);
  return sent && closed;
}

TEST_F(replicas_tls, the_group_replicates_and_fails_over_over_tls_and_refuses_a_plaintext_peer) {
  for (size_t i = 0; i < 3; ++i) {
    b_[i] = make(i, name(i));
    ASSERT_TRUE(b_[i]->launch()) << b_[i]->log_tail();
  }
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  EXPECT_EQ(run_ledger(3), "SUCCESS") << logs();
  // Every replica reachable: the group's own connections pass the certificate checks.
  ASSERT_TRUE(eventually(
    [&] {
      auto r = ctl({"replicas", "--json"});
      return r.exit_code == 0 && r.out.find("\"reachable\":false") == std::string::npos;
    },
    30s))
    << ctl({"replicas"}).out << logs();

  // A peer speaking plain raft_uv_tcp is closed before libraft sees a byte of it.
  int f = (l + 1) % 3;
  EXPECT_TRUE(plaintext_peer_is_closed(raft_ports_[f], 15s));
  EXPECT_TRUE(eventually(
    [&] {
      auto log = read_file(b_[f]->log_file());
      return log.find("raft transport") != std::string::npos
             && log.find("TLS connection from 127.0.0.1") != std::string::npos;
    },
    15s))
    << b_[f]->log_tail();

  // The leader SIGKILLed: another is elected over TLS and carries on.
  b_[l]->kill();
  int l2 = leader(30s, l);
  ASSERT_GE(l2, 0) << logs();
  EXPECT_NE(l2, l);
  EXPECT_EQ(run_ledger(2), "SUCCESS") << logs();
  EXPECT_EQ(count_files(ledger()), 5u);
  // The old leader back: it catches up over TLS.
  ASSERT_TRUE(b_[l]->launch()) << b_[l]->log_tail();
  EXPECT_TRUE(eventually(
    [&] {
      auto r = ctl({"replicas", "--json"});
      auto e = entry_of(r.out, name(l));
      return r.exit_code == 0 && e.find("\"reachable\":true") != std::string::npos
             && e.find("\"lag\":0,") != std::string::npos;
    },
    30s))
    << ctl({"replicas"}).out << logs();
}

TEST_F(replicas_tls, a_replica_whose_certificate_the_ca_did_not_sign_gets_nothing) {
  b_[0] = make(0, "b1");
  b_[1] = make(1, "b2");
  b_[2] = make(2, "other-node", "other-ca");
  for (auto& n : b_)
    ASSERT_TRUE(n->launch()) << n->log_tail();
  int l = leader(30s, 2);
  ASSERT_GE(l, 0) << logs();
  EXPECT_EQ(run_ledger(2), "SUCCESS") << logs();
  // b3 is refused both ways, and says why.
  auto r = ctl({"replicas", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(entry_of(r.out, "b3").find("\"reachable\":true"), std::string::npos) << r.out;
  EXPECT_TRUE(eventually(
    [&] {
      auto log = read_file(b_[2]->log_file());
      return log.find("raft transport") != std::string::npos
             && log.find("certificate verify failed") != std::string::npos;
    },
    15s))
    << b_[2]->log_tail();
  EXPECT_TRUE(eventually(
    [&] {
      auto log = read_file(b_[l]->log_file());
      return log.find("raft transport") != std::string::npos
             && log.find("TLS connection") != std::string::npos;
    },
    15s))
    << b_[l]->log_tail();
  // b3 learned nothing: asked with a certificate it accepts, it knows no leader and has
  // applied nothing past the founding configuration.
  set_cli_tls(certs() / "other-client.pem", certs() / "other-client.key", certs() / "other-ca.pem");
  auto own = b_[2]->ctl({"replicas", "--json"}, 10s);
  set_cli_tls(certs() / "client.pem", certs() / "client.key", certs() / "ca.pem");
  ASSERT_EQ(own.exit_code, 0) << describe(own);
  auto mine = parse_json(own.out);
  auto group = parse_json(ctl({"replicas", "--json"}).out);
  ASSERT_TRUE(mine && group) << own.out;
  EXPECT_EQ(field(*mine, "leader").string_value(), "") << own.out;
  // Indexes are JSON numbers (below 2^53: docs/http-api.md, "JSON conventions").
  EXPECT_LT(field(*mine, "applied_index").number_value(),
            field(*group, "commit_index").number_value())
    << own.out;

  // With a certificate from the group's CA, the same replica catches up.
  b_[2]->kill();
  b_[2] = make(2, "b3");
  ASSERT_TRUE(b_[2]->launch()) << b_[2]->log_tail();
  EXPECT_TRUE(eventually(
    [&] {
      auto rr = ctl({"replicas", "--json"});
      auto e = entry_of(rr.out, "b3");
      return rr.exit_code == 0 && e.find("\"reachable\":true") != std::string::npos
             && e.find("\"lag\":0,") != std::string::npos;
    },
    30s))
    << ctl({"replicas"}).out << logs();
  EXPECT_EQ(run_ledger(1), "SUCCESS") << logs();
}

}  // namespace
