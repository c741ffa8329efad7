// The audit trail (docs/security.md, "Audit") on a real proctord: each act a client asks is
// journaled with who asked, as the door that took it knew it (a client certificate's name,
// an HTTP token's name, the address), with its outcome; `proctor audit`, GET /api/audit and
// `proctor history` show them; they survive a restart; reading them needs the operator
// role; a refused request is not journaled; without TLS a node says "anyone (no TLS)".
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
using proctor::test::describe;
using proctor::test::field;
using proctor::test::free_port;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::temp_dir;
namespace gp = google::protobuf;

using proctor::test::s3cret_sha256;

/// The entries of `proctor audit --json` (or GET /api/audit's body).
std::vector<gp::Value> entries(const std::string& json) {
  std::vector<gp::Value> out;
  auto v = parse_json(json);
  if (v && v->has_list_value())
    for (const auto& e : v->list_value().values())
      out.push_back(e);
  return out;
}

std::string text(const gp::Value& e, const std::string& key) {
  return field(e, key).string_value();
}

/// The one entry of `xs` for `act` of procedure `id` (nullptr: none, or more than one).
const gp::Value* find(const std::vector<gp::Value>& xs, const std::string& act, uint64_t id) {
  const gp::Value* found = nullptr;
  for (const auto& e : xs)
    if (text(e, "act") == act && static_cast<uint64_t>(field(e, "proc_id").number_value()) == id) {
      if (found != nullptr)
        return nullptr;
      found = &e;
    }
  return found;
}

class audit : public proctor::test::tls_fixture {
protected:
  audit() : tls_fixture("reporting") {}
  void SetUp() override {
    tls_fixture::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    std::ofstream(dir_.path() / "policy.toml")
      << "[clients]\nclient = \"operator\"\nreporting = \"reader\"\n[tokens.ci]\nsha256 = \""
      << s3cret_sha256 << "\"\nrole = \"operator\"\n";
  }
  std::vector<std::string> args(uint16_t http_port) const {
    auto a = node_a_tls();
    a.insert(a.end(), {"--auth-policy", (dir_.path() / "policy.toml").string(), "--http",
                       std::to_string(http_port)});
    return a;
  }
};

TEST_F(audit, each_act_is_journaled_with_who_asked_and_its_outcome_and_survives_a_restart) {
  auto http_port = free_port();
  node n{dir_.path() / "a", free_port(), args(http_port)};
  ASSERT_TRUE(n.start()) << n.log_tail();

  auto r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"k1"})"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto id = parse_id(r.out).value_or(0);
  ASSERT_NE(id, 0u);
  // Refused (a reader): not journaled. A reader may not read the trail either.
  as("reporting");
  r = n.ctl({"abort", std::to_string(id)});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  r = n.ctl({"audit"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("audit needs the operator role; client reporting has reader"),
            std::string::npos)
    << describe(r);
  as("client");
  // An event over HTTP with token ci, an abort that finds nothing, the abort that is done.
  httplib::Client c("127.0.0.1", http_port);
  c.set_connection_timeout(5s);
  c.set_read_timeout(20s);
  auto ev = c.Post("/api/events", {{"Authorization", "Bearer s3cret"}},
                   R"({"key":"nobody-waits","payload":{"x":1}})", "application/json");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->status, 200) << ev->body;
  r = n.ctl({"abort", "999999"});
  EXPECT_NE(r.exit_code, 0) << describe(r);
  r = n.ctl({"abort", std::to_string(id)});
  ASSERT_EQ(r.exit_code, 0) << describe(r);

  auto check = [&](const std::string& when) {
    SCOPED_TRACE(when);
    auto a = n.ctl({"audit", "--json"});
    ASSERT_EQ(a.exit_code, 0) << describe(a);
    auto xs = entries(a.out);
    ASSERT_EQ(xs.size(), 3u) << "the event, two aborts; no submit, no refusal, no read: " << a.out;
    const auto* abort = find(xs, "abort", id);
    ASSERT_NE(abort, nullptr) << a.out;
    EXPECT_EQ(text(*abort, "who"), "client client");
    EXPECT_EQ(text(*abort, "address").rfind("127.0.0.1:", 0), 0u) << a.out;
    EXPECT_EQ(text(*abort, "outcome"), "ok");
    const auto* missing = find(xs, "abort", 999999);
    ASSERT_NE(missing, nullptr) << a.out;
    EXPECT_EQ(text(*missing, "outcome").rfind("NOT_FOUND: ", 0), 0u) << a.out;
    const auto* event = find(xs, "event", 0);
    ASSERT_NE(event, nullptr) << a.out;
    EXPECT_EQ(text(*event, "who"), "token ci");
    EXPECT_EQ(text(*event, "address"), "http 127.0.0.1");
    EXPECT_NE(text(*event, "detail").find("nobody-waits"), std::string::npos) << a.out;
    EXPECT_NE(text(*event, "detail").find("payload_json: "), std::string::npos) << a.out;
    EXPECT_EQ(text(*event, "detail").find("\"x\""), std::string::npos) << "no payload: " << a.out;
    EXPECT_EQ(text(xs[0], "act"), "event") << "oldest first";

    auto h = n.ctl({"history", std::to_string(id)});
    ASSERT_EQ(h.exit_code, 0) << describe(h);
    EXPECT_NE(h.out.find("abort by client client from 127.0.0.1:"), std::string::npos) << h.out;
  };
  check("before the restart");
  ASSERT_EQ(n.stop(), 0) << n.log_tail();
  ASSERT_TRUE(n.start()) << n.log_tail();
  check("after the restart");

  // The HTTP API: the operator's token reads it; none is refused (reads need reader only,
  // the trail needs an operator).
  auto got = c.Get("/api/audit?since=1h", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200) << got->body;
  EXPECT_EQ(entries(got->body).size(), 3u) << got->body;
  got = c.Get("/api/audit?limit=1", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(got);
  ASSERT_EQ(entries(got->body).size(), 1u) << got->body;
  EXPECT_EQ(text(entries(got->body)[0], "act"), "abort") << "the newest";
  got = c.Get("/api/audit");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 403) << got->body;
  got = c.Get("/api/audit?since=yesterday", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 400) << got->body;
  r = n.ctl({"audit", "--since", "2999-01-01T00:00:00Z"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("no acts audited"), std::string::npos) << describe(r);
  r = n.ctl({"audit", "--since", "then"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("--since wants a time"), std::string::npos) << describe(r);
}

TEST_F(audit, tls_reload_needs_an_admin_says_what_it_read_and_refuses_a_bad_file) {
  node n{dir_.path() / "a", free_port(), args(free_port())};
  ASSERT_TRUE(n.start()) << n.log_tail();
  auto r = n.ctl({"tls", "reload"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("tls_reload needs the admin role; client client has operator"),
            std::string::npos)
    << describe(r);
  std::ofstream(dir_.path() / "policy.toml") << "[clients]\nclient = \"admin\"\n";
  ASSERT_EQ(::kill(n.pid(), SIGHUP), 0);
  ASSERT_TRUE(proctor::test::eventually(
    [&] {
      return proctor::test::read_file(n.log_file()).find("SIGHUP: --auth-policy")
             != std::string::npos;
    },
    10s))
    << n.log_tail();
  r = n.ctl({"tls", "reload"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("--tls-cert, --tls-key and --tls-ca read again (node a)"), std::string::npos)
    << describe(r);
  EXPECT_NE(r.out.find("read again: 1 client(s)"), std::string::npos) << describe(r);

  // A certificate that does not do: refused, the ones in use stay (the next client is served).
  const auto pem = certs() / "a.pem";
  const auto good = proctor::test::read_file(pem);
  std::ofstream(pem) << "not a certificate\n";
  r = n.ctl({"tls", "reload"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("the TLS files were not taken"), std::string::npos) << describe(r);
  std::ofstream(pem) << good;
  r = n.ctl({"audit", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto xs = entries(r.out);
  ASSERT_EQ(xs.size(), 2u) << "the two reloads taken or refused; not the one refused a role: "
                           << r.out;
  EXPECT_EQ(text(xs[0], "act"), "tls_reload");
  EXPECT_EQ(text(xs[0], "outcome"), "ok");
  EXPECT_EQ(text(xs[1], "outcome").rfind("REFUSED: the TLS files were not taken", 0), 0u) << r.out;
}

TEST(audit_without_tls, a_node_without_tls_says_anyone_and_audits_submits_when_told) {
  temp_dir dir;
  node n{dir.path() / "a", free_port(), {"--audit-submits", "--audit-keep-days", "1"}};
  ASSERT_TRUE(n.start()) << n.log_tail();
  auto r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"k1"})"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = n.ctl({"audit", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto xs = entries(r.out);
  ASSERT_EQ(xs.size(), 1u) << r.out;
  EXPECT_EQ(text(xs[0], "act"), "submit");
  EXPECT_EQ(text(xs[0], "who"), "anyone (no TLS)");
  EXPECT_NE(text(xs[0], "detail").find("args_json: 12 bytes"), std::string::npos) << r.out;
  EXPECT_NE(text(xs[0], "address").rfind("127.0.0.1:", 0), std::string::npos) << r.out;
  EXPECT_EQ(text(xs[0], "outcome"), "ok");
}

}  // namespace
