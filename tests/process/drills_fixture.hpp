// The fixture of the operator's drills (drills_process_test.cpp): node b as three replicas and
// plain nodes w1 and w2 on mutual TLS, the load that runs between the drills, and what it
// acknowledged.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace proctor::test::drill {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// One replica of node b: its name, ports and process.
struct replica {
  std::string name;
  uint16_t port = 0;
  uint16_t raft = 0;
  std::unique_ptr<node> proc;

  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  std::string spec() const { return name + "=" + address() + "/" + std::to_string(raft); }
};

/// What the load acknowledged.
struct acknowledged {
  std::mutex mu;
  std::vector<uint64_t> trees;   ///< roots on w1
  std::vector<uint64_t> direct;  ///< procedures on b
};

class drills : public ::testing::Test {
protected:
  void SetUp() override {
    if (auto why = raft_unfit_dir(dir_.path()); !why.empty())
      GTEST_SKIP() << why;
    if (run_program("/bin/sh", {"-c", "command -v openssl"}, 10s).exit_code != 0)
      GTEST_SKIP() << "openssl not found: the TLS drills need it (apt-get install openssl)";
    if (const char* ms = std::getenv("PROCTOR_DRILL_LOAD_MS"))
      load_for_ = std::chrono::milliseconds{std::max(100, std::atoi(ms))};
    fs::create_directories(ledger());
    auto certs = make_certs(certs_dir(), {"b/b1", "b/b2", "b/b3", "b/b4", "b/b5", "w1", "w2"});
    ASSERT_EQ(certs.exit_code, 0) << describe(certs);
    set_cli_tls(certs_dir() / "client.pem", certs_dir() / "client.key", certs_dir() / "ca.pem");
    w_ports_ = {free_port(), free_port()};
    std::string founding;
    for (int i = 1; i <= 3; ++i) {
      b_.push_back(replica{"b" + std::to_string(i), free_port(), free_port(), nullptr});
      founding += (i > 1 ? "," : "") + b_.back().spec();
    }
    for (auto& r : b_)
      r.proc = make_replica(r, founding, {});
    set_b_addresses();
    for (auto& r : b_)
      ASSERT_TRUE(r.proc->launch()) << r.proc->log_tail();
    for (int k = 0; k < 2; ++k) {
      w_[k] = make_w(k, w_dir(k), {});
      ASSERT_TRUE(w_[k]->start()) << w_[k]->log_tail();
    }
    ASSERT_GE(leader(), 0) << logs();
  }

  void TearDown() override {
    if (!load_.empty())
      stop_load();  // a drill that failed returned with the load running
    clear_cli_tls();
  }

  fs::path certs_dir() const { return dir_.path() / "certs"; }
  fs::path ledger() const { return dir_.path() / "ledger"; }
  fs::path w_dir(int k) const { return dir_.path() / ("w" + std::to_string(k + 1)); }

  std::vector<std::string> tls(std::vector<std::string> args, const std::string& who) const {
    args.push_back("--tls-cert");
    args.push_back((certs_dir() / (who + ".pem")).string());
    args.push_back("--tls-key");
    args.push_back((certs_dir() / (who + ".key")).string());
    args.push_back("--tls-ca");
    args.push_back((certs_dir() / "ca.pem").string());
    return args;
  }

  std::string w_address(int k) const { return "127.0.0.1:" + std::to_string(w_ports_[k]); }

  /// Node b as a peer: its replicas' client addresses, as they are now.
  std::string b_as_peer() const {
    std::string s = "b=";
    for (size_t i = 0; i < b_.size(); ++i)
      s += (i ? "|" : "") + b_[i].address();
    return s;
  }

  std::unique_ptr<node> make_replica(const replica& r, const std::string& group,
                                     std::vector<std::string> more) {
    std::vector<std::string> args{
      "--name",     "b",   "--replica", r.name,
      "--replicas", group, "--peers",   "w1=" + w_address(0) + ",w2=" + w_address(1)};
    args.insert(args.end(), more.begin(), more.end());
    return std::make_unique<node>(dir_.path() / r.name, r.port, tls(std::move(args), r.name));
  }

  /// Plain node w(k+1) on `data`, with b's addresses as they are now.
  std::unique_ptr<node> make_w(int k, const fs::path& data, std::vector<std::string> more) {
    const std::string self = "w" + std::to_string(k + 1);
    const int other = 1 - k;
    std::vector<std::string> args{"--name", self, "--peers",
                                  b_as_peer() + ",w" + std::to_string(other + 1) + "="
                                    + w_address(other)};
    args.insert(args.end(), more.begin(), more.end());
    return std::make_unique<node>(data, w_ports_[k], tls(std::move(args), self));
  }

  /// The CLI against node b by its replicas' addresses as they are now (the load's threads
  /// call it while a drill changes b_: they read the addresses set_b_addresses() wrote).
  run_result b_ctl(const std::vector<std::string>& args, std::chrono::milliseconds limit = 120s) {
    std::vector<std::string> v{"--node"};
    {
      std::lock_guard<std::mutex> g(b_addresses_mu_);
      v.push_back(b_addresses_);
    }
    v.insert(v.end(), args.begin(), args.end());
    return run_proctor(v, limit);
  }

  /// After a change of b_: the addresses b_ctl() uses.
  void set_b_addresses() {
    std::string all;
    for (size_t i = 0; i < b_.size(); ++i)
      all += (i ? "," : "") + b_[i].address();
    std::lock_guard<std::mutex> g(b_addresses_mu_);
    b_addresses_ = all;
  }

  /// The replica of b that serves, other than `skip`; -1 when none does within `limit`.
  int leader(std::chrono::milliseconds limit = 30s, int skip = -1) {
    int found = -1;
    eventually(
      [&] {
        for (int i = 0; i < static_cast<int>(b_.size()); ++i)
          if (i != skip && b_[i].proc->running()
              && b_[i].proc->ctl({"list", "--local", "--json"}, 10s).exit_code == 0)
            found = i;
        return found >= 0;
      },
      limit, 100ms);
    return found;
  }

  /// Every replica of b reachable from the leader and caught up (within 64 entries: the load
  /// goes on), within 60 s.
  bool group_whole() {
    return eventually(
      [&] {
        auto r = b_ctl({"replicas", "--json"}, 10s);
        auto v = parse_json(r.out);
        if (r.exit_code != 0 || !v)
          return false;
        const auto& members = field(*v, "replicas").list_value().values();
        return static_cast<size_t>(members.size()) == b_.size()
               && std::all_of(members.begin(), members.end(), [](const auto& m) {
                    return field(m, "reachable").bool_value()
                           && field(m, "lag").number_value() <= 64;
                  });
      },
      60s, 200ms);
  }

  /// Starts the load: trees spread over b, w1 and w2 from w1 (each node gets a child), and
  /// procedures submitted to b, each thread pausing 50 ms between submits.
  void start_load() {
    stop_ = false;
    const std::string ledger_arg = R"("ledger_dir":")" + ledger().string() + "\"}";
    load_.emplace_back([this, ledger_arg] {
      while (!stop_) {
        auto r = w_[0]->ctl({"submit", "demo.ledger", "--args-json",
                             R"({"steps":2,"children":3,"depth":1,"spread":true,)"
                             R"("step_sleep_ms":20,)"
                               + ledger_arg},
                            60s);
        if (auto id = parse_id(r.out); r.exit_code == 0 && id) {
          std::lock_guard<std::mutex> g(acked_.mu);
          acked_.trees.push_back(*id);
        }
        std::this_thread::sleep_for(50ms);
      }
    });
    load_.emplace_back([this, ledger_arg] {
      while (!stop_) {
        auto r = b_ctl({"submit", "demo.ledger", "--args-json",
                        R"({"steps":3,"step_sleep_ms":20,)" + ledger_arg},
                       60s);
        if (auto id = parse_id(r.out); r.exit_code == 0 && id) {
          std::lock_guard<std::mutex> g(acked_.mu);
          acked_.direct.push_back(*id);
        }
        std::this_thread::sleep_for(50ms);
      }
    });
  }

  void stop_load() {
    stop_ = true;
    for (auto& t : load_)
      t.join();
    load_.clear();
  }

  /// How many procedures the load had acknowledged: trees + direct.
  size_t acked_count() {
    std::lock_guard<std::mutex> g(acked_.mu);
    return acked_.trees.size() + acked_.direct.size();
  }

  /// Lets the load run `load_for_` and at least until it acknowledged `more` procedures more
  /// (within 120 s): each drill happens under work acknowledged since the last.
  void under_load(size_t more = 5) {
    const auto from = acked_count();
    std::this_thread::sleep_for(load_for_);
    EXPECT_TRUE(eventually([&] { return acked_count() >= from + more; }, 120s, 100ms))
      << "the load acknowledged nothing new\n"
      << logs();
  }

  /// A submit to w2 acknowledged: its id (0 if refused).
  uint64_t submit_to_w2() {
    auto r = w_[1]->ctl({"submit", "demo.ledger", "--args-json",
                         R"({"steps":1,"ledger_dir":")" + ledger().string() + "\"}"},
                        60s);
    EXPECT_EQ(r.exit_code, 0) << describe(r) << w_[1]->log_tail();
    return parse_id(r.out).value_or(0);
  }

  /// `node forget w2 --confirm-lost` on b and on w1, each retried until w2 is down there.
  void forget_w2() {
    for (int on = 0; on < 2; ++on) {
      run_result r;
      EXPECT_TRUE(eventually(
        [&] {
          std::vector<std::string> args{"node", "forget", "w2", "--confirm-lost"};
          r = on == 0 ? b_ctl(args, 30s) : w_[0]->ctl(args, 30s);
          return r.exit_code == 0;
        },
        60s, 500ms))
        << (on == 0 ? "b" : "w1") << ": " << describe(r);
    }
  }

  /// The ids of the roots node `n` lists (`list --local --json`) with their states.
  static std::map<uint64_t, std::string> states(const run_result& r) {
    std::map<uint64_t, std::string> out;
    if (auto v = parse_json(r.out))
      for (const auto& p : v->list_value().values())
        out[id_of(p)] = state_of(p);
    return out;
  }

  std::string logs() const {
    std::string s;
    for (const auto& r : b_)
      s += "--- " + r.name + "\n" + r.proc->log_tail(30);
    for (int k = 0; k < 2; ++k)
      if (w_[k])
        s += "--- w" + std::to_string(k + 1) + "\n" + w_[k]->log_tail(30);
    return s;
  }

  temp_dir dir_;
  std::vector<replica> b_;  ///< the main thread's only
  std::mutex b_addresses_mu_;
  std::string b_addresses_;
  std::array<uint16_t, 2> w_ports_{};
  std::array<std::unique_ptr<node>, 2> w_;
  std::chrono::milliseconds load_for_{3000};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> load_;
  acknowledged acked_;
};

}  // namespace proctor::test::drill
