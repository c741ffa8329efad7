// The Raft store over mutual TLS (replication/raft_tls_transport.hpp): three replicas in this
// process on 127.0.0.1 (tests/support/raft_test_group.hpp), each with its own certificate from
// scripts/make-certs.sh. The group replicates and fails over; a replica whose certificate the
// CA did not sign, one whose certificate names another node or a client, or one without TLS,
// gets nothing while the majority goes on, and catches up once it has a good certificate; a
// connection that never starts its handshake is closed.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "tests/support/raft_test_group.hpp"
#include "tls/tls_options.hpp"

namespace proctor {
namespace {

using namespace raft_test;

/// Certificates for replicas r1 r2 r3 of node g, for node h (and the other CA's) under
/// `dir`; false without openssl.
bool make_certs(const std::string& dir) {
  std::string cmd = "bash " + std::string(PROCTOR_SOURCE_DIR) + "/scripts/make-certs.sh " + dir
                    + " g/r1 g/r2 g/r3 h >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::shared_ptr<ssl_ctx_st> context(const std::string& dir, const std::string& cert,
                                    const std::string& ca = "ca") {
  tls_options o{dir + "/" + cert + ".pem", dir + "/" + cert + ".key", dir + "/" + ca + ".pem"};
  std::string why;
  auto* ctx = make_tls_context(o, &why);
  EXPECT_NE(ctx, nullptr) << why;
  return {ctx, SSL_CTX_free};
}

struct tls_group : group {
  std::string certs;
  bool usable = false;

  tls_group() {
    if (root.path.empty())
      return;
    certs = root.path + "/certs";
    usable = make_certs(certs);
    // Replica i presents r(i+1)'s certificate, unless `cert_of` says otherwise; each takes
    // only node g's certificates (a replica group's rule: docs/security.md).
    adjust = [this](size_t i, raft_store_options& o) {
      o.tls_peer_node = "g";
      o.tls_check_host = check_host;
      auto it = cert_of.find(i);
      if (it == cert_of.end())
        o.tls = context(certs, "r" + std::to_string(i + 1));
      else if (it->second.first.empty())
        o.tls = nullptr;  // plain TCP
      else
        o.tls = context(certs, it->second.first, it->second.second);
    };
  }
  std::map<size_t, std::pair<std::string, std::string>> cert_of;  // i -> {cert, ca}
  bool check_host = false;  // every replica with --tls-check-host
};

#define SKIP_WITHOUT_CERTS(g)                                                                      \
  SKIP_WITHOUT_DISK(g);                                                                            \
  if (!(g).usable) {                                                                               \
    GTEST_SKIP() << "scripts/make-certs.sh failed (openssl missing?)";                             \
  }

/// Writes `n` entries through the leader; the index of the last.
uint64_t write_entries(raft_store& leader, uint64_t from, size_t n) {
  for (size_t k = 0; k < n; ++k) {
    auto st = leader.write(batch_of(1 + k % 7, from + k * 4, 4));
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return leader.applied_index();
}

TEST(raft_tls, a_group_over_tls_replicates_and_fails_over) {
  tls_group g;
  SKIP_WITHOUT_CERTS(g);
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  uint64_t last = write_entries(*g.stores[l], 1, 40);
  ASSERT_TRUE(g.wait_applied(last));
  // A new leader, elected over TLS, goes on with a majority of two.
  g.close(l);
  int l2 = g.wait_leader();
  ASSERT_GE(l2, 0);
  last = write_entries(*g.stores[l2], 1000, 20);
  ASSERT_TRUE(g.wait_applied(last));
  // The closed one comes back and catches up.
  g.open(l);
  ASSERT_TRUE(g.wait_applied(last));
  for (auto& s : g.stores)
    EXPECT_EQ(s->applied_index(), g.stores[l2]->applied_index());
}

/// Replica 2 set apart by `cert_of[2]`: the other two commit without it, and it applies
/// nothing of what they wrote; given r3's certificate it catches up.
void set_apart(tls_group& g) {
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  ASSERT_NE(l, 2) << "the replica set apart was elected";
  uint64_t last = write_entries(*g.stores[l], 1, 20);
  for (int i : {0, 1})
    ASSERT_TRUE(wait_until([&] { return g.stores[i]->applied_index() >= last; }, 15s));
  // Bounded: what a reachable follower would have applied by now, it does not get.
  EXPECT_FALSE(wait_until([&] { return g.stores[2]->applied_index() >= last; }, 2s))
    << "the replica set apart applied the group's entries";
  EXPECT_FALSE(g.stores[2]->is_leader());
  g.close(2);
  g.cert_of.erase(2);
  g.open(2);
  EXPECT_TRUE(g.wait_applied(last));
}

TEST(raft_tls, a_replica_whose_certificate_the_ca_did_not_sign_gets_nothing) {
  tls_group g;
  SKIP_WITHOUT_CERTS(g);
  g.cert_of[2] = {"other-node", "other-ca"};
  set_apart(g);
}

TEST(raft_tls, a_replica_whose_certificate_names_another_node_gets_nothing) {
  tls_group g;
  SKIP_WITHOUT_CERTS(g);
  g.cert_of[2] = {"h", "ca"};  // the cluster's CA signed it, but for node h
  set_apart(g);
}

TEST(raft_tls, with_hosts_checked_a_replica_whose_certificate_lacks_its_host_gets_nothing) {
  tls_group g;
  SKIP_WITHOUT_CERTS(g);
  // far/r3: replica r3 of node g, from the group's CA, for host 10.255.255.1 alone; the
  // replicas listen on 127.0.0.1. Given r3's own (127.0.0.1 among its hosts) it catches up.
  std::string cmd = "mkdir -p " + g.certs + "/far && cp " + g.certs + "/ca.pem " + g.certs
                    + "/ca.key " + g.certs + "/far/ && bash " + PROCTOR_SOURCE_DIR
                    + "/scripts/proctor-certs node " + g.certs
                    + "/far g --replica r3 --host 10.255.255.1 --force >/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  g.check_host = true;
  g.cert_of[2] = {"far/r3", "ca"};
  set_apart(g);
}

TEST(raft_tls, a_replica_with_a_clients_certificate_gets_nothing) {
  tls_group g;
  SKIP_WITHOUT_CERTS(g);
  g.cert_of[2] = {"client", "ca"};
  set_apart(g);
}

TEST(raft_tls, a_replica_that_trusts_another_ca_gets_nothing) {
  tls_group g;
  SKIP_WITHOUT_CERTS(g);
  g.cert_of[2] = {"r3", "other-ca"};  // a good certificate, but it refuses everyone else's
  set_apart(g);
}

TEST(raft_tls, a_replica_without_tls_gets_nothing) {
  tls_group g;
  SKIP_WITHOUT_CERTS(g);
  g.cert_of[2] = {"", ""};
  set_apart(g);
}

TEST(raft_tls, a_connection_that_never_starts_its_handshake_is_closed) {
  tls_group g;
  SKIP_WITHOUT_CERTS(g);
  g.open_all();
  auto colon = g.members[0].address.rfind(':');
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(g.members[0].address.substr(colon + 1))));
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  timeval tv{15, 0};  // above the transport's 10 s
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[64];
  auto t0 = clock_type::now();
  ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
  double ms = ms_since(t0);
  ::close(fd);
  EXPECT_EQ(n, 0) << "not closed by the replica";
  EXPECT_GT(ms, 5000);
  EXPECT_LT(ms, 14000);
}

/// Informational (the machine may be shared): one client's entries/s with and without TLS,
/// in the same run.
TEST(raft_tls, throughput_with_and_without_tls) {
  double rate[2] = {0, 0};
  for (int with_tls : {0, 1}) {
    tls_group g;
    SKIP_WITHOUT_CERTS(g);
    if (!with_tls)
      for (size_t i = 0; i < 3; ++i)
        g.cert_of[i] = {"", ""};
    g.open_all();
    int l = g.wait_leader();
    ASSERT_GE(l, 0);
    size_t entries = 0;
    auto t0 = clock_type::now();
    while (entries < 3000 && ms_since(t0) < 2000) {
      auto st = g.stores[l]->write(batch_of(1 + entries % 50, 1 + entries * 100, 100, 100));
      ASSERT_TRUE(st.ok()) << st.ToString();
      ++entries;
    }
    rate[with_tls] = entries / (ms_since(t0) / 1000.0);
  }
  std::printf("[ info ] one client thread, entries of 100 ops of 100 B: %.0f entries/s plain, "
              "%.0f with TLS (%.2f)\n",
              rate[0], rate[1], rate[1] / rate[0]);
}

}  // namespace
}  // namespace proctor
