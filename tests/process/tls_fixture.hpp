// The set-up of the process tests that run nodes with certificates (policy, audit,
// metrics_tls): skipped without openssl; a throw-away CA with a certificate for node `a`, the
// `client` and one more client of the test's own; the CLI's TLS options, reset after.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace proctor::test {

/// The policy tests' HTTP token "s3cret", as a policy stores it: printf %s s3cret | sha256sum
constexpr const char* s3cret_sha256 =
  "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0";

class tls_fixture : public ::testing::Test {
protected:
  /// `extra_client`: the name of a client certificate issued besides `client` ("": none).
  explicit tls_fixture(std::string extra_client) : extra_client_(std::move(extra_client)) {}

  void SetUp() override {
    using namespace std::chrono_literals;
    if (run_program("/bin/sh", {"-c", "command -v openssl"}, 10s).exit_code != 0)
      GTEST_SKIP() << "openssl not found: the TLS tests need it (apt-get install openssl)";
    auto r = make_certs(certs(), {"a"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    if (!extra_client_.empty()) {
      ASSERT_NO_FATAL_FAILURE(issue({"client", certs().string(), extra_client_}));
    }
    as("client");
  }
  void TearDown() override { clear_cli_tls(); }

  std::filesystem::path certs() const { return dir_.path() / "certs"; }
  std::string pem(const std::string& who) const { return (certs() / (who + ".pem")).string(); }
  std::string key(const std::string& who) const { return (certs() / (who + ".key")).string(); }
  /// Runs scripts/proctor-certs with `args` (e.g. {"node", certs(), "b", "--force"}).
  static void issue(const std::vector<std::string>& args) {
    using namespace std::chrono_literals;
    std::vector<std::string> all{
      (std::filesystem::path{PROCTOR_SOURCE_DIR} / "scripts" / "proctor-certs").string()};
    all.insert(all.end(), args.begin(), args.end());
    auto r = run_program("/bin/bash", all, 60s);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
  }
  /// The CLI the harness runs (its readiness checks included) uses `who`'s certificate.
  void as(const std::string& who) const { set_cli_tls(pem(who), key(who), pem("ca")); }
  /// Node a's TLS options (its certificate names node a).
  std::vector<std::string> node_a_tls() const {
    return {"--name", "a", "--tls-cert", pem("a"), "--tls-key", key("a"), "--tls-ca", pem("ca")};
  }

  temp_dir dir_;

private:
  std::string extra_client_;
};

}  // namespace proctor::test
