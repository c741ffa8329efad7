// The fixture of the replica-group process tests (docs/replication.md): node b as three
// proctord processes on 127.0.0.1, each with its own data directory and ports, launched by the
// test; the CLI against all three addresses; optionally mutual TLS (docs/tls.md).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace proctor::test {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class replicas : public ::testing::Test {
protected:
  void SetUp() override {
    if (auto why = raft_unfit_dir(dir_.path()); !why.empty())
      GTEST_SKIP() << why;
    fs::create_directories(ledger());
    for (size_t i = 0; i < 3; ++i) {
      ports_[i] = free_port();
      raft_ports_[i] = free_port();
      spec_ += (i ? "," : "") + name(i) + "=127.0.0.1:" + std::to_string(ports_[i]) + "/"
               + std::to_string(raft_ports_[i]);
    }
    for (size_t i = 0; i < 3; ++i)
      b_[i] = std::make_unique<node>(dir_.path() / name(i), ports_[i], replica_args(i));
  }

  void TearDown() override {
    if (tls_)
      clear_cli_tls();
  }

  /// Replica i of node b in the group of three (more options may follow).
  std::vector<std::string> replica_args(size_t i) const {
    return {"--name", "b", "--replica", name(i), "--replicas", spec_};
  }

  /// Mutual TLS: certificates for `who` (and a client's, given to the CLI the harness runs)
  /// in certs(); false, with the reason in *why, when make-certs.sh fails.
  bool use_tls(const std::vector<std::string>& who, std::string* why) {
    auto r = make_certs(certs(), who);
    if (r.exit_code != 0) {
      *why = describe(r);
      return false;
    }
    set_cli_tls(certs() / "client.pem", certs() / "client.key", certs() / "ca.pem");
    tls_ = true;
    return true;
  }
  fs::path certs() const { return dir_.path() / "certs"; }
  /// The TLS options of a process presenting `cert`'s certificate and trusting CA `ca`.
  std::vector<std::string> tls_args(const std::string& cert, const std::string& ca = "ca") const {
    return {"--tls-cert", (certs() / (cert + ".pem")).string(),
            "--tls-key",  (certs() / (cert + ".key")).string(),
            "--tls-ca",   (certs() / (ca + ".pem")).string()};
  }

  static std::string name(size_t i) { return "b" + std::to_string(i + 1); }
  std::string address(size_t i) const { return "127.0.0.1:" + std::to_string(ports_[i]); }
  fs::path ledger() const { return dir_.path() / "ledger"; }

  /// The CLI against node b by all three addresses.
  run_result ctl(const std::vector<std::string>& args, std::chrono::milliseconds limit = 120s) {
    std::vector<std::string> all{"--node", address(0) + "," + address(1) + "," + address(2)};
    all.insert(all.end(), args.begin(), args.end());
    return run_proctor(all, limit);
  }

  void launch_all() {
    for (auto& n : b_)
      ASSERT_TRUE(n->launch()) << n->log_tail();
  }

  /// The replica that serves (answers `list` by its address alone), among those not in
  /// `skip`; -1 when none does within `limit`.
  int leader(std::chrono::milliseconds limit = 30s, int skip = -1) {
    return serving_replica({b_[0].get(), b_[1].get(), b_[2].get()}, limit, skip);
  }

  /// Freezes replica `l` (SIGSTOP) and returns the replica elected instead, or -1 when none is
  /// within 30 s (then `l` is thawed again).
  int freeze_leader(int l) {
    if (::kill(b_[l]->pid(), SIGSTOP) != 0)
      return -1;
    int l2 = leader(30s, l);
    if (l2 < 0)
      ::kill(b_[l]->pid(), SIGCONT);
    return l2;
  }

  std::string submit(const std::string& type, const std::string& args) {
    auto r = ctl({"submit", type, "--args-json", args});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return trim(r.out);
  }

  std::string state(const std::string& id) {
    auto r = ctl({"status", id, "--json"});
    auto v = parse_json(r.out);
    return v ? state_of(*v) : "(" + describe(r) + ")";
  }

  std::string waited(const std::string& id) {
    auto r = ctl({"wait", id, "--json", "--timeout-s", "60"});
    auto v = parse_json(r.out);
    return v ? state_of(*v) : "(" + describe(r) + ")";
  }

  /// Whether replica `i` answers, within 30 s, that replica `l` leads.
  bool names_leader(int i, int l) {
    return eventually(
      [&] {
        auto r = b_[i]->ctl({"list"}, 10s);
        return r.err.find("the leader is " + name(l)) != std::string::npos;
      },
      30s);
  }

  std::string logs() const {
    std::string s;
    for (size_t i = 0; i < 3; ++i)
      s += "--- " + name(i) + "\n" + b_[i]->log_tail(40);
    return s;
  }

  /// Submits, until stopped, trees from node `a` placed on b (3 steps, 2 children, 50 ms a
  /// step) and procedures to b (3 steps, 30 ms a step), each writing to ledger(); keeps the
  /// ids acknowledged. Stopped and joined by stop() or, at the latest, its destructor.
  class load {
  public:
    load(replicas& t, node& a) {
      const std::string ledger_arg = R"("ledger_dir":")" + t.ledger().string() + "\"}";
      threads_.emplace_back([this, &a, ledger_arg] {
        while (!stop_) {
          auto r = a.ctl({"submit", "demo.ledger", "--args-json",
                          R"({"steps":3,"children":2,"depth":1,"spread":false,"place_on":"b",)"
                          R"("step_sleep_ms":50,)"
                            + ledger_arg},
                         60s);
          std::lock_guard<std::mutex> g(mu_);
          if (r.exit_code == 0)
            trees_.push_back(trim(r.out));
        }
      });
      threads_.emplace_back([this, &t, ledger_arg] {
        while (!stop_) {
          auto r = t.ctl({"submit", "demo.ledger", "--args-json",
                          R"({"steps":3,"step_sleep_ms":30,)" + ledger_arg},
                         60s);
          std::lock_guard<std::mutex> g(mu_);
          if (r.exit_code == 0)
            direct_.push_back(trim(r.out));
        }
      });
    }
    load(const load&) = delete;
    load& operator=(const load&) = delete;
    ~load() { stop(); }

    /// Stops and joins; the ids acknowledged: {trees from a, procedures on b}.
    std::pair<std::vector<std::string>, std::vector<std::string>> stop() {
      stop_ = true;
      for (auto& th : threads_)
        th.join();
      threads_.clear();
      std::lock_guard<std::mutex> g(mu_);
      return {trees_, direct_};
    }

  private:
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::vector<std::string> trees_, direct_;
    std::vector<std::thread> threads_;
  };

  temp_dir dir_;
  std::array<uint16_t, 3> ports_{}, raft_ports_{};
  std::string spec_;  ///< --replicas of the group
  std::array<std::unique_ptr<node>, 3> b_;
  bool tls_ = false;
};

}  // namespace proctor::test
