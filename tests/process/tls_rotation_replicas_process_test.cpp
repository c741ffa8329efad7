// Certificates rotated without a restart across a node and a replica group, under load
// (docs/security.md, "Certificates rotated without a restart"; CockroachDB's TestRotateCerts
// with its cluster running): node a and node b as three replicas, every process on the old
// CA's certificates, trees from a placed on b and procedures submitted to b running
// throughout. Step 1: new certificates trusting both CAs, by SIGHUP, and b's leader
// SIGKILLed (its successor elected over connections made with the new files, the killed one
// back on them). Step 2: the new CA alone, by SIGHUP, and another leader killed. A client of
// the old CA is refused at the end; every acknowledged tree and procedure ends SUCCESS.
#include <signal.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/replica_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using namespace proctor::test;
namespace fs = std::filesystem;

class rotation_replicas : public replicas {
protected:
  void SetUp() override {
    replicas::SetUp();
    if (IsSkipped())
      return;
    if (run_program("/bin/sh", {"-c", "command -v openssl"}, 10s).exit_code != 0)
      GTEST_SKIP() << "openssl not found: the TLS tests need it (apt-get install openssl)";
    for (const auto* set : {"old", "new"}) {
      auto r = make_certs(dir_.path() / set, {"a", "b/b1", "b/b2", "b/b3"});
      ASSERT_EQ(r.exit_code, 0) << describe(r);
    }
    fs::create_directories(live());
    std::ofstream(dir_.path() / "both-ca.pem")
      << read_file(dir_.path() / "old" / "ca.pem") << read_file(dir_.path() / "new" / "ca.pem");
    for (const auto& who : everyone())
      use(who, "old", {"old"});
    cli("old");
  }
  void TearDown() override { clear_cli_tls(); }

  static std::vector<std::string> everyone() { return {"a", "b1", "b2", "b3"}; }
  fs::path live() const { return dir_.path() / "live"; }
  /// Process `who`'s files in live/ become those of `set`, trusting the CAs of `cas`.
  void use(const std::string& who, const std::string& set, const std::vector<std::string>& cas) {
    for (const auto* ext : {".pem", ".key"})
      fs::copy_file(dir_.path() / set / (who + ext), live() / (who + ext),
                    fs::copy_options::overwrite_existing);
    std::string bundle;
    for (const auto& ca : cas)
      bundle += read_file(dir_.path() / ca / "ca.pem");
    std::ofstream(live() / (who + "-ca.pem"), std::ios::trunc) << bundle;
  }
  /// The CLI presents `set`'s client certificate and trusts both CAs.
  void cli(const std::string& set) {
    set_cli_tls(dir_.path() / set / "client.pem", dir_.path() / set / "client.key",
                dir_.path() / "both-ca.pem");
  }
  std::vector<std::string> live_tls(const std::string& who) const {
    return {"--tls-cert", (live() / (who + ".pem")).string(),
            "--tls-key",  (live() / (who + ".key")).string(),
            "--tls-ca",   (live() / (who + "-ca.pem")).string()};
  }
  /// SIGHUP to `n`, and its log saying it read the files again.
  static void reload(node& n) {
    auto before = read_file(n.log_file()).size();
    ASSERT_EQ(::kill(n.pid(), SIGHUP), 0);
    ASSERT_TRUE(eventually(
      [&] {
        auto log = read_file(n.log_file());
        return log.find("--tls-ca", before) != std::string::npos
               && log.find("read again", before) != std::string::npos;
      },
      15s))
      << n.log_tail();
  }
  /// SIGKILLs b's leader; another is elected; the killed one comes back (on the files in
  /// live/ now).
  void kill_leader() {
    int l = leader();
    EXPECT_GE(l, 0) << logs();
    if (l < 0)
      return;
    b_[l]->kill();
    EXPECT_GE(leader(30s, l), 0) << logs();
    EXPECT_TRUE(b_[l]->launch()) << b_[l]->log_tail();
  }

  /// One step of the rotation under load: every process's files become the new
  /// certificates trusting the CAs of `cas`, read again by SIGHUP; then b's leader is
  /// SIGKILLed. The ids acknowledged meanwhile are added to `trees` and `direct`.
  void rotate_under_load(node& a, const std::vector<std::string>& cas,
                         std::vector<std::string>* trees, std::vector<std::string>* direct) {
    load running{*this, a};
    std::this_thread::sleep_for(1s);
    for (const auto& who : everyone())
      use(who, "new", cas);
    ASSERT_NO_FATAL_FAILURE(reload(a));
    for (auto& b : b_)
      ASSERT_NO_FATAL_FAILURE(reload(*b));
    kill_leader();
    std::this_thread::sleep_for(1s);
    const auto ids = running.stop();
    trees->insert(trees->end(), ids.first.begin(), ids.first.end());
    direct->insert(direct->end(), ids.second.begin(), ids.second.end());
  }
};

TEST_F(rotation_replicas, a_node_and_a_replica_group_move_to_a_new_ca_under_load_by_sighup) {
  auto port_a = free_port();
  auto args_a = live_tls("a");
  args_a.insert(args_a.end(), {"--name", "a", "--peers",
                               "b=" + address(0) + "|" + address(1) + "|" + address(2)});
  node a{dir_.path() / "a", port_a, args_a};
  for (size_t i = 0; i < 3; ++i) {
    auto args = replica_args(i);
    args.insert(args.end(), {"--peers", "a=127.0.0.1:" + std::to_string(port_a)});
    for (auto& x : live_tls(name(i)))
      args.push_back(x);
    b_[i] = std::make_unique<node>(dir_.path() / name(i), ports_[i], std::move(args));
  }
  launch_all();
  ASSERT_TRUE(a.start()) << a.log_tail();
  ASSERT_GE(leader(), 0) << logs();

  // The CLI's environment changes only while no load runs (setenv is not thread-safe).
  std::vector<std::string> trees, direct;
  // Step 1: the new certificates, both CAs trusted. Step 2: the new CA alone.
  ASSERT_NO_FATAL_FAILURE(rotate_under_load(a, {"old", "new"}, &trees, &direct));
  cli("new");
  ASSERT_NO_FATAL_FAILURE(rotate_under_load(a, {"new"}, &trees, &direct));
  std::printf("  %zu trees from a, %zu procedures on b acknowledged\n", trees.size(),
              direct.size());
  ASSERT_GE(leader(), 0) << logs();

  // A tree across a and b after the last step: a's link to b's leader is on the new files.
  auto r =
    a.ctl({"submit", "demo.ledger", "--args-json",
           R"({"steps":2,"children":2,"depth":1,"spread":false,"place_on":"b","ledger_dir":")"
             + ledger().string() + "\"}"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  trees.push_back(trim(r.out));
  EXPECT_GT(direct.size(), 0u);
  for (const auto& id : trees) {
    auto w = a.ctl({"wait", id, "--json", "--timeout-s", "90"}, 120s);
    auto v = parse_json(w.out);
    EXPECT_EQ(v ? state_of(*v) : describe(w), "SUCCESS") << "tree " << id << "\n" << logs();
  }
  for (const auto& id : direct)
    EXPECT_EQ(waited(id), "SUCCESS") << "procedure " << id << "\n" << logs();

  // The old CA's client is refused everywhere now.
  set_cli_tls(dir_.path() / "old" / "client.pem", dir_.path() / "old" / "client.key",
              dir_.path() / "both-ca.pem");
  r = ctl({"list", "--json"}, 60s);
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  r = a.ctl({"list", "--json"}, 30s);
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  cli("new");
  EXPECT_TRUE(a.running());
}

}  // namespace
