// Certificates rotated without a restart (docs/security.md), as CockroachDB's TestRotateCerts
// does it, with two real proctord processes linked over mutual TLS: the nodes move to a new
// CA's certificates by SIGHUP (first trusting both CAs, then the new one alone); clients of
// the new CA are served once the nodes took it, clients of the old one are refused once the
// nodes dropped it, the link between the nodes is never cut, trees spanning both run
// throughout, and a file written badly is refused with one line while the ones in use stay.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::clear_cli_tls;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::free_port;
using proctor::test::make_certs;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::read_file;
using proctor::test::run_program;
using proctor::test::set_cli_tls;
using proctor::test::temp_dir;
namespace fs = std::filesystem;

class tls_rotation : public ::testing::Test {
protected:
  void SetUp() override {
    if (run_program("/bin/sh", {"-c", "command -v openssl"}, 10s).exit_code != 0)
      GTEST_SKIP() << "openssl not found: the TLS tests need it (apt-get install openssl)";
    for (const auto* set : {"old", "new"}) {
      auto r = make_certs(dir_.path() / set, {"a", "b"});
      ASSERT_EQ(r.exit_code, 0) << describe(r);
    }
    fs::create_directories(live());
    fs::create_directories(ledger());
    for (const auto* n : {"a", "b"})
      use(n, "old", {"old"});
  }
  void TearDown() override { clear_cli_tls(); }

  fs::path live() const { return dir_.path() / "live"; }
  fs::path ledger() const { return dir_.path() / "ledger"; }
  fs::path from(const std::string& set, const std::string& file) const {
    return dir_.path() / set / file;
  }
  /// Node `n`'s files in live/ become those of `set`, trusting the CAs of `cas`.
  void use(const std::string& n, const std::string& set, const std::vector<std::string>& cas) {
    fs::copy_file(from(set, n + ".pem"), live() / (n + ".pem"),
                  fs::copy_options::overwrite_existing);
    fs::copy_file(from(set, n + ".key"), live() / (n + ".key"),
                  fs::copy_options::overwrite_existing);
    std::string bundle;
    for (const auto& ca : cas)
      bundle += read_file(from(ca, "ca.pem"));
    std::ofstream(live() / (n + "-ca.pem"), std::ios::trunc) << bundle;
  }
  /// The CLI presents `set`'s client certificate and trusts both CAs.
  void cli(const std::string& set) {
    std::ofstream(dir_.path() / "both-ca.pem", std::ios::trunc)
      << read_file(from("old", "ca.pem")) << read_file(from("new", "ca.pem"));
    set_cli_tls(from(set, "client.pem"), from(set, "client.key"), dir_.path() / "both-ca.pem");
  }
  std::unique_ptr<node> make(const std::string& n, uint16_t port, const std::string& peer,
                             uint16_t peer_port) const {
    return std::make_unique<node>(
      dir_.path() / n, port,
      std::vector<std::string>{
        "--name", n, "--peers", peer + "=127.0.0.1:" + std::to_string(peer_port), "--tls-cert",
        (live() / (n + ".pem")).string(), "--tls-key", (live() / (n + ".key")).string(), "--tls-ca",
        (live() / (n + "-ca.pem")).string()});
  }
  static void reload(node& n, const std::string& says) {
    auto before = read_file(n.log_file()).size();
    ASSERT_EQ(::kill(n.pid(), SIGHUP), 0);
    ASSERT_TRUE(eventually(
      [&] { return read_file(n.log_file()).find(says, before) != std::string::npos; }, 10s))
      << n.log_tail();
  }
  /// A tree spanning a and b, submitted to a, ran to SUCCESS.
  void spanning_tree(node& a) const {
    auto r = a.ctl({"submit", "demo.ledger", "--args-json",
                    R"({"ledger_dir":")" + ledger().string()
                      + R"(","steps":2,"children":2,"depth":1,"spread":true})"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    auto w = a.ctl({"wait", std::to_string(parse_id(r.out).value_or(0)), "--timeout-s", "60"}, 90s);
    EXPECT_EQ(w.exit_code, 0) << describe(w) << a.log_tail();
  }
  static std::string metric(node& n, const std::string& name) {
    auto m = n.ctl({"metrics"});
    auto at = m.out.find("\n" + name);
    return at == std::string::npos ? "" : m.out.substr(at + 1, m.out.find('\n', at + 1) - at - 1);
  }

  temp_dir dir_;
};

TEST_F(tls_rotation, nodes_move_to_a_new_ca_by_sighup_and_their_link_is_never_cut) {
  auto pa = free_port(), pb = free_port();
  auto a = make("a", pa, "b", pb);
  auto b = make("b", pb, "a", pa);
  cli("old");
  ASSERT_TRUE(a->start()) << a->log_tail();
  ASSERT_TRUE(b->start()) << b->log_tail();
  ASSERT_TRUE(eventually(
    [&] { return metric(*a, "proctor_peer_up{peer=\"b\"}") == "proctor_peer_up{peer=\"b\"} 1"; },
    30s))
    << a->log_tail();
  spanning_tree(*a);
  const auto downs_before = metric(*a, "proctor_peer_downs_total{peer=\"b\"}");

  // A client of the new CA is refused: the nodes trust only the old one.
  cli("new");
  auto r = a->ctl({"list", "--json"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);

  // Step 1: the new certificates, both CAs trusted.
  for (const auto* n : {"a", "b"})
    use(n, "new", {"old", "new"});
  reload(*a, "read again (node a)");
  reload(*b, "read again (node b)");
  r = a->ctl({"list", "--json"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  cli("old");
  r = a->ctl({"list", "--json"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  spanning_tree(*a);

  // Step 2: the new CA alone. The old CA's client is refused; the new one's served.
  for (const auto* n : {"a", "b"})
    use(n, "new", {"new"});
  reload(*a, "read again (node a)");
  reload(*b, "read again (node b)");
  r = a->ctl({"list", "--json"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  cli("new");
  r = a->ctl({"list", "--json"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  spanning_tree(*a);

  // A certificate written badly: refused with one line; the files in use stay.
  std::ofstream(live() / "a.pem", std::ios::trunc) << "not a certificate\n";
  reload(*a, "the ones in use stay");
  r = a->ctl({"list", "--json"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  // Another node's certificate: refused too (it does not name node a).
  fs::copy_file(from("new", "b.pem"), live() / "a.pem", fs::copy_options::overwrite_existing);
  fs::copy_file(from("new", "b.key"), live() / "a.key", fs::copy_options::overwrite_existing);
  reload(*a, "names node b, not proctor://node/a");
  spanning_tree(*a);

  // The link between the nodes was never cut.
  EXPECT_EQ(metric(*a, "proctor_peer_downs_total{peer=\"b\"}"), downs_before) << a->log_tail(60);
  EXPECT_TRUE(a->running());
  EXPECT_TRUE(b->running());
}

}  // namespace
