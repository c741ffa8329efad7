// A node run as a replica group (docs/replication.md): node b as three proctord processes,
// each with its own data directory, its journal replicated by Raft. Only the leader serves;
// the others refuse naming it, and the CLI given all three addresses finds it. The leader
// SIGKILLed, frozen (SIGSTOP) or lost with its disk: another replica is elected and carries
// every tree on from its own RocksDB; nothing acknowledged is lost.
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/replica_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using namespace proctor::test;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

TEST_F(replicas, a_follower_refuses_naming_the_leader_and_the_cli_finds_it) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  int f = (l + 1) % 3;
  // A follower learns who leads from the leader's first heartbeat: until then (a replica that
  // lost a split vote is still a candidate for up to a heartbeat) it says no leader is known.
  ASSERT_TRUE(names_leader(f, l)) << logs();
  auto r = b_[f]->ctl({"list"});
  EXPECT_NE(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.err.find("replica " + name(f) + " of node b is a follower; the leader is " + name(l)
                       + " at " + address(l)),
            std::string::npos)
    << describe(r);
  // `replicas`: the group as its leader sees it, asked of any replica.
  auto rep = b_[f]->ctl({"replicas", "--json"});
  ASSERT_EQ(rep.exit_code, 0) << describe(rep);
  auto v = parse_json(rep.out);
  ASSERT_TRUE(v) << rep.out;
  EXPECT_EQ(field(*v, "leader").string_value(), name(l)) << rep.out;
  EXPECT_EQ(field(*v, "replicas").list_value().values_size(), 3) << rep.out;
  auto table = ctl({"replicas"});
  EXPECT_EQ(table.exit_code, 0) << describe(table);
  EXPECT_NE(table.out.find(name(l) + "*"), std::string::npos) << table.out;  // the leader answered
  EXPECT_NE(table.out.find("follower"), std::string::npos) << table.out;
  // The leader's metrics hold the group's.
  auto m = ctl({"metrics"});
  EXPECT_EQ(m.exit_code, 0) << describe(m);
  EXPECT_NE(m.out.find("proctor_raft_term "), std::string::npos) << m.out;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NE(m.out.find("proctor_raft_replica_lag{replica=\"" + name(i) + "\"}"),
              std::string::npos)
      << m.out;
  // Given every address, the CLI goes to the leader whichever it asks first.
  auto id = submit("demo.ledger", R"({"steps":2,"ledger_dir":")" + ledger().string() + "\"}");
  EXPECT_EQ(waited(id), "SUCCESS") << logs();
  // A follower's copy of the journal holds it too: its RocksDB is warm.
  EXPECT_GE(count_files(ledger()), 2u);
  // Replication latency, once the leader wrote.
  m = ctl({"metrics"});
  EXPECT_NE(m.out.find("proctor_raft_commit_seconds_bucket{le=\"0.01\"}"), std::string::npos)
    << m.out;
  EXPECT_NE(m.out.find("proctor_raft_commit_seconds_count "), std::string::npos) << m.out;
  // `nodes`: this node's entry carries its group.
  auto nodes = ctl({"nodes", "--json"});
  ASSERT_EQ(nodes.exit_code, 0) << describe(nodes);
  EXPECT_NE(nodes.out.find("\"replicas\":{\"term\":"), std::string::npos) << nodes.out;
  EXPECT_NE(nodes.out.find("\"leader\":\"" + name(l) + "\""), std::string::npos) << nodes.out;
}

TEST_F(replicas, the_leaders_sigkill_loses_nothing_acknowledged_and_a_follower_carries_on) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  // Waiting procedures, timers due after the kill, and steps in flight.
  std::vector<std::string> waiters, timers, ledgers;
  for (int i = 0; i < 5; ++i)
    waiters.push_back(submit("demo.wait_event", R"({"key":"pay"})"));
  auto due = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch() + 4s)
               .count();
  for (int i = 0; i < 5; ++i)
    timers.push_back(submit("demo.timer", R"({"wake_at_ms":)" + std::to_string(due) + "}"));
  for (int i = 0; i < 3; ++i)
    ledgers.push_back(submit("demo.ledger", R"({"steps":6,"step_sleep_ms":200,"ledger_dir":")"
                                              + ledger().string() + "\"}"));
  ASSERT_EQ(state(waiters.back()), "WAITING") << logs();
  auto killed_at = clock_type::now();
  b_[l]->kill();
  int l2 = leader(30s, l);
  ASSERT_GE(l2, 0) << logs();
  std::printf("  failover: %.2f s from the SIGKILL to a new leader that serves\n",
              std::chrono::duration<double>(clock_type::now() - killed_at).count());
  // Everything acknowledged is there, and carries on.
  for (const auto& id : waiters)
    EXPECT_EQ(state(id), "WAITING") << id;
  auto ev = ctl({"event", "pay", "--payload-json", R"("ok")"});
  EXPECT_EQ(ev.exit_code, 0) << describe(ev);
  for (const auto& id : waiters)
    EXPECT_EQ(waited(id), "SUCCESS") << id << logs();
  for (const auto& id : timers)
    EXPECT_EQ(waited(id), "SUCCESS") << id << logs();
  for (const auto& id : ledgers)
    EXPECT_EQ(waited(id), "SUCCESS") << id << logs();
  // The killed replica restarts as a follower and names the new leader.
  ASSERT_TRUE(b_[l]->launch());
  EXPECT_TRUE(names_leader(l, l2)) << logs();
}

// An operator's limits are in the replicated journal: the next leader has them. Its rate's
// bucket starts full (tokens are not journaled: docs/flow-control.md), so one start goes,
// and the next is held back until the limits are cleared.
TEST_F(replicas, an_operators_limits_survive_the_leaders_sigkill) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  auto set = ctl({"limits", "set", "demo.noop", "--max-running", "2", "--rate", "1/1h"});
  ASSERT_EQ(set.exit_code, 0) << describe(set);
  auto first = submit("demo.noop", R"({"steps":2})");
  EXPECT_EQ(waited(first), "SUCCESS") << logs();
  b_[l]->kill();
  int l2 = leader(30s, l);
  ASSERT_GE(l2, 0) << logs();
  auto r = ctl({"limits", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto all = parse_json(r.out);
  ASSERT_TRUE(all && all->has_list_value()) << r.out;
  bool found = false;
  for (const auto& v : all->list_value().values()) {
    if (field(v, "type").string_value() != "demo.noop")
      continue;
    found = true;
    EXPECT_EQ(field(v, "source").string_value(), "operator") << r.out;
    EXPECT_EQ(field(v, "max_running").number_value(), 2) << r.out;
    EXPECT_EQ(field(v, "rate").number_value(), 1) << r.out;
    EXPECT_EQ(field(v, "per_ms").number_value(), 3'600'000) << r.out;
  }
  EXPECT_TRUE(found) << r.out;
  auto second = submit("demo.noop", R"({"steps":2})");
  EXPECT_EQ(waited(second), "SUCCESS") << logs();
  auto third = submit("demo.noop", R"({"steps":2})");
  EXPECT_TRUE(eventually(
    [&] {
      auto s = parse_json(ctl({"status", third}).out);
      return s && state_of(*s) == "RUNNABLE"
             && field(*s, "waiting_for").string_value().rfind("type rate demo.noop", 0) == 0;
    },
    30s))
    << logs();
  auto clear = ctl({"limits", "clear", "demo.noop"});
  ASSERT_EQ(clear.exit_code, 0) << describe(clear);
  EXPECT_EQ(waited(third), "SUCCESS") << logs();
}

// Only a leader acts: a frozen leader, woken, begins no step before it learns of the newer
// term (each ledger file has a line "<pid> <ms the step began>" per run of its step; the
// replica's Raft loop vouches for it only while it runs: raft_store::sure_to_lead). Procedures
// of many quick steps keep its workers busy when it freezes, with writes in flight that the
// others may have stored: answers it reads when it thaws would otherwise let it go on.
TEST_F(replicas, a_frozen_leader_is_replaced_and_begins_no_step_after_it_thaws) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  auto before = submit("demo.wait_event", R"({"key":"thaw"})");
  std::vector<std::string> busy;
  for (int i = 0; i < 8; ++i)
    busy.push_back(
      submit("demo.ledger", R"({"steps":300,"ledger_dir":")" + ledger().string() + "\"}"));
  ASSERT_TRUE(eventually([&] { return count_files(ledger()) >= 80; }, 30s)) << logs();
  const pid_t old = b_[l]->pid();
  int l2 = freeze_leader(l);
  ASSERT_GE(l2, 0) << logs();
  // Asked of the new leader alone: a frozen process's kernel still accepts connections, so a
  // client that tries it first waits out its reply timeout before it moves on.
  auto sub = b_[l2]->ctl({"submit", "demo.ledger", "--args-json",
                          R"({"steps":2,"ledger_dir":")" + ledger().string() + "\"}"});
  ASSERT_EQ(sub.exit_code, 0) << describe(sub);
  auto during = trim(sub.out);
  const auto thawed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  ASSERT_EQ(::kill(old, SIGCONT), 0);
  // The old leader learns of the newer term, re-executes itself and comes back a follower.
  EXPECT_TRUE(names_leader(l, l2)) << logs();
  const auto follower_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_NE(b_[l]->log_tail(1'000'000).find("re-executing as a follower"), std::string::npos)
    << b_[l]->log_tail();
  EXPECT_EQ(waited(during), "SUCCESS") << logs();
  for (const auto& id : busy)
    EXPECT_EQ(waited(id), "SUCCESS") << id << logs();
  EXPECT_EQ(ctl({"event", "thaw"}).exit_code, 0);
  EXPECT_EQ(waited(before), "SUCCESS") << logs();
  // Every step's file, and who began it when: none by the old leader between its thaw and
  // the moment it answered as a follower.
  size_t files = 0, by_old = 0, by_old_thawed = 0;
  std::string late;
  for (const auto& e : fs::directory_iterator(ledger())) {
    ++files;
    std::ifstream in(e.path());
    long long pid = 0, began = 0;
    while (in >> pid >> began) {
      if (pid != old)
        continue;
      ++by_old;
      if (began >= thawed_ms && began <= follower_ms) {
        ++by_old_thawed;
        late += e.path().filename().string() + " ";
      }
    }
  }
  std::printf("  %zu ledger files; %zu step runs by the frozen leader, %zu begun after it thawed\n",
              files, by_old, by_old_thawed);
  EXPECT_EQ(files, 8u * 300u + 2u);
  EXPECT_GT(by_old, 0u);
  EXPECT_EQ(by_old_thawed, 0u) << "begun by the old leader after it thawed: " << late << logs();
}

// A step under way on a frozen leader completes after the new leader undid it: the leader
// fence stops only steps that begin after the thaw. With a fencing token (ctx.fencing_token(),
// here demo.ledger's fence_dir), the resource refuses the late write: after the rollback on
// the new leader, and the old one's thaw, nothing of the aborted procedures is left. (Without
// the fence, the thawed leader's step wrote its ledger file after the rollback had ended.)
TEST_F(replicas, a_frozen_leaders_step_under_way_cannot_land_after_the_new_leader_undid_it) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  auto fences = dir_.path() / "fences";
  fs::create_directories(fences);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(submit("demo.ledger", R"({"steps":2,"step_sleep_ms":1500,"ledger_dir":")"
                                          + ledger().string() + R"(","fence_dir":")"
                                          + fences.string() + "\"}"));
  for (const auto& id : ids)
    ASSERT_EQ(state(id), "RUNNABLE") << logs();
  std::this_thread::sleep_for(300ms);  // their first steps under way (1.5 s each)
  ASSERT_EQ(count_files(ledger()), 0u);
  const pid_t old = b_[l]->pid();
  int l2 = freeze_leader(l);
  ASSERT_GE(l2, 0) << logs();
  // The new leader aborts them: each ends ROLLEDBACK, its steps undone, before the thaw.
  for (const auto& id : ids) {
    auto r = b_[l2]->ctl({"abort", id});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
  }
  for (const auto& id : ids) {
    auto r = b_[l2]->ctl({"wait", id, "--json", "--timeout-s", "60"});
    auto v = parse_json(r.out);
    EXPECT_EQ(v ? state_of(*v) : describe(r), "ROLLEDBACK") << logs();
  }
  ASSERT_EQ(::kill(old, SIGCONT), 0);
  // Thawed, its steps were long past their nap: each tries its write at once, then the
  // process learns of the newer term and re-executes as a follower.
  EXPECT_TRUE(names_leader(l, l2)) << logs();
  std::string left;
  for (const auto& e : fs::directory_iterator(ledger()))
    left += e.path().filename().string() + " ";
  EXPECT_EQ(count_files(ledger()), 0u) << "left after the rollback: " << left << logs();
  auto old_log = b_[l]->log_tail(1'000'000);
  std::printf("  the thawed leader's refused writes: %zu\n", [&] {
    size_t n = 0;
    for (auto p = old_log.find("fenced:"); p != std::string::npos;
         p = old_log.find("fenced:", p + 1))
      ++n;
    return n;
  }());
}

// A replica's disk wiped and the replica started again under its old name would have
// forgotten its term and vote, and could vote twice in a term. The group recorded the id of
// each member's data directory, so the wiped one is refused; removed, then started with
// --join on its new directory and added again, it is recorded anew and serves.
TEST_F(replicas, a_wiped_replica_under_its_old_name_is_refused_until_removed_and_added_again) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  auto recorded = [&](size_t i) {
    auto r = ctl({"replicas", "--json"});
    auto v = parse_json(r.out);
    if (!v)
      return std::string{};
    for (const auto& m : field(*v, "replicas").list_value().values())
      if (field(m, "name").string_value() == name(i))
        return field(m, "recorded_data_dir_id").string_value();
    return std::string{};
  };
  ASSERT_TRUE(eventually(
    [&] { return !recorded(0).empty() && !recorded(1).empty() && !recorded(2).empty(); }, 30s))
    << ctl({"replicas", "--json"}).out << logs();
  const int f = (l + 1) % 3;
  const auto old_id = recorded(f);
  // Its own answer names the same id.
  auto own = b_[f]->ctl({"replicas", "--json"});
  EXPECT_NE(own.out.find("\"data_dir_id\":\"" + old_id + "\""), std::string::npos) << own.out;

  b_[f]->kill();
  fs::remove_all(b_[f]->data_dir());
  b_[f]->launch();
  ASSERT_TRUE(eventually([&] { return !b_[f]->running(); }, 30s)) << b_[f]->log_tail();
  EXPECT_NE(b_[f]->last_exit_code(), 0);
  EXPECT_NE(b_[f]->log_tail().find("has no Raft state here, but its group knows it by another "
                                   "data directory (id "
                                   + old_id),
            std::string::npos)
    << b_[f]->log_tail();
  // The group carries on with two.
  auto id = submit("demo.ledger", R"({"steps":2,"ledger_dir":")" + ledger().string() + "\"}");
  EXPECT_EQ(waited(id), "SUCCESS") << logs();

  auto removed = ctl({"replicas", "remove", name(f)});
  ASSERT_EQ(removed.exit_code, 0) << describe(removed) << logs();
  std::string group_now, spec_f;
  for (size_t i = 0; i < 3; ++i) {
    auto spec = name(i) + "=" + address(i) + "/" + std::to_string(raft_ports_[i]);
    group_now += (i ? "," : "") + spec;
    if (static_cast<int>(i) == f)
      spec_f = spec;
  }
  fs::remove_all(b_[f]->data_dir());
  b_[f] = std::make_unique<node>(dir_.path() / name(f), ports_[f],
                                 std::vector<std::string>{"--name", "b", "--replica", name(f),
                                                          "--replicas", group_now, "--join"});
  ASSERT_TRUE(b_[f]->launch()) << b_[f]->log_tail();
  auto added = ctl({"replicas", "add", spec_f, "--timeout-s", "60"});
  ASSERT_EQ(added.exit_code, 0) << describe(added) << logs();
  EXPECT_TRUE(eventually(
    [&] {
      auto now = recorded(f);
      return !now.empty() && now != old_id;
    },
    30s))
    << ctl({"replicas", "--json"}).out << logs();
  EXPECT_TRUE(names_leader(f, l)) << logs();
}

// Node a (one process) places children on node b (three replicas): a knows b by all three
// addresses. The leader of b is SIGKILLed while the children run there; the new leader carries
// them on, and a's link and outbox find it by themselves.
TEST_F(replicas, a_peers_children_on_a_replicated_node_survive_its_leaders_sigkill) {
  auto port_a = free_port();
  node a{dir_.path() / "a",
         port_a,
         {"--name", "a", "--peers", "b=" + address(0) + "|" + address(1) + "|" + address(2)}};
  // b's replicas know a.
  for (size_t i = 0; i < 3; ++i) {
    auto args = replica_args(i);
    args.push_back("--peers");
    args.push_back("a=127.0.0.1:" + std::to_string(port_a));
    b_[i] = std::make_unique<node>(dir_.path() / name(i), ports_[i], std::move(args));
  }
  launch_all();
  ASSERT_TRUE(a.start()) << a.log_tail();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  auto r = a.ctl({"submit", "demo.ledger", "--args-json",
                  R"({"steps":3,"children":4,"depth":1,"spread":false,"place_on":"b",)"
                  R"("step_sleep_ms":300,"ledger_dir":")"
                    + ledger().string() + "\"}"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto id = trim(r.out);
  // The children run on b: its leader holds them.
  ASSERT_TRUE(eventually(
    [&] {
      auto t = a.ctl({"tree", id, "--json"}, 10s);
      return t.out.find("\"node\":\"b\"") != std::string::npos;
    },
    30s))
    << a.log_tail() << logs();
  b_[l]->kill();
  auto w = a.ctl({"wait", id, "--json", "--timeout-s", "90"});
  auto v = parse_json(w.out);
  ASSERT_TRUE(v) << describe(w) << a.log_tail() << logs();
  EXPECT_EQ(state_of(*v), "SUCCESS") << w.out << a.log_tail() << logs();
}

}  // namespace
