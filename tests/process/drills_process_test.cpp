// The operator's drills in one sequence (issue 47, "Done when"; docs/operations.md, "Drills"):
// node b as three replicas and plain nodes w1 and w2, every process and the CLI on mutual TLS,
// with load all along (trees spread over the three nodes from w1, procedures submitted to b).
// One after another: b's leader SIGKILLed, b's leader frozen, a follower's machine lost (its
// wiped directory started again under its name: refused) and replaced at a new address, b's
// majority lost and recovered on its survivor (plus a new replica), w2 lost with its disk and
// forgotten, w2 started empty under its name, a backup of w2 taken online and restored. Then: every procedure b acknowledged ended SUCCESS with each of
// its steps' ledger files (b lost nothing through four drills); every tree ended; no
// procedure id was handed out twice (every ledger file names its root and its procedure: no
// id under two roots, no root id twice); w2's new incarnation and its restored backup handed
// out ids above every id w2 had handed out before.
//
// scripts/drills.sh runs it alone (PROCTOR_DRILL_LOAD_MS sets how long the load runs between
// drills).

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

namespace {

using namespace std::chrono_literals;
using namespace proctor::test;
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

bool final_state(const std::string& s) {
  return s == "SUCCESS" || s == "ROLLEDBACK" || s == "FAILED";
}

TEST_F(drills, an_operators_drills_under_load_lose_nothing_acknowledged_and_repeat_no_id) {
  start_load();
  under_load();

  // 1. b's leader SIGKILLed: another takes over; the killed one comes back and catches up.
  {
    std::printf("[ drill ] SIGKILL b's leader\n");
    int l = leader();
    ASSERT_GE(l, 0) << logs();
    b_[l].proc->kill();
    ASSERT_GE(leader(30s, l), 0) << logs();
    ASSERT_TRUE(b_[l].proc->launch()) << b_[l].proc->log_tail();
    ASSERT_TRUE(group_whole()) << b_ctl({"replicas"}).out << logs();
    under_load();
  }
  // 2. b's leader frozen (SIGSTOP) for 3 s: replaced; thawed, it follows.
  {
    std::printf("[ drill ] SIGSTOP b's leader\n");
    int l = leader();
    ASSERT_GE(l, 0) << logs();
    ASSERT_EQ(::kill(b_[l].proc->pid(), SIGSTOP), 0);
    int l2 = leader(30s, l);
    std::this_thread::sleep_for(3s);
    ASSERT_EQ(::kill(b_[l].proc->pid(), SIGCONT), 0);
    ASSERT_GE(l2, 0) << logs();
    ASSERT_TRUE(group_whole()) << b_ctl({"replicas"}).out << logs();
    under_load();
  }
  // 3. A follower's machine lost with its disk; replaced by b4 at a new address.
  {
    std::printf("[ drill ] a follower of b lost for good, replaced at a new address\n");
    int l = leader();
    ASSERT_GE(l, 0) << logs();
    const int f = (l + 1) % 3;
    b_[f].proc->kill();
    fs::remove_all(b_[f].proc->data_dir());
    // The operator's mistake first: the wiped machine started again under its old name. It
    // forgot its Raft term and vote, so it is refused, and the group goes on.
    ASSERT_TRUE(b_[f].proc->launch());
    ASSERT_TRUE(eventually([&] { return !b_[f].proc->running(); }, 30s)) << b_[f].proc->log_tail();
    EXPECT_EQ(b_[f].proc->last_exit_code(), 1);
    EXPECT_NE(b_[f].proc->log_tail().find("its group knows it by another data directory"),
              std::string::npos)
      << b_[f].proc->log_tail();
    auto removed = b_ctl({"replicas", "remove", b_[f].name});
    ASSERT_EQ(removed.exit_code, 0) << describe(removed) << logs();
    replica b4{"b4", free_port(), free_port(), nullptr};
    std::string group;
    for (int i = 0; i < 3; ++i)
      if (i != f)
        group += b_[i].spec() + ",";
    b4.proc = make_replica(b4, group + b4.spec(), {"--join"});
    ASSERT_TRUE(b4.proc->launch()) << b4.proc->log_tail();
    auto added = b_ctl({"replicas", "add", b4.spec(), "--timeout-s", "60"});
    ASSERT_EQ(added.exit_code, 0) << describe(added) << logs() << b4.proc->log_tail();
    b_.erase(b_.begin() + f);
    b_.push_back(std::move(b4));
    set_b_addresses();
    ASSERT_TRUE(group_whole()) << b_ctl({"replicas"}).out << logs();
    under_load();
  }
  // 4. b's majority lost (two replicas with their disks): the survivor with the longest log
  // (the leader) is made the group (--recover-group), and a new replica b5 joins it.
  {
    std::printf("[ drill ] b's majority lost, recovered on its survivor\n");
    int s = leader();
    ASSERT_GE(s, 0) << logs();
    for (int i = 0; i < 3; ++i)
      if (i != s) {
        b_[i].proc->kill();
        fs::remove_all(b_[i].proc->data_dir());
      }
    EXPECT_TRUE(eventually(
      [&] {
        return b_[s].proc->ctl({"list", "--local", "--json"}, 10s).exit_code != 0;
      },
      30s));
    b_[s].proc->kill();
    replica survivor = std::move(b_[s]);
    b_.clear();
    survivor.proc = make_replica(survivor, survivor.spec(), {"--recover-group"});
    ASSERT_TRUE(survivor.proc->launch()) << survivor.proc->log_tail();
    b_.push_back(std::move(survivor));
    set_b_addresses();
    ASSERT_EQ(leader(60s), 0) << logs();
    replica b5{"b5", free_port(), free_port(), nullptr};
    b5.proc = make_replica(b5, b_[0].spec() + "," + b5.spec(), {"--join"});
    ASSERT_TRUE(b5.proc->launch()) << b5.proc->log_tail();
    run_result added;
    // The survivor forgets the lost replicas' data directories first; until then an add may
    // be refused, changing nothing.
    ASSERT_TRUE(eventually(
      [&] {
        added = b_ctl({"replicas", "add", b5.spec(), "--timeout-s", "60"});
        return added.exit_code == 0;
      },
      120s, 1s))
      << describe(added) << logs() << b5.proc->log_tail();
    b_.push_back(std::move(b5));
    set_b_addresses();
    ASSERT_TRUE(group_whole()) << b_ctl({"replicas"}).out << logs();
    under_load();
  }
  // 5. w2 lost with its disk: forgotten on b and w1, then started empty under its name (a new
  // incarnation), its ids above every id its old incarnation handed out.
  uint64_t w2_old = submit_to_w2();
  uint64_t w2_new = 0;
  {
    std::printf("[ drill ] w2 lost with its disk, forgotten, started empty\n");
    w_[1]->kill();
    fs::remove_all(w_dir(1));
    forget_w2();
    w_[1] = make_w(1, w_dir(1), {});
    ASSERT_TRUE(w_[1]->start()) << w_[1]->log_tail();
    w2_new = submit_to_w2();
    EXPECT_GT(w2_new, w2_old);
    under_load();
  }
  stop_load();

  // Every tree ends (trees with a child on w2's old incarnation fail and undo the rest).
  std::map<uint64_t, std::string> tree_states, direct_states;
  auto all_ended = [](const std::vector<uint64_t>& ids, const std::map<uint64_t, std::string>& m) {
    return std::all_of(ids.begin(), ids.end(), [&](uint64_t id) {
      auto it = m.find(id);
      return it != m.end() && final_state(it->second);
    });
  };
  EXPECT_TRUE(eventually(
    [&] {
      tree_states = states(w_[0]->ctl({"list", "--local", "--json"}, 30s));
      direct_states = states(b_ctl({"list", "--local", "--json"}, 30s));
      return all_ended(acked_.trees, tree_states) && all_ended(acked_.direct, direct_states);
    },
    180s, 1s))
    << logs();

  // 6. An online backup of w2, work acknowledged after it, w2 lost, forgotten and restored
  // from the backup: a new incarnation with ids above everything w2 handed out.
  {
    std::printf("[ drill ] w2 backed up online, lost, forgotten, restored\n");
    const auto backup = (dir_.path() / "w2-backup").string();
    auto b = w_[1]->ctl({"backup", backup}, 60s);
    ASSERT_EQ(b.exit_code, 0) << describe(b) << w_[1]->log_tail();
    uint64_t after = submit_to_w2();
    ASSERT_GT(after, w2_new);
    w_[1]->kill();
    forget_w2();
    w_[1] = make_w(1, dir_.path() / "w2-restored", {"--restore-from", backup});
    ASSERT_TRUE(w_[1]->start()) << w_[1]->log_tail();
    auto gone = w_[1]->ctl({"status", std::to_string(after)}, 30s);
    EXPECT_EQ(gone.exit_code, 1) << describe(gone);
    auto kept = w_[1]->ctl({"status", std::to_string(w2_new), "--json"}, 30s);
    auto v = parse_json(kept.out);
    EXPECT_EQ(v ? state_of(*v) : describe(kept), "SUCCESS");
    EXPECT_GT(submit_to_w2(), after);
    // The restored w2 takes part: a tree from w1 spread over the three nodes succeeds.
    auto t = w_[0]->ctl({"submit", "demo.ledger", "--args-json",
                         R"({"steps":2,"children":3,"depth":1,"spread":true,"ledger_dir":")"
                           + ledger().string() + "\"}"},
                        60s);
    ASSERT_EQ(t.exit_code, 0) << describe(t);
    auto w = w_[0]->ctl({"wait", trim(t.out), "--json", "--timeout-s", "60"}, 90s);
    auto tv = parse_json(w.out);
    EXPECT_EQ(tv ? state_of(*tv) : describe(w), "SUCCESS") << logs();
  }

  // b lost nothing it acknowledged: every procedure ended SUCCESS with its three steps.
  std::printf("[ info ] %zu trees from w1, %zu procedures on b acknowledged\n", acked_.trees.size(),
              acked_.direct.size());
  EXPECT_GT(acked_.trees.size(), 0u);
  EXPECT_GT(acked_.direct.size(), 0u);
  std::map<uint64_t, std::set<std::string>> steps_of;  // root -> "id.step"
  std::map<uint64_t, uint64_t> root_of;                // procedure id -> its root
  for (const auto& f : file_names(ledger())) {
    auto a = f.find('.');
    auto b = f.find('.', a + 1);
    if (a == std::string::npos || b == std::string::npos)
      continue;  // undo.log
    const uint64_t root = std::stoull(f.substr(0, a));
    const uint64_t id = std::stoull(f.substr(a + 1, b - a - 1));
    steps_of[root].insert(f.substr(a + 1));
    auto [it, fresh] = root_of.emplace(id, root);
    EXPECT_TRUE(fresh || it->second == root)
      << "id " << id << " was handed out twice: under roots " << it->second << " and " << root;
  }
  size_t succeeded = 0;
  for (auto id : acked_.direct) {
    EXPECT_EQ(direct_states[id], "SUCCESS") << "procedure " << id << " on b";
    EXPECT_EQ(steps_of[id].size(), 3u) << "procedure " << id << " on b";
  }
  for (auto id : acked_.trees) {
    if (tree_states[id] == "SUCCESS") {
      ++succeeded;
      EXPECT_EQ(steps_of[id].size(), 8u) << "tree " << id;  // 2 steps + 3 children × 2
    }
  }
  std::printf("[ info ] %zu of the trees succeeded (the others had a part on w2's lost "
              "incarnation)\n",
              succeeded);
  // No root id twice, across b, w1 and w2's three incarnations.
  std::set<uint64_t> roots(acked_.trees.begin(), acked_.trees.end());
  roots.insert(acked_.direct.begin(), acked_.direct.end());
  EXPECT_EQ(roots.size(), acked_.trees.size() + acked_.direct.size());
}

}  // namespace
