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

// The group lost its majority for good: two replicas' machines gone with their disks. The
// survivor, started once with --recover-group and itself alone in --replicas, is the group:
// everything acknowledged is there and carries on; a replacement then joins as usual.
TEST_F(replicas, a_group_that_lost_its_majority_is_recovered_on_its_survivor) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i)
    ids.push_back(submit("demo.wait_event", R"({"key":"majority"})"));
  const int s = l;  // the survivor: the leader's log is the longest
  for (int i = 0; i < 3; ++i)
    if (i != s) {
      b_[i]->kill();
      fs::remove_all(b_[i]->data_dir());
    }
  // Without a majority it serves nothing.
  EXPECT_TRUE(eventually([&] { return b_[s]->ctl({"list"}, 10s).exit_code != 0; }, 30s));
  b_[s]->kill();
  auto spec = [&](int i) {
    return name(i) + "=" + address(i) + "/" + std::to_string(raft_ports_[i]);
  };
  auto replica_args = [&](int i, const std::string& group) {
    return std::vector<std::string>{"--name", "b", "--replica", name(i), "--replicas", group};
  };
  // A replica that is not a member cannot be kept: refused, nothing changed.
  auto bad = replica_args(s, spec(s) + ",b9=127.0.0.1:" + std::to_string(free_port()) + "/"
                               + std::to_string(free_port()));
  bad.push_back("--recover-group");
  b_[s] = std::make_unique<node>(dir_.path() / name(s), ports_[s], bad);
  b_[s]->launch();
  ASSERT_TRUE(eventually([&] { return !b_[s]->running(); }, 30s)) << b_[s]->log_tail();
  EXPECT_NE(b_[s]->log_tail().find("--recover-group: b9 is not a member of node b's group"),
            std::string::npos)
    << b_[s]->log_tail();

  auto alone = replica_args(s, spec(s));
  alone.push_back("--recover-group");
  b_[s] = std::make_unique<node>(dir_.path() / name(s), ports_[s], alone);
  ASSERT_TRUE(b_[s]->launch()) << b_[s]->log_tail();
  ASSERT_TRUE(eventually(
    [&] {
      return b_[s]->ctl({"list", "--json"}, 10s).exit_code == 0;
    },
    30s))
    << b_[s]->log_tail();
  for (const auto& id : ids) {
    auto v = parse_json(b_[s]->ctl({"status", id, "--json"}).out);
    EXPECT_EQ(v ? state_of(*v) : "?", "WAITING") << id;
  }
  EXPECT_EQ(b_[s]->ctl({"event", "majority"}).exit_code, 0);
  for (const auto& id : ids) {
    auto v = parse_json(b_[s]->ctl({"wait", id, "--json", "--timeout-s", "60"}).out);
    EXPECT_EQ(v ? state_of(*v) : "?", "SUCCESS") << id << b_[s]->log_tail();
  }
  // The lost replicas' data directories are forgotten: a replacement under an old name joins.
  const int f = (s + 1) % 3;
  ASSERT_TRUE(eventually(
    [&] {
      return b_[s]->log_tail(1'000'000).find("forgot the data directory of " + name(f))
             != std::string::npos;
    },
    30s))
    << b_[s]->log_tail();
  auto join = replica_args(f, spec(s) + "," + spec(f));
  join.push_back("--join");
  b_[f] = std::make_unique<node>(dir_.path() / name(f), ports_[f], join);
  ASSERT_TRUE(b_[f]->launch()) << b_[f]->log_tail();
  auto added = b_[s]->ctl({"replicas", "add", spec(f), "--timeout-s", "60"});
  ASSERT_EQ(added.exit_code, 0) << describe(added) << b_[s]->log_tail() << b_[f]->log_tail();
  EXPECT_TRUE(names_leader(f, s)) << b_[f]->log_tail();
}

TEST_F(replicas, a_lost_machine_with_its_disk_loses_nothing_acknowledged) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i)
    ids.push_back(submit("demo.wait_event", R"({"key":"lost"})"));
  b_[l]->kill();
  fs::remove_all(b_[l]->data_dir());
  ASSERT_GE(leader(30s, l), 0) << logs();
  EXPECT_EQ(ctl({"event", "lost"}).exit_code, 0);
  for (const auto& id : ids)
    EXPECT_EQ(waited(id), "SUCCESS") << id << logs();
}

// The leader SIGKILLed again and again (PROCTOR_ROUNDS times, 3 by default) at seeded random
// moments while a client submits without pause; each killed replica is started again. Every
// submit that was acknowledged ends SUCCESS with exactly its steps' ledger files.
TEST_F(replicas, repeated_leader_kills_under_load_lose_no_acknowledged_submit) {
  int rounds = 3;
  if (const char* r = std::getenv("PROCTOR_ROUNDS"))
    rounds = std::max(1, std::atoi(r));
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("PROCTOR_SEED"))
    seed = std::strtoull(s, nullptr, 10);
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  launch_all();
  ASSERT_GE(leader(), 0) << logs();
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> acked;
  size_t unacked = 0;
  std::thread client([&] {
    while (!stop) {
      auto r = ctl({"submit", "demo.ledger", "--args-json",
                    R"({"steps":3,"step_sleep_ms":20,"ledger_dir":")" + ledger().string() + "\"}"},
                   60s);
      std::lock_guard<std::mutex> g(mu);
      if (r.exit_code == 0)
        acked.push_back(trim(r.out));
      else
        ++unacked;
    }
  });
  for (int round = 0; round < rounds; ++round) {
    int l = leader();
    if (l < 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{200 + rng() % 800});
    b_[l]->kill();
    if (leader(30s, l) < 0)
      break;
    ASSERT_TRUE(b_[l]->launch());
  }
  stop = true;
  client.join();
  ASSERT_GE(leader(), 0) << logs();
  std::printf("  %d leader kills, %zu submits acknowledged, %zu not\n", rounds, acked.size(),
              unacked);
  EXPECT_GT(acked.size(), 0u);
  for (const auto& id : acked)
    EXPECT_EQ(waited(id), "SUCCESS") << id << logs();
  auto files = file_names(ledger());
  for (const auto& id : acked) {
    for (int s = 0; s < 3; ++s)
      EXPECT_EQ(files.count(id + "." + id + "." + std::to_string(s)), 1u)
        << "procedure " << id << " step " << s;
  }
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

// Seeded random kills and freezes of node b's replicas (the leader or a follower; SIGKILL, or
// SIGSTOP for 1-3 s) while node a submits trees with children on b and a client submits to b
// directly (PROCTOR_ROUNDS rounds, 3 by default; PROCTOR_SEED replays). Every tree and
// procedure acknowledged ends SUCCESS with exactly its steps' ledger files, none undone.
TEST_F(replicas, random_kills_and_freezes_of_replicas_during_trees_across_nodes) {
  // One round by default (about 30 s); PROCTOR_ROUNDS=N runs N, PROCTOR_SEED replays the
  // kills (not the timing). It once found a tree stuck WAITING (docs/replication.md, "Tests").
  int rounds = 1;
  if (const char* r = std::getenv("PROCTOR_ROUNDS"))
    rounds = std::max(1, std::atoi(r));
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("PROCTOR_SEED"))
    seed = std::strtoull(s, nullptr, 10);
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  std::printf("  PROCTOR_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  // Half the seeds run everything over mutual TLS, the Raft ports included
  // (replication/raft_tls_transport.hpp): its tunnels then live through the kills and freezes.
  const bool tls = rng() % 2 == 0;
  std::printf("  %s\n", tls ? "with TLS" : "without TLS");
  if (tls) {
    std::string why;
    ASSERT_TRUE(use_tls({"a", "b/b1", "b/b2", "b/b3"}, &why)) << why;
  }
  auto with_tls = [&](std::vector<std::string> args, const std::string& who) {
    if (tls)
      for (auto& x : tls_args(who))
        args.push_back(x);
    return args;
  };
  auto port_a = free_port();
  node a{
    dir_.path() / "a", port_a,
    with_tls({"--name", "a", "--peers", "b=" + address(0) + "|" + address(1) + "|" + address(2)},
             "a")};
  for (size_t i = 0; i < 3; ++i) {
    auto args = replica_args(i);
    args.push_back("--peers");
    args.push_back("a=127.0.0.1:" + std::to_string(port_a));
    b_[i] = std::make_unique<node>(dir_.path() / name(i), ports_[i], with_tls(args, name(i)));
  }
  launch_all();
  ASSERT_TRUE(a.start()) << a.log_tail();
  ASSERT_GE(leader(), 0) << logs();

  load running{*this, a};
  for (int round = 0; round < rounds; ++round) {
    int l = leader();
    ASSERT_GE(l, 0) << logs();
    std::this_thread::sleep_for(std::chrono::milliseconds{300 + rng() % 1200});
    const bool at_leader = rng() % 2 == 0;
    const int victim = at_leader ? l : (l + 1 + static_cast<int>(rng() % 2)) % 3;
    const bool freeze = rng() % 2 == 0;
    std::printf("  round %d: %s %s %s\n", round, freeze ? "SIGSTOP" : "SIGKILL",
                at_leader ? "the leader" : "a follower", name(victim).c_str());
    if (freeze) {
      ASSERT_EQ(::kill(b_[victim]->pid(), SIGSTOP), 0);
      if (at_leader) {
        EXPECT_GE(leader(30s, victim), 0) << logs();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{1000 + rng() % 2000});
      ASSERT_EQ(::kill(b_[victim]->pid(), SIGCONT), 0);
    } else {
      b_[victim]->kill();
      if (at_leader) {
        EXPECT_GE(leader(30s, victim), 0) << logs();
      }
      ASSERT_TRUE(b_[victim]->launch());
    }
  }
  const auto ids = running.stop();
  const auto& trees = ids.first;
  const auto& direct = ids.second;
  ASSERT_GE(leader(), 0) << logs();
  std::printf("  %zu trees from a, %zu procedures on b acknowledged\n", trees.size(),
              direct.size());
  EXPECT_GT(trees.size(), 0u);
  EXPECT_GT(direct.size(), 0u);
  for (const auto& id : trees) {
    auto w = a.ctl({"wait", id, "--json", "--timeout-s", "90"});
    auto v = parse_json(w.out);
    EXPECT_EQ(v ? state_of(*v) : describe(w), "SUCCESS")
      << "tree " << id << "\n"
      << a.ctl({"tree", id}).out << a.ctl({"history", id}).out << a.ctl({"nodes", "--json"}).out
      << "\n--- a\n"
      << a.log_tail(60) << logs();
  }
  for (const auto& id : direct)
    EXPECT_EQ(waited(id), "SUCCESS") << id;
  auto files = file_names(ledger());
  auto count_of = [&](const std::string& root) {
    size_t n = 0;
    for (const auto& f : files)
      n += f.rfind(root + ".", 0) == 0 ? 1 : 0;
    return n;
  };
  for (const auto& id : trees)  // the root's 3 steps and each of its 2 children's 3
    EXPECT_EQ(count_of(id), 9u) << "tree " << id;
  for (const auto& id : direct)
    EXPECT_EQ(count_of(id), 3u) << "procedure " << id;
  for (const auto& f : files)
    EXPECT_EQ(f.find("undo"), std::string::npos) << f;
  // Node a sees b's group, as b's leader said in its last heartbeat answer.
  EXPECT_TRUE(eventually(
    [&] {
      auto n = a.ctl({"nodes", "--json"}, 10s);
      return n.out.find("\"members\":[{\"name\":\"b") != std::string::npos;
    },
    10s))
    << a.ctl({"nodes", "--json"}).out;
}

}  // namespace

// Replacing a lost machine (docs/replication.md, "Replacing a machine"): the leader is
// SIGKILLed and its directory deleted; it is removed from the group, and a fresh replica b4,
// started with --join, is added: it catches up (a snapshot, then the log) as a standby and
// then votes. The two old replicas left are then SIGKILLed one at a time (each restarted
// before the next): nothing acknowledged is lost, and the group goes on with b4 in it. An old
// replica started again with its old --replicas is refused (the log's membership differs),
// as is a data directory started as another replica.
TEST_F(replicas, a_lost_machine_is_replaced_by_a_new_replica_that_catches_up) {
  launch_all();
  int l = leader();
  ASSERT_GE(l, 0) << logs();
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i)
    ids.push_back(submit("demo.wait_event", R"({"key":"swap"})"));
  b_[l]->kill();
  fs::remove_all(b_[l]->data_dir());
  int l2 = leader(30s, l);
  ASSERT_GE(l2, 0) << logs();

  auto removed = ctl({"replicas", "remove", name(l)});
  ASSERT_EQ(removed.exit_code, 0) << describe(removed) << logs();
  EXPECT_NE(removed.out.find("replica " + name(l) + ": removed"), std::string::npos) << removed.out;
  auto again = ctl({"replicas", "remove", name(l)});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("no replica " + name(l)), std::string::npos) << describe(again);

  // b4: a new machine. Its --replicas is the group as it is now, with itself.
  uint16_t port4 = free_port(), raft4 = free_port();
  const std::string spec4 = "b4=127.0.0.1:" + std::to_string(port4) + "/" + std::to_string(raft4);
  std::string group_now;
  std::vector<int> old;
  for (int i = 0; i < 3; ++i)
    if (i != l) {
      old.push_back(i);
      group_now += name(i) + "=" + address(i) + "/" + std::to_string(raft_ports_[i]) + ",";
    }
  group_now += spec4;
  auto replica_args = [&](const std::string& who) {
    return std::vector<std::string>{"--name", "b", "--replica", who, "--replicas", group_now};
  };
  auto join_args = replica_args("b4");
  join_args.push_back("--join");
  // Added before its process runs: refused at once, saying so, not after the whole catch-up
  // timeout (issue 47.6); nothing changed.
  auto early = clock_type::now();
  auto not_there = ctl({"replicas", "add", spec4, "--timeout-s", "60"});
  EXPECT_EQ(not_there.exit_code, 1) << describe(not_there);
  EXPECT_NE(not_there.err.find("replica b4 does not answer"), std::string::npos)
    << describe(not_there);
  EXPECT_LT(clock_type::now() - early, 30s);  // (it gives a process starting 10 s)
  node b4(dir_.path() / "b4", port4, join_args);
  ASSERT_TRUE(b4.launch()) << b4.log_tail();
  // Until it is added, b4 is in no group: it serves nothing.
  EXPECT_NE(b4.ctl({"list"}, 10s).exit_code, 0);
  auto t0 = clock_type::now();
  auto added = ctl({"replicas", "add", spec4, "--timeout-s", "60"});
  ASSERT_EQ(added.exit_code, 0) << describe(added) << logs() << b4.log_tail(40);
  std::printf(
    "[ info ] b4 added (caught up and voting) in %lld ms: %s",
    static_cast<long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count()),
    added.out.c_str());
  EXPECT_NE(added.out.find("replica b4"), std::string::npos) << added.out;
  // Both changes are in the node's audit trail, with who asked and their outcomes (the
  // refused ones too: an act done, answered no).
  auto audit = ctl({"audit", "--json"});
  ASSERT_EQ(audit.exit_code, 0) << describe(audit);
  EXPECT_NE(audit.out.find("remove: \\\"" + name(l) + "\\\""), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("add: \\\"" + spec4), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("\"outcome\":\"ok\""), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("anyone (no TLS)"), std::string::npos) << audit.out;
  // The leader's log names the replicas by name, not only by their Raft ids.
  EXPECT_NE(b_[l2]->log_tail(1'000'000).find("raft replica " + name(l2) + " (#"), std::string::npos)
    << b_[l2]->log_tail(40);
  EXPECT_NE(b_[l2]->log_tail(1'000'000).find(": member b4 (#"), std::string::npos)
    << b_[l2]->log_tail(40);
  auto json = ctl({"replicas", "--json"});
  ASSERT_EQ(json.exit_code, 0) << describe(json);
  EXPECT_NE(json.out.find("\"name\":\"b4\""), std::string::npos) << json.out;
  EXPECT_EQ(json.out.find("\"name\":\"" + name(l) + "\""), std::string::npos) << json.out;

  // Every address of the group now, for the CLI.
  auto ctl4 = [&](const std::vector<std::string>& args) {
    std::vector<std::string> all{"--node", address(old[0]) + "," + address(old[1]) + ","
                                             + "127.0.0.1:" + std::to_string(port4)};
    all.insert(all.end(), args.begin(), args.end());
    return run_proctor(all, 120s);
  };
  for (int i = 0; i < 5; ++i) {
    auto r = ctl4({"submit", "demo.wait_event", "--args-json", R"({"key":"swap"})"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    ids.push_back(trim(r.out));
  }

  // The old replicas, one at a time: killed, then restarted with their old command line.
  std::vector<node*> restarted;
  for (int i : old) {
    b_[i]->kill();
    eventually([&] { return ctl4({"list", "--json"}).exit_code == 0; }, 30s, 100ms);
    for (const auto& id : ids) {
      auto r = ctl4({"status", id, "--json"});
      auto v = parse_json(r.out);
      EXPECT_EQ(v ? state_of(*v) : describe(r), "WAITING") << id;
    }
    // Its old command line (a configuration file nobody edited) still names the removed
    // replica: it starts all the same, on the group's membership in its data directory
    // (issue 47.8: before, it was refused until --replicas was edited).
    ASSERT_TRUE(b_[i]->launch());
    restarted.push_back(b_[i].get());
    ASSERT_TRUE(eventually(
      [&] {
        return b_[i]->log_tail(40).find("--replicas only founds a group") != std::string::npos;
      },
      30s))
      << b_[i]->log_tail(40);
    ASSERT_TRUE(b_[i]->running()) << b_[i]->log_tail();
    // Caught up again before the next one goes (a majority of three must stay).
    ASSERT_TRUE(eventually(
      [&] {
        auto r = ctl4({"replicas", "--json"});
        return r.exit_code == 0 && r.out.find("\"reachable\":false") == std::string::npos;
      },
      30s))
      << ctl4({"replicas"}).out;
  }
  // A data directory is its replica's own.
  node wrong(b_[old[0]]->data_dir(), ports_[old[1]], replica_args(name(old[1])));
  restarted[0]->kill();
  ASSERT_TRUE(wrong.launch());
  ASSERT_TRUE(eventually([&] { return !wrong.running(); }, 30s));
  EXPECT_NE(wrong.log_tail(5).find("belongs to replica " + name(old[0])), std::string::npos)
    << wrong.log_tail(5);
  ASSERT_TRUE(restarted[0]->launch());

  // Once b4, at its new address, leads, a client that knows only the group's old addresses
  // follows the followers' hint to it (before, it gave up: "connection refused" from the
  // removed replica's address, the hint to an address it did not know ignored).
  auto leader_name = [&] {
    auto v = parse_json(ctl4({"replicas", "--json"}).out);
    return v ? field(*v, "leader").string_value() : std::string{};
  };
  for (int round = 0; round < 6; ++round) {
    std::string who;
    ASSERT_TRUE(eventually([&] { return !(who = leader_name()).empty(); }, 30s));
    if (who == "b4")
      break;
    for (size_t k = 0; k < old.size(); ++k)
      if (name(old[k]) == who) {
        restarted[k]->kill();  // b4 or the other takes over; then it comes back
        ASSERT_TRUE(eventually(
          [&] {
            auto w = leader_name();
            return !w.empty() && w != who;
          },
          30s));
        ASSERT_TRUE(restarted[k]->launch()) << restarted[k]->log_tail();
      }
  }
  if (leader_name() == "b4") {
    auto via_old = ctl({"list", "--json"});
    EXPECT_EQ(via_old.exit_code, 0) << describe(via_old);
  } else {
    std::printf("[ info ] b4 was not elected in six rounds: the old addresses' test skipped\n");
  }

  auto ev = ctl4({"event", "swap"});
  EXPECT_EQ(ev.exit_code, 0) << describe(ev);
  for (const auto& id : ids) {
    auto r = ctl4({"wait", id, "--json", "--timeout-s", "60"});
    auto v = parse_json(r.out);
    EXPECT_EQ(v ? state_of(*v) : describe(r), "SUCCESS") << id;
  }
}
