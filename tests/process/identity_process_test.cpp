// Identities bound to certificates (docs/security.md), with real proctord processes and
// certificates from scripts/make-certs.sh: a node refuses to start under a name its
// certificate does not give it; a client's certificate, or another node's, posing as node b
// (a delivery, a heartbeat) is refused PERMISSION_DENIED, logged and counted, and nothing it
// sent is acted on; a node does not link to a peer whose certificate names another node.
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/wire.pb.h>

#include "actors/wire/wire_client.hpp"
#include "tests/process/process_harness.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::bin_path;
using proctor::test::clear_cli_tls;
using proctor::test::eventually;
using proctor::test::free_port;
using proctor::test::make_certs;
using proctor::test::node;
using proctor::test::parse_json;
using proctor::test::read_file;
using proctor::test::run_program;
using proctor::test::set_cli_tls;
using proctor::test::temp_dir;
namespace fs = std::filesystem;
namespace pb = proctor::pb;

class identities : public ::testing::Test {
protected:
  void SetUp() override {
    if (run_program("/bin/sh", {"-c", "command -v openssl"}, 10s).exit_code != 0)
      GTEST_SKIP() << "openssl not found: the TLS tests need it (apt-get install openssl)";
    auto r = make_certs(certs(), {"a", "b", "c"});
    ASSERT_EQ(r.exit_code, 0) << proctor::test::describe(r);
    set_cli_tls(pem("client"), key("client"), pem("ca"));
  }
  void TearDown() override { clear_cli_tls(); }

  fs::path certs() const { return dir_.path() / "certs"; }
  fs::path pem(const std::string& name) const { return certs() / (name + ".pem"); }
  fs::path key(const std::string& name) const { return certs() / (name + ".key"); }
  std::vector<std::string> tls_args(const std::string& cert) const {
    return {"--tls-cert",       pem(cert).string(), "--tls-key",
            key(cert).string(), "--tls-ca",         pem("ca").string()};
  }
  std::unique_ptr<node> make(const std::string& dir, const std::string& cert, uint16_t port,
                             std::vector<std::string> extra) const {
    auto args = tls_args(cert);
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<node>(dir_.path() / dir, port, std::move(args));
  }

  /// `req` sent to the node at `port` presenting certificate `cert`: its answer.
  pb::Response send_as(const std::string& cert, uint16_t port, const pb::Request& req) const {
    proctor::wire_call_options o;
    o.tls = {pem(cert).string(), key(cert).string(), pem("ca").string()};
    auto r = proctor::wire_call("127.0.0.1", port, req.SerializeAsString(), o);
    pb::Response out;
    if (!r.ok() || !out.ParseFromString(r.reply))
      ADD_FAILURE() << "no answer: " << r.reason;
    return out;
  }

  temp_dir dir_;
};

TEST_F(identities, a_node_refuses_to_start_under_a_name_its_certificate_does_not_give_it) {
  auto args = tls_args("c");
  args.insert(args.end(), {"--data-dir", (dir_.path() / "b").string(), "--listen",
                           "127.0.0.1:" + std::to_string(free_port()), "--name", "b"});
  auto r = run_program(bin_path("proctord").string(), args, 30s);
  EXPECT_EQ(r.exit_code, 64) << proctor::test::describe(r);
  EXPECT_NE(r.err.find("names node c, not proctor://node/b"), std::string::npos) << r.err;
  // A client's certificate names no node at all.
  args = tls_args("client");
  args.insert(args.end(), {"--data-dir", (dir_.path() / "b").string(), "--listen",
                           "127.0.0.1:" + std::to_string(free_port()), "--name", "b"});
  r = run_program(bin_path("proctord").string(), args, 30s);
  EXPECT_EQ(r.exit_code, 64) << proctor::test::describe(r);
  EXPECT_NE(r.err.find("names client client, not proctor://node/b"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_.path() / "b" / "journal")) << "it wrote before refusing";
}

TEST_F(identities, only_node_bs_certificate_speaks_for_node_b) {
  auto pa = free_port(), pb_port = free_port();
  auto a = make("a", "a", pa, {"--name", "a", "--peers", "b=127.0.0.1:" + std::to_string(pb_port)});
  ASSERT_TRUE(a->start()) << a->log_tail();

  // A delivery of a child's spawn "from node b": from a client's certificate, from node c's,
  // and the heartbeat of a client posing as b.
  pb::Request deliver;
  deliver.mutable_peer()->set_from("b");
  deliver.mutable_peer()->add_messages();
  auto r = send_as("client", pa, deliver);
  EXPECT_EQ(r.code(), pb::Response::PERMISSION_DENIED) << r.DebugString();
  EXPECT_EQ(r.error(), "peer needs the node role; client client has admin");
  r = send_as("c", pa, deliver);
  EXPECT_EQ(r.code(), pb::Response::PERMISSION_DENIED) << r.DebugString();
  EXPECT_EQ(r.error(), "peer says it comes from node b but the certificate is node c's");
  pb::Request ping;
  ping.mutable_ping()->set_from("b");
  r = send_as("client", pa, ping);
  EXPECT_EQ(r.code(), pb::Response::PERMISSION_DENIED) << r.DebugString();
  // The same heartbeat from b's own certificate is answered.
  r = send_as("b", pa, ping);
  EXPECT_EQ(r.code(), pb::Response::OK) << r.DebugString();

  // Refusals are logged and counted; the CLI (a client certificate, no policy) does the rest.
  EXPECT_TRUE(eventually(
    [&] {
      return read_file(a->log_file()).find("refused a request from 127.0.0.1") != std::string::npos;
    },
    10s))
    << a->log_tail();
  auto m = a->ctl({"metrics"});
  EXPECT_NE(m.out.find("proctor_refused_requests_total 3"), std::string::npos) << m.out;
  auto list = a->ctl({"list", "--json", "--local"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(list.out.find("\"id\""), std::string::npos)
    << "a refused delivery spawned: " << list.out;

  // A node that answers at b's address under another certificate (node c's) is not b: a's
  // link refuses it, and says why.
  auto c = make("c", "c", pb_port, {"--name", "c"});
  ASSERT_TRUE(c->start()) << c->log_tail();
  EXPECT_TRUE(eventually(
    [&] { return read_file(a->log_file()).find("names node c, not node b") != std::string::npos; },
    20s))
    << a->log_tail();
  auto nodes = a->ctl({"nodes", "--json"});
  auto v = parse_json(nodes.out);
  ASSERT_TRUE(v) << nodes.out << nodes.err;
  for (const auto& x : v->list_value().values()) {
    const auto& f = x.struct_value().fields();
    if (f.at("name").string_value() == "b") {
      EXPECT_FALSE(f.at("up").bool_value()) << nodes.out;
    }
  }
  EXPECT_TRUE(a->running());
}

}  // namespace
