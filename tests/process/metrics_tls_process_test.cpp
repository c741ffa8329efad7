// /metrics over TLS (proctord --metrics-tls; docs/security.md): the node serves it with its
// own certificate; a scraper shows a client certificate of the node's CA and is given the
// reader role by the policy, or refused (403, counted); without a certificate, or over plain
// HTTP, there is no answer; a node asked for it without TLS refuses to start.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/process/process_harness.hpp"
#include "tests/process/tls_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::describe;
using proctor::test::free_port;
using proctor::test::node;
using proctor::test::run_program;

class metrics_tls : public proctor::test::tls_fixture {
protected:
  metrics_tls() : tls_fixture("prometheus") {}
  void SetUp() override {
    // A refused handshake closes the socket under the client's TLS write: OpenSSL writes with
    // write(2), whose SIGPIPE would end this test process.
    ::signal(SIGPIPE, SIG_IGN);
    tls_fixture::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    std::ofstream(dir_.path() / "policy.toml") << "[clients]\nprometheus = \"reader\"\n";
    as("prometheus");  // the harness's CLI (its readiness check included): a reader
  }

  /// GET /metrics over TLS as `who` ("": no client certificate).
  httplib::Result scrape(uint16_t port, const std::string& who) const {
    auto c = who.empty()
               ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
               : std::make_unique<httplib::SSLClient>("127.0.0.1", port, pem(who), key(who));
    // The node's certificate names node a, not this address (docs/tls.md): the client's
    // certificate is what is tested here.
    c->enable_server_certificate_verification(false);
    c->set_connection_timeout(5s);
    c->set_read_timeout(20s);
    return c->Get("/metrics");
  }
};

TEST_F(metrics_tls, a_scraper_needs_a_certificate_of_the_ca_with_the_reader_role) {
  auto metrics_port = free_port();
  node n{dir_.path() / "a", free_port(), [&] {
           auto a = node_a_tls();
           a.insert(a.end(), {"--auth-policy", (dir_.path() / "policy.toml").string(), "--metrics",
                              "127.0.0.1:" + std::to_string(metrics_port), "--metrics-tls"});
           return a;
         }()};
  ASSERT_TRUE(n.start()) << n.log_tail();

  auto got = scrape(metrics_port, "prometheus");
  ASSERT_TRUE(got) << httplib::to_string(got.error());
  EXPECT_EQ(got->status, 200) << got->body;
  EXPECT_NE(got->body.find("proctor_"), std::string::npos) << got->body.substr(0, 300);

  // A client of the CA the policy gives no role: 403, counted.
  got = scrape(metrics_port, "client");
  ASSERT_TRUE(got) << httplib::to_string(got.error());
  EXPECT_EQ(got->status, 403) << got->body;
  EXPECT_NE(got->body.find("metrics needs the reader role; client client has none"),
            std::string::npos)
    << got->body;
  got = scrape(metrics_port, "prometheus");
  ASSERT_TRUE(got);
  EXPECT_NE(got->body.find("proctor_refused_requests_total 1"), std::string::npos)
    << got->body.substr(0, 2000);

  // Another CA's client, no certificate, plain HTTP: no answer at all.
  EXPECT_FALSE(scrape(metrics_port, "other-client"));
  EXPECT_FALSE(scrape(metrics_port, ""));
  httplib::Client plain("127.0.0.1", metrics_port);
  plain.set_connection_timeout(5s);
  plain.set_read_timeout(5s);
  auto p = plain.Get("/metrics");
  EXPECT_TRUE(!p || p->status != 200);
  EXPECT_TRUE(n.running()) << n.log_tail();
}

TEST_F(metrics_tls, a_node_without_tls_refuses_to_start_with_it) {
  auto r = run_program(proctor::test::bin_path("proctord").string(),
                       {"--data-dir", (dir_.path() / "x").string(), "--listen",
                        "127.0.0.1:" + std::to_string(free_port()), "--metrics",
                        "127.0.0.1:" + std::to_string(free_port()), "--metrics-tls"},
                       30s);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  EXPECT_NE(r.err.find("--metrics-tls needs --metrics and --tls-cert"), std::string::npos) << r.err;
}

}  // namespace
