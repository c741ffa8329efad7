// Roles from --auth-policy (docs/security.md) on a real proctord over mutual TLS: each client
// certificate and each HTTP token has its role at every door (the CLI's client port, the
// HTTP API), a refusal names the role needed (CLI: exit 1, one line; HTTP: 403), and SIGHUP
// reads the policy again: a good one applies to connections made after it, a bad one is
// refused with one line and the old one stays.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/process/process_harness.hpp"
#include "tests/process/tls_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::bin_path;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::free_port;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::read_file;
using proctor::test::run_program;
namespace fs = std::filesystem;

using proctor::test::s3cret_sha256;

class policy : public proctor::test::tls_fixture {
protected:
  policy() : tls_fixture("reporting") {}

  fs::path policy_file() const { return dir_.path() / "policy.toml"; }
  void write_policy(const std::string& text) const { std::ofstream(policy_file()) << text; }
  static std::string roles(const std::string& client_role) {
    return "[clients]\nclient = \"" + client_role + "\"\nreporting = \"reader\"\n"
           + "[tokens.ci]\nsha256 = \"" + s3cret_sha256 + "\"\nrole = \"operator\"\n";
  }
};

TEST_F(policy, each_certificate_and_token_has_its_role_at_every_door_and_sighup_reloads_it) {
  write_policy(roles("submitter"));
  auto http_port = free_port();
  node n{dir_.path() / "a",
         free_port(),
         {"--name", "a", "--tls-cert", (certs() / "a.pem").string(), "--tls-key",
          (certs() / "a.key").string(), "--tls-ca", (certs() / "ca.pem").string(), "--auth-policy",
          policy_file().string(), "--http", std::to_string(http_port)}};
  ASSERT_TRUE(n.start()) << n.log_tail();

  // client: a submitter. It submits; it may not abort.
  auto r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"k1"})"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto id = std::to_string(parse_id(r.out).value_or(0));
  r = n.ctl({"abort", id});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("abort needs the operator role; client client has submitter"),
            std::string::npos)
    << describe(r);
  // reporting: a reader. It lists; it may not submit.
  as("reporting");
  r = n.ctl({"list", "--json"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"k2"})"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("submit needs the submitter role; client reporting has reader"),
            std::string::npos)
    << describe(r);
  as("client");

  // HTTP: reads without a token (as before); token ci is an operator: it aborts, it may not
  // forget a node.
  httplib::Client c("127.0.0.1", http_port);
  c.set_connection_timeout(5s);
  c.set_read_timeout(20s);
  auto got = c.Get("/api/procs/" + id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200) << got->body;
  auto forget = c.Post("/api/nodes/forget", {{"Authorization", "Bearer s3cret"}},
                       R"({"name":"b","confirm_lost":true})", "application/json");
  ASSERT_TRUE(forget);
  EXPECT_EQ(forget->status, 403) << forget->body;
  EXPECT_NE(forget->body.find("forget needs the admin role; token ci has operator"),
            std::string::npos)
    << forget->body;
  auto wrong = c.Post("/api/procs/" + id + "/abort", {{"Authorization", "Bearer nope"}}, "",
                      "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401) << wrong->body;
  auto aborted = c.Post("/api/procs/" + id + "/abort", {{"Authorization", "Bearer s3cret"}}, "",
                        "application/json");
  ASSERT_TRUE(aborted);
  EXPECT_EQ(aborted->status, 200) << aborted->body;

  // SIGHUP with client an operator: its next abort is taken.
  r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"k3"})"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto id2 = std::to_string(parse_id(r.out).value_or(0));
  write_policy(roles("operator"));
  ASSERT_EQ(::kill(n.pid(), SIGHUP), 0);
  ASSERT_TRUE(eventually(
    [&] { return read_file(n.log_file()).find("read again: 2 client(s)") != std::string::npos; },
    10s))
    << n.log_tail();
  r = n.ctl({"abort", id2});
  EXPECT_EQ(r.exit_code, 0) << describe(r);

  // A bad policy is refused with one line; the one in force stays.
  write_policy("[clients]\nclient = \"root\"\n");
  ASSERT_EQ(::kill(n.pid(), SIGHUP), 0);
  ASSERT_TRUE(eventually(
    [&] { return read_file(n.log_file()).find("the policy in force stays") != std::string::npos; },
    10s))
    << n.log_tail();
  EXPECT_NE(read_file(n.log_file()).find("'root' is not a role"), std::string::npos);
  r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"k4"})"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = n.ctl({"abort", std::to_string(parse_id(r.out).value_or(0))});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(n.running());
}

// Type prefixes (docs/security.md, "Type prefixes"): client and token ci may act on demo.noop
// alone. The door refuses a submit of another type; the executor an abort or a release of a
// procedure of another type (it alone knows it), at the client port and the HTTP API alike;
// their own are theirs (a release of an ended demo.noop root is done).
TEST_F(policy, type_prefixes_limit_a_client_and_a_token_to_their_types_at_every_door) {
  write_policy("[clients]\nclient = { role = \"operator\", types = [\"demo.noop\"] }\n"
               "reporting = \"operator\"\n[tokens.ci]\nsha256 = \""
               + std::string{s3cret_sha256} + "\"\nrole = \"operator\"\ntypes = [\"demo.noop\"]\n");
  auto http_port = free_port();
  auto args = node_a_tls();
  args.insert(args.end(),
              {"--auth-policy", policy_file().string(), "--http", std::to_string(http_port)});
  node n{dir_.path() / "a", free_port(), args};
  ASSERT_TRUE(n.start()) << n.log_tail();

  as("reporting");
  auto r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"k1"})"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto other = std::to_string(parse_id(r.out).value_or(0));
  as("client");
  r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"k2"})"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("client client may act on types demo.noop* only; submit concerns type "
                       "'demo.wait_event'"),
            std::string::npos)
    << describe(r);
  r = n.ctl({"abort", other});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("client client may act on types demo.noop* only; abort concerns procedure "
                       + other + ", of the tree of type demo.wait_event"),
            std::string::npos)
    << describe(r);
  r = n.ctl({"release", other});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("release concerns procedure " + other), std::string::npos) << describe(r);
  // Its own type: submitted, waited for, released.
  r = n.ctl({"submit", "demo.noop"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto mine = std::to_string(parse_id(r.out).value_or(0));
  r = n.ctl({"wait", mine, "--timeout-s", "30"}, 60s);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  r = n.ctl({"release", mine});
  EXPECT_EQ(r.exit_code, 0) << describe(r);

  // The HTTP API: token ci the same.
  httplib::Client c("127.0.0.1", http_port);
  c.set_connection_timeout(5s);
  c.set_read_timeout(20s);
  auto aborted = c.Post("/api/procs/" + other + "/abort", {{"Authorization", "Bearer s3cret"}}, "",
                        "application/json");
  ASSERT_TRUE(aborted);
  EXPECT_EQ(aborted->status, 403) << aborted->body;
  EXPECT_NE(aborted->body.find("token ci may act on types demo.noop* only"), std::string::npos)
    << aborted->body;
  // Untouched by both; an operator of every type aborts it.
  as("reporting");
  r = n.ctl({"status", other, "--json"});
  EXPECT_NE(r.out.find("WAITING"), std::string::npos) << describe(r);
  r = n.ctl({"abort", other});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  auto log = read_file(n.log_file());
  EXPECT_NE(log.find("refused a request from client client"), std::string::npos) << n.log_tail();
}

TEST_F(policy, a_policy_without_tls_or_a_bad_policy_is_refused_at_start) {
  write_policy(roles("reader"));
  auto base = std::vector<std::string>{"--data-dir", (dir_.path() / "x").string(), "--listen",
                                       "127.0.0.1:" + std::to_string(free_port())};
  auto args = base;
  args.insert(args.end(), {"--auth-policy", policy_file().string()});
  auto r = run_program(bin_path("proctord").string(), args, 30s);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  EXPECT_NE(r.err.find("--auth-policy needs --tls-cert"), std::string::npos) << r.err;
  write_policy("[clients]\nclient = \"root\"\n");
  args.insert(args.end(),
              {"--tls-cert", (certs() / "a.pem").string(), "--tls-key",
               (certs() / "a.key").string(), "--tls-ca", (certs() / "ca.pem").string()});
  r = run_program(bin_path("proctord").string(), args, 30s);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  EXPECT_NE(r.err.find("policy.toml:2: [clients] client: 'root' is not a role"), std::string::npos)
    << r.err;
}

}  // namespace
