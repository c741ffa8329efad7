// --tls-check-host (docs/security.md, "Host checks"): a node, or the CLI, that dials a node
// requires its certificate to carry the host dialled. Node b's certificate names node b but
// carries only 10.255.255.1 (proctor-certs --host), and b listens on 127.0.0.1: node a
// checking hosts keeps its link to b down and says why, b's link to a (whose certificate
// carries 127.0.0.1, the default) comes up; the CLI checking hosts is refused by b's
// certificate and served by a's, by address and by name (localhost).
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/tls_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::eventually;
using proctor::test::free_port;
using proctor::test::node;
using proctor::test::parse_json;
using proctor::test::read_file;
using proctor::test::run_proctor;

class host_check : public proctor::test::tls_fixture {
protected:
  host_check() : tls_fixture("") {}

  void SetUp() override {
    tls_fixture::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSERT_NO_FATAL_FAILURE(
      issue({"node", certs().string(), "b", "--host", "10.255.255.1", "--force"}));
  }

  std::vector<std::string> node_tls(const std::string& n) const {
    return {"--name", n, "--tls-cert", pem(n), "--tls-key", key(n), "--tls-ca", pem("ca")};
  }

  /// Node `who`'s view of `peer` in `nodes --json`: {up, reason}; nullopt if not listed.
  static std::optional<std::pair<bool, std::string>> view(node& who, const std::string& peer) {
    auto r = who.ctl({"nodes", "--json"}, 10s);
    auto v = parse_json(r.out);
    if (!v)
      return std::nullopt;
    for (const auto& x : v->list_value().values()) {
      const auto& f = x.struct_value().fields();
      if (f.at("name").string_value() == peer)
        return std::make_pair(f.at("up").bool_value(), f.at("reason").string_value());
    }
    return std::nullopt;
  }
};

TEST_F(host_check, a_node_dials_only_a_peer_whose_certificate_carries_the_host_dialled) {
  auto pa = free_port(), pb = free_port();
  auto args_a = node_tls("a");
  args_a.insert(args_a.end(), {"--tls-check-host", "--peers", "b=127.0.0.1:" + std::to_string(pb)});
  auto args_b = node_tls("b");
  args_b.insert(args_b.end(), {"--tls-check-host", "--peers", "a=127.0.0.1:" + std::to_string(pa)});
  node a{dir_.path() / "a", pa, args_a};
  node b{dir_.path() / "b", pb, args_b};
  ASSERT_TRUE(a.start()) << a.log_tail();
  ASSERT_TRUE(b.start()) << b.log_tail();

  // b's certificate does not carry 127.0.0.1: a refuses it, logs why and keeps b down.
  EXPECT_TRUE(eventually(
    [&] {
      auto log = read_file(a.log_file());
      return log.find("IP address mismatch") != std::string::npos
             && log.find("it does not carry 127.0.0.1, the host dialled") != std::string::npos;
    },
    20s))
    << a.log_tail();
  std::optional<std::pair<bool, std::string>> seen;
  EXPECT_TRUE(eventually(
    [&] {
      seen = view(a, "b");
      return seen && !seen->first && seen->second.find("TLS") != std::string::npos;
    },
    20s, 200ms))
    << (seen ? seen->second : "b not listed");
  // a's does: b's link to a comes up.
  EXPECT_TRUE(eventually(
    [&] {
      seen = view(b, "a");
      return seen && seen->first;
    },
    20s, 200ms))
    << (seen ? seen->second : "a not listed") << "\n"
    << b.log_tail();
  // And stays down for a: no handshake of a's to b ever succeeded.
  seen = view(a, "b");
  ASSERT_TRUE(seen);
  EXPECT_FALSE(seen->first);

  // The CLI checking hosts: served by a (127.0.0.1 and localhost), refused by b's certificate
  // (`nodes`, not `list`: a's list would ask b, which a cannot reach).
  setenv("PROCTOR_TLS_CHECK_HOST", "1", 1);
  auto r = a.ctl({"nodes", "--json"}, 20s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_proctor({"--node", "localhost:" + std::to_string(pa), "nodes", "--json"}, 20s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = b.ctl({"nodes", "--json"}, 20s);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("IP address mismatch"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("it does not carry 127.0.0.1"), std::string::npos) << r.err;
  unsetenv("PROCTOR_TLS_CHECK_HOST");
  // Without the check, the CLI takes b's certificate (the CA signed it): the check is the flag's.
  r = b.ctl({"nodes", "--json"}, 20s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(a.running());
  EXPECT_TRUE(b.running());
}

TEST_F(host_check, the_flag_without_tls_is_refused_in_one_line) {
  proctor::test::clear_cli_tls();
  auto r = run_proctor({"--tls-check-host", "--node", "127.0.0.1:1", "list"}, 20s);
  EXPECT_EQ(r.exit_code, 64) << r.out << r.err;  // as any bad TLS option
  EXPECT_NE(r.err.find("--tls-check-host needs --tls-cert, --tls-key and --tls-ca"),
            std::string::npos)
    << r.err;
  node n{dir_.path() / "n", 0, {"--tls-check-host"}};
  EXPECT_FALSE(n.start(20s));
  EXPECT_NE(read_file(n.log_file()).find("--tls-check-host needs --tls-cert"), std::string::npos)
    << n.log_tail();
}

}  // namespace
