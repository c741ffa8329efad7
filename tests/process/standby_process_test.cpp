// A node with a standby (docs/standby.md): node a, and node b as two proctord processes on
// one data directory, both started with --standby (the first to get the directory's lock is
// the active one, the other waits). a knows b by both addresses; clients name both.
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

using namespace std::chrono_literals;
using namespace proctor::test;
namespace fs = std::filesystem;

class standby : public ::testing::Test {
protected:
  void SetUp() override {
    fs::create_directories(ledger());
    port_a_ = free_port();
    ports_b_ = {free_port(), free_port()};
    a_ = std::make_unique<node>(
      dir_.path() / "a", port_a_,
      std::vector<std::string>{"--name", "a", "--peers", "b=" + b_addresses("|")});
    for (size_t i = 0; i < 2; ++i)
      b_[i] = make_b(i, {});
  }

  std::unique_ptr<node> make_b(size_t i, std::vector<std::string> extra) {
    std::vector<std::string> args{"--name", "b", "--standby", "--peers",
                                  "a=127.0.0.1:" + std::to_string(port_a_)};
    args.insert(args.end(), extra.begin(), extra.end());
    // Both on b's one data directory; each its own log.
    auto n = std::make_unique<node>(dir_.path() / "b", ports_b_[i], args);
    return n;
  }

  std::string b_addresses(const char* sep) const {
    return "127.0.0.1:" + std::to_string(ports_b_[0]) + sep
           + "127.0.0.1:" + std::to_string(ports_b_[1]);
  }

  /// The CLI against node b by both its addresses.
  run_result ctl_b(const std::vector<std::string>& args, std::chrono::milliseconds limit = 120s) {
    std::vector<std::string> all{"--node", b_addresses(",")};
    all.insert(all.end(), args.begin(), args.end());
    return run_proctor(all, limit);
  }

  /// Starts b[i] as the active one (the lock is free) and b[1-i] as its standby, and waits
  /// until the standby says it waits.
  void start_b(size_t active) {
    ASSERT_TRUE(b_[active]->start()) << b_[active]->log_tail();
    launch_standby(1 - active);
  }

  /// Starts b[i] and waits until it says it waits for the lock. Both b processes append to
  /// one log (beside the data directory they share): count the lines.
  void launch_standby(size_t i) {
    auto before = waiting_lines(i);
    ASSERT_TRUE(b_[i]->launch());
    ASSERT_TRUE(eventually([&] { return waiting_lines(i) > before; }, 30s, 50ms))
      << b_[i]->log_tail();
  }

  size_t waiting_lines(size_t i) const {
    auto text = b_[i]->log_tail(1'000'000);
    size_t n = 0;
    for (auto at = text.find("waiting for its lock"); at != std::string::npos;
         at = text.find("waiting for its lock", at + 1))
      ++n;
    return n;
  }

  fs::path ledger() const { return dir_.path() / "ledger"; }

  size_t ledger_files() const {
    size_t n = count_files(ledger());
    return fs::exists(ledger() / "undo.log") ? n - 1 : n;
  }

  std::string ledger_args(const std::string& extra) const {
    return R"({"ledger_dir":")" + ledger().string() + R"(")" + extra + "}";
  }

  uint64_t submit_b(const std::string& extra) {
    auto r = ctl_b({"submit", "demo.ledger", "--args-json", ledger_args(extra)}, 60s);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return parse_id(r.out).value_or(0);
  }

  /// States of every procedure node b lists (ids to state), empty if it does not answer.
  std::map<uint64_t, std::string> states_b() {
    std::map<uint64_t, std::string> out;
    auto r = ctl_b({"list", "--local", "--json"}, 60s);
    auto v = parse_json(r.out);
    if (r.exit_code != 0 || !v)
      return out;
    for (const auto& p : v->list_value().values())
      out[id_of(p)] = state_of(p);
    return out;
  }

  /// True once every id in `ids` is SUCCESS at b (within `limit`).
  bool all_succeed(const std::vector<uint64_t>& ids, std::chrono::milliseconds limit = 120s) {
    return eventually(
      [&] {
        auto s = states_b();
        for (auto id : ids)
          if (s[id] != "SUCCESS")
            return false;
        return true;
      },
      limit, 200ms);
  }

  /// The process of b that serves, by `nodes --json` (its pid), or -1.
  int64_t active_pid() {
    auto r = ctl_b({"nodes", "--json"}, 30s);
    auto v = parse_json(r.out);
    if (r.exit_code != 0 || !v)
      return -1;
    for (const auto& n : v->list_value().values()) {
      const auto& f = n.struct_value().fields();
      if (f.at("self").bool_value() && f.count("process") > 0)
        return static_cast<int64_t>(
          f.at("process").struct_value().fields().at("pid").number_value());
    }
    return -1;
  }

  /// How many ledger files each root has ("<root>: n" lines), for failure messages.
  std::string files_by_root() const {
    std::map<std::string, size_t> n;
    for (const auto& f : file_names(ledger()))
      ++n[f.substr(0, f.find('.'))];
    std::string out;
    for (const auto& [root, k] : n)
      if (k != 3)
        out += root + ": " + std::to_string(k) + "\n";
    return out;
  }

  temp_dir dir_;
  uint16_t port_a_ = 0;
  std::array<uint16_t, 2> ports_b_{};
  std::unique_ptr<node> a_;
  std::array<std::unique_ptr<node>, 2> b_;
};

TEST_F(standby, ten_takeovers_in_a_row_lose_nothing_and_a_wait_carries_on) {
  ASSERT_TRUE(a_->start()) << a_->log_tail();
  start_b(0);
  // 200 ledger procedures on b, and trees from a whose children run on b.
  std::vector<uint64_t> ids;
  for (int i = 0; i < 200; ++i)
    ids.push_back(submit_b(R"(,"steps":3,"step_sleep_ms":30)"));
  std::vector<uint64_t> trees;
  for (int i = 0; i < 4; ++i) {
    auto r = a_->ctl(
      {"submit", "demo.ledger", "--args-json",
       ledger_args(R"(,"steps":3,"children":4,"depth":1,"place_on":"b","step_sleep_ms":30)")},
      60s);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    trees.push_back(parse_id(r.out).value_or(0));
  }
  // A wait started before the first kill, for a procedure that waits for an event sent
  // after the last, ends with the procedure's exit code.
  auto r0 = ctl_b({"submit", "demo.wait_event", "--args-json", R"({"key":"after-ten"})"}, 60s);
  ASSERT_EQ(r0.exit_code, 0) << describe(r0);
  auto waiter = parse_id(r0.out).value_or(0);
  auto waiting = std::async(std::launch::async, [&] {
    return ctl_b({"wait", std::to_string(waiter), "--timeout-s", "300"}, 330s);
  });
  size_t active = 0;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("takeover " + std::to_string(round + 1));
    if (round > 0)  // more work in flight for every kill
      for (int i = 0; i < 10; ++i)
        ids.push_back(submit_b(R"(,"steps":3,"step_sleep_ms":30)"));
    EXPECT_EQ(active_pid(), b_[active]->pid());
    b_[active]->kill();
    size_t next = 1 - active;
    ASSERT_TRUE(b_[next]->wait_ready(60s)) << b_[next]->log_tail();
    EXPECT_NE(b_[next]->log_tail(200).find("took over"), std::string::npos) << b_[next]->log_tail();
    // The old active comes back as the new standby.
    launch_standby(active);
    active = next;
  }
  ASSERT_TRUE(all_succeed(ids)) << b_[active]->log_tail(40);
  for (auto t : trees) {
    auto r = a_->ctl({"wait", std::to_string(t), "--timeout-s", "120"}, 150s);
    EXPECT_EQ(r.exit_code, 0) << describe(r) << a_->log_tail();
  }
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout);
  auto ev = ctl_b({"event", "after-ten"}, 60s);
  EXPECT_EQ(ev.exit_code, 0) << describe(ev);
  auto w = waiting.get();
  EXPECT_EQ(w.exit_code, 0) << describe(w);
  // Every step exactly once: 3 per procedure, 3 + 4 * 3 per tree.
  EXPECT_EQ(ledger_files(), ids.size() * 3 + trees.size() * 15) << files_by_root();
  // nodes --json says which process serves, its epoch and its takeover.
  auto r = ctl_b({"nodes", "--json"}, 30s);
  auto v = parse_json(r.out);
  ASSERT_TRUE(v) << describe(r);
  bool found = false;
  for (const auto& n : v->list_value().values()) {
    const auto& f = n.struct_value().fields();
    if (!f.at("self").bool_value())
      continue;
    found = true;
    const auto& p = f.at("process").struct_value().fields();
    EXPECT_EQ(static_cast<int64_t>(p.at("pid").number_value()), b_[active]->pid());
    EXPECT_EQ(p.at("epoch").number_value(), 11.0);  // one start and ten takeovers
    EXPECT_GT(p.at("takeover_ms").number_value(), 0.0);
    std::cout << "[ info     ] last takeover: " << p.at("takeover_ms").number_value()
              << " ms (lock taken to serving)\n";
  }
  EXPECT_TRUE(found) << r.out;
}

TEST_F(standby, a_hung_active_on_this_host_is_killed_and_the_standby_takes_over) {
  b_[1] = make_b(1, {"--fence-after-ms", "1500"});
  ASSERT_TRUE(a_->start()) << a_->log_tail();
  start_b(0);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 20; ++i)
    ids.push_back(submit_b(R"(,"steps":3,"step_sleep_ms":50)"));
  ASSERT_EQ(::kill(b_[0]->pid(), SIGSTOP), 0);
  ASSERT_TRUE(b_[1]->wait_ready(60s)) << b_[1]->log_tail();
  EXPECT_NE(b_[1]->log_tail(100).find("killing it"), std::string::npos) << b_[1]->log_tail();
  ASSERT_TRUE(eventually([&] { return !b_[0]->running(); }, 10s));
  EXPECT_EQ(b_[0]->last_exit_code(), 128 + SIGKILL);
  EXPECT_TRUE(all_succeed(ids)) << b_[1]->log_tail(40);
  EXPECT_EQ(ledger_files(), ids.size() * 3);
}

TEST_F(standby, without_fencing_a_hung_active_keeps_its_lock_and_goes_on_when_woken) {
  ASSERT_TRUE(a_->start()) << a_->log_tail();
  start_b(0);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 20; ++i)
    ids.push_back(submit_b(R"(,"steps":3,"step_sleep_ms":50)"));
  ASSERT_EQ(::kill(b_[0]->pid(), SIGSTOP), 0);
  // The standby cannot take the lock of a process that lives: it keeps waiting, and does
  // not serve (nothing answers on its address).
  std::this_thread::sleep_for(3s);  // a span of time is what is tested here
  EXPECT_TRUE(b_[1]->running());
  auto r =
    run_proctor({"--node", "127.0.0.1:" + std::to_string(ports_b_[1]), "list", "--local"}, 30s);
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  ASSERT_EQ(::kill(b_[0]->pid(), SIGCONT), 0);
  EXPECT_TRUE(all_succeed(ids)) << b_[0]->log_tail(40);
  EXPECT_EQ(ledger_files(), ids.size() * 3);
  EXPECT_EQ(active_pid(), b_[0]->pid());
}

TEST_F(standby, an_active_whose_epoch_was_taken_exits_without_writing) {
  // b alone: its lock is broken behind its back (as a lapsed lease on a network file
  // system would), and another process's epoch written.
  ASSERT_TRUE(b_[0]->start()) << b_[0]->log_tail();
  auto first = submit_b(R"(,"steps":1)");
  ASSERT_TRUE(all_succeed({first}));
  ASSERT_EQ(::kill(b_[0]->pid(), SIGSTOP), 0);
  {
    int fd = ::open((dir_.path() / "b" / "ACTIVE.lock").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    unsigned char e[8] = {};
    ASSERT_EQ(::pread(fd, e, 8, 0), 8);
    e[0] = static_cast<unsigned char>(e[0] + 1);
    ASSERT_EQ(::pwrite(fd, e, 8, 0), 8);
    ::close(fd);
  }
  // A submit sent while it is stopped: it must not be journaled.
  auto late = std::async(std::launch::async, [&] {
    return run_proctor({"--node", b_[0]->address(), "submit", "demo.ledger", "--args-json",
                        ledger_args(R"(,"steps":1)"), "--nonce", "late"},
                       60s);
  });
  std::this_thread::sleep_for(300ms);  // let the request reach the stopped process's socket
  ASSERT_EQ(::kill(b_[0]->pid(), SIGCONT), 0);
  ASSERT_TRUE(eventually([&] { return !b_[0]->running(); }, 15s)) << b_[0]->log_tail();
  EXPECT_NE(b_[0]->last_exit_code(), 0);
  EXPECT_NE(b_[0]->log_tail(30).find("fenced"), std::string::npos) << b_[0]->log_tail();
  EXPECT_NE(late.get().exit_code, 0);
  // A new process gets the next epoch and finds only what was written before.
  ASSERT_TRUE(b_[0]->start()) << b_[0]->log_tail();
  auto s = states_b();
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s[first], "SUCCESS");
  EXPECT_EQ(ledger_files(), 1u);
}

// A standby started with another --name than its data directory's is refused at its start,
// while the active runs (it used to wait without a word and fail only when the active died,
// leaving the node with no process), and nothing of the directory changes.
// A standby killed while it waits cannot remove its RocksDB secondary's directory (under
// $TMPDIR): the next standby that starts removes it. Before, each such kill left one behind
// for good.
TEST_F(standby, a_killed_standbys_directory_is_removed_by_the_next_standby) {
  auto tmp = dir_.path() / "tmp";
  fs::create_directories(tmp);
  const char* had = std::getenv("TMPDIR");
  std::string before = had != nullptr ? had : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);  // (the processes the test starts inherit it)
  struct restore {
    std::string value;
    ~restore() {
      if (value.empty())
        ::unsetenv("TMPDIR");
      else
        ::setenv("TMPDIR", value.c_str(), 1);
    }
  } restore_tmpdir{before};
  auto left = [&] {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(tmp))
      if (e.path().filename().string().rfind("proctord-standby-", 0) == 0)
        out.push_back(e.path());
    return out;
  };
  ASSERT_TRUE(a_->start()) << a_->log_tail();
  start_b(0);
  ASSERT_TRUE(eventually([&] { return left().size() == 1; }, 30s)) << b_[1]->log_tail();
  auto first = left().front();
  b_[1]->kill();
  EXPECT_TRUE(fs::exists(first)) << "(a killed process removes nothing)";
  launch_standby(1);
  EXPECT_TRUE(eventually([&] { return !fs::exists(first) && left().size() == 1; }, 30s))
    << "left behind: " << first << "\n"
    << b_[1]->log_tail();
}

TEST(standby_checks, a_wrong_name_is_refused_at_start_not_at_takeover) {
  temp_dir dir;
  node active{dir.path() / "data", 0, {"--name", "n1"}};
  ASSERT_TRUE(active.start()) << active.log_tail();
  auto before = fs::last_write_time(dir.path() / "data" / "NODE");
  auto r = run_program(bin_path("proctord"),
                       {"--data-dir", (dir.path() / "data").string(), "--listen",
                        "127.0.0.1:" + std::to_string(free_port()), "--name", "n2", "--standby"},
                       60s);
  EXPECT_FALSE(r.timed_out) << "the standby waited instead of refusing its --name";
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("belongs to node 'n1', not 'n2'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("proctord: the data directory "), std::string::npos) << r.err;
  EXPECT_EQ(fs::last_write_time(dir.path() / "data" / "NODE"), before);
  EXPECT_TRUE(active.running());
  auto l = active.ctl({"list", "--json"});
  EXPECT_EQ(l.exit_code, 0) << l.err;
}

}  // namespace
