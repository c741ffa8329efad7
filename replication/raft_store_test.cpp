// raft_store: three replicas in this process on 127.0.0.1, each on its own data directory on
// a disk file system (raft_test_group.hpp). Waits are on conditions, bounded; nothing sleeps a
// fixed time to let something happen.
#include "replication/raft_store.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "replication/journal_replica_db.hpp"
#include "replication/raft_codec.hpp"
#include "replication/raft_fsm.hpp"
#include "tests/support/raft_test_group.hpp"

namespace proctor {
namespace {

using namespace raft_test;

// -- three replicas ---------------------------------------------------------------------------

TEST(raft_store, replicates_and_refuses_on_followers) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.open_all();
  auto t0 = clock_type::now();
  int l = g.wait_leader();
  ASSERT_GE(l, 0) << "no leader elected within 15 s";
  std::printf("[ info ] first leader elected after %.0f ms\n", ms_since(t0));
  auto& leader = *g.stores[l];
  EXPECT_TRUE(wait_until([&] { return g.events_of(l) == std::vector<bool>{true}; }, 5s));

  record_map model;
  for (uint64_t i = 0; i < 20; ++i)
    ASSERT_TRUE(written(leader, batch_of(100 + i % 3, 1 + i * 10, 10), &model));
  // Applied on the leader when write() returned; its loop vouches for it (sure_to_lead) all
  // along while it runs, without a pause.
  EXPECT_EQ(contents(leader), model);
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(leader.sure_to_lead()) << i;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(g.wait_applied(leader.applied_index())) << "followers did not catch up";
  expect_every_store_holds(g, model);
  std::vector<stored_record> tree;
  ASSERT_TRUE(g.stores[(l + 1) % 3]->read_tree(101, &tree).ok());
  EXPECT_EQ(tree.size(), 70u);

  // A follower refuses, naming the leader; nothing of it is applied anywhere.
  for (size_t i = 0; i < 3; ++i) {
    if (static_cast<int>(i) == l)
      continue;
    auto& f = *g.stores[i];
    EXPECT_FALSE(f.is_leader());
    EXPECT_FALSE(f.sure_to_lead());
    EXPECT_EQ(f.leader().id, g.members[l].id);
    EXPECT_EQ(f.leader().address, g.members[l].address);
    auto st = f.write({put(999, 1, "refused")});
    EXPECT_TRUE(st.IsBusy()) << st.ToString();
    EXPECT_NE(st.ToString().find("not the leader; leader is " + std::to_string(g.members[l].id)
                                 + " at " + g.members[l].address),
              std::string::npos)
      << st.ToString();
    EXPECT_TRUE(g.events_of(i).empty());
    EXPECT_EQ(f.term(), leader.term());
  }
  EXPECT_EQ(contents(leader).count({999, 1}), 0u);
}

TEST(raft_store, leader_failover) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  record_map model;
  for (uint64_t i = 0; i < 10; ++i)
    ASSERT_TRUE(written(*g.stores[l], batch_of(7, 1 + i * 5, 5), &model));
  auto old_term = g.stores[l]->term();
  auto t0 = clock_type::now();
  g.close(l);
  int n = g.wait_leader(15s);
  double failover_ms = ms_since(t0);
  ASSERT_GE(n, 0) << "no new leader within 15 s";
  ASSERT_NE(n, l);
  std::printf("[ info ] failover: new leader ready %.0f ms after the leader closed "
              "(election timeout %u ms, pre-vote %s)\n",
              failover_ms, g.base.election_timeout_ms, g.base.pre_vote ? "on" : "off");
  EXPECT_LT(failover_ms, 10000.0);
  EXPECT_GT(g.stores[n]->term(), old_term);
  // Nothing acknowledged before is lost, on either survivor.
  EXPECT_EQ(contents(*g.stores[n]), model);
  for (uint64_t i = 0; i < 10; ++i)
    ASSERT_TRUE(written(*g.stores[n], batch_of(8, 1 + i * 5, 5), &model));
  ASSERT_TRUE(g.wait_applied(g.stores[n]->applied_index()));
  expect_every_store_holds(g, model);
  // The closed leader told its callback it stopped leading.
  EXPECT_EQ(g.events_of(l), (std::vector<bool>{true, false}));
  EXPECT_TRUE(wait_until([&] { return g.events_of(n) == std::vector<bool>{true}; }, 5s));
  // The old leader comes back as a follower and catches up.
  g.open(l);
  auto target = g.stores[n]->applied_index();
  ASSERT_TRUE(wait_until([&] { return g.stores[l]->applied_index() >= target; }, 15s));
  EXPECT_EQ(contents(*g.stores[l]), model);
  EXPECT_EQ(g.stores[l]->leader().id, g.members[n].id);
}

TEST(raft_store, concurrent_writers_bounded_in_flight) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.base.max_in_flight = 3;
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  constexpr int writers = 6;
  constexpr int per_writer = 40;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < writers; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < per_writer; ++i)
        if (!g.stores[l]->write(batch_of(10 + w, 1 + i * 4, 4)).ok())
          ++failed;
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(failed.load(), 0);
  record_map model;
  for (int w = 0; w < writers; ++w)
    for (int i = 0; i < per_writer; ++i)
      model_apply(&model, batch_of(10 + w, 1 + i * 4, 4));
  ASSERT_TRUE(g.wait_applied(g.stores[l]->applied_index()));
  expect_every_store_holds(g, model);
}

TEST(raft_store, restarted_replica_catches_up_exactly_once) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  size_t f = (l + 1) % 3;
  record_map model;
  auto write = [&](const std::vector<store_op>& ops) {
    ASSERT_TRUE(written(*g.stores[l], ops, &model));
  };
  for (uint64_t i = 0; i < 10; ++i)
    write(batch_of(1, 1 + i * 10, 10));
  ASSERT_TRUE(g.wait_applied(g.stores[l]->applied_index()));
  g.close(f);
  // While it is away: more records, and deletes of records it has (a replay that applied
  // an old put again would bring them back).
  for (uint64_t i = 0; i < 10; ++i)
    write(batch_of(2, 1 + i * 10, 10));
  write({del(1, 51)});        // (1,1)..(1,50)
  write({put(1, 5, "new")});  // a key deleted and put again
  g.open(f);
  auto& back = *g.stores[f];
  auto target = g.stores[l]->applied_index();
  ASSERT_TRUE(wait_until([&] { return back.applied_index() >= target; }, 15s))
    << "restarted replica at " << back.applied_index() << ", leader at " << target;
  EXPECT_EQ(contents(back), model);
  // Restarting again replays the log over a database that already has it all.
  g.close(f);
  g.open(f);
  ASSERT_TRUE(wait_until([&] { return g.stores[f]->applied_index() >= target; }, 15s));
  EXPECT_EQ(contents(*g.stores[f]), model);
  EXPECT_FALSE(g.stores[f]->is_leader());
}

TEST(raft_store, no_majority_no_ok_and_leader_steps_down) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  ASSERT_TRUE(g.stores[l]->write(batch_of(1, 1, 10)).ok());
  g.close((l + 1) % 3);
  g.close((l + 2) % 3);
  // The write is appended but cannot commit. It returns (blocking until then) when the
  // leader, hearing from no majority for an election timeout, steps down: bounded by about
  // two election timeouts, not by a timer of ours (write_timeout_ms is 0 here).
  auto t0 = clock_type::now();
  auto st = g.stores[l]->write(batch_of(1, 11, 10));
  double ms = ms_since(t0);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.IsIncomplete()) << st.ToString();
  EXPECT_NE(st.ToString().find("leadership lost"), std::string::npos) << st.ToString();
  std::printf("[ info ] write without a majority returned after %.0f ms: %s\n", ms,
              st.ToString().c_str());
  EXPECT_LT(ms, 8000.0);
  EXPECT_TRUE(wait_until([&] { return !g.stores[l]->is_leader(); }, 5s));
  EXPECT_TRUE(wait_until([&] { return g.events_of(l) == std::vector<bool>{true, false}; }, 5s));
  // Later writes are refused at once.
  st = g.stores[l]->write(batch_of(1, 21, 1));
  EXPECT_TRUE(st.IsBusy()) << st.ToString();
  // Not applied here either: it never committed.
  EXPECT_EQ(contents(*g.stores[l]).count({1, 11}), 0u);
}

TEST(raft_store, write_timeout_without_majority) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.base.write_timeout_ms = 200;
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  g.close((l + 1) % 3);
  g.close((l + 2) % 3);
  auto t0 = clock_type::now();
  auto st = g.stores[l]->write(batch_of(1, 1, 1));
  EXPECT_TRUE(st.IsTimedOut() || st.IsIncomplete()) << st.ToString();
  EXPECT_LT(ms_since(t0), 1500.0);
}

TEST(raft_store, adapted_snapshot_threshold) {
  raft_fsm_binding b;
  b.min_threshold = 16;
  b.max_log_bytes = 1 << 20;
  b.snap_entries = 10;
  b.snap_bytes = 1000;                                  // entries of 100 B
  EXPECT_EQ(adapted_threshold(b, 50'000), 500u);        // as many entries as the state's bytes
  EXPECT_EQ(adapted_threshold(b, 10'000'000), 10485u);  // capped at max_log_bytes of them
  EXPECT_EQ(adapted_threshold(b, 100), 16u);            // never below the minimum
  b.max_log_bytes = 0;
  EXPECT_EQ(adapted_threshold(b, 10'000'000), 16u);  // fixed
  b.max_log_bytes = 1 << 20;
  b.snap_entries = 0;
  EXPECT_EQ(adapted_threshold(b, 10'000'000), 16u);  // nothing seen yet
}

TEST(raft_store, the_snapshot_threshold_grows_with_the_state) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.base.snapshot_threshold = 16;
  g.base.snapshot_trailing = 4;
  g.base.snapshot_max_log_bytes = 1 << 20;
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  auto& leader = *g.stores[l];
  // A state of about 2 MB, in entries of 20 KB: snapshots every 16-52 entries.
  for (uint64_t i = 0; i < 100; ++i)
    ASSERT_TRUE(leader.write(batch_of(1 + i % 10, 1 + i * 20, 20, 1000)).ok());
  // Then small entries. Serializing the whole state every 16 of them would cost 2 MB per
  // 2 KB written; the threshold grows to the entries that hold 1 MB (max_log_bytes), after
  // the first snapshot that sees them.
  std::set<uint64_t> snapshots;
  for (uint64_t i = 0; i < 400; ++i) {
    ASSERT_TRUE(leader.write(batch_of(100 + i % 10, 1 + i, 1, 100)).ok());
    snapshots.insert(leader.snapshot_index());
  }
  uint64_t lag = leader.applied_index() - leader.snapshot_index();
  std::printf("[ info ] 400 small entries after a 2 MB state: %zu snapshot indexes seen, log "
              "behind the last snapshot %llu entries\n",
              snapshots.size(), static_cast<unsigned long long>(lag));
  // A fixed threshold of 16 would have taken ~25 snapshots.
  EXPECT_LE(snapshots.size(), 4u);
  EXPECT_GT(lag, 6u * 16u);
  ASSERT_TRUE(g.wait_applied(leader.applied_index()));
}

TEST(raft_store, snapshot_install_and_bounded_log) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.base.snapshot_threshold = 16;
  g.base.snapshot_trailing = 4;
  g.base.snapshot_max_log_bytes = 0;  // every 16 entries, whatever the state's size
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  size_t f = (l + 1) % 3;
  record_map model;
  auto write = [&](const std::vector<store_op>& ops) {
    ASSERT_TRUE(written(*g.stores[l], ops, &model));
  };
  write(batch_of(1, 1, 20));
  ASSERT_TRUE(g.wait_applied(g.stores[l]->applied_index()));
  g.close(f);
  // The log stays bounded: libraft snapshots every `threshold` applied entries and drops
  // what precedes the snapshot (less the trailing entries). A snapshot is written in the
  // background while entries go on applying, so the lag can pass the threshold by what
  // applies meanwhile; without truncation it would grow to ~150 here.
  auto& leader = *g.stores[l];
  uint64_t max_lag = 0;
  std::set<uint64_t> snapshots;
  for (uint64_t i = 0; i < 150; ++i) {
    write(batch_of(2 + i % 4, 1 + i * 3, 3));
    max_lag = std::max(max_lag, leader.applied_index() - leader.snapshot_index());
    snapshots.insert(leader.snapshot_index());
  }
  write({del(1, 11)});
  std::printf("[ info ] log behind the last snapshot: at most %llu entries (threshold %u), %zu "
              "snapshots seen\n",
              static_cast<unsigned long long>(max_lag), g.base.snapshot_threshold,
              snapshots.size());
  EXPECT_LE(max_lag, 6u * g.base.snapshot_threshold);
  EXPECT_GE(snapshots.size(), 4u);
  // The follower missed entries the leader no longer has: it needs a snapshot install.
  // Usually about a second; ~5.5 s when the leader had tried an install while the follower
  // was down and waits for install_snapshot_timeout_ms (5 s) before trying again.
  auto t0 = clock_type::now();
  g.open(f);
  auto target = leader.applied_index();
  ASSERT_TRUE(wait_until([&] { return g.stores[f]->applied_index() >= target; }, 20s))
    << "follower at " << g.stores[f]->applied_index() << ", leader at " << target;
  std::printf("[ info ] follower caught up by snapshot install in %.0f ms\n", ms_since(t0));
  EXPECT_EQ(contents(*g.stores[f]), model);
  // Its own restart now restores the installed snapshot (and keeps its newer database).
  g.close(f);
  g.open(f);
  EXPECT_EQ(contents(*g.stores[f]), model);
  write(batch_of(9, 1, 5));
  ASSERT_TRUE(g.wait_applied(leader.applied_index()));
  expect_every_store_holds(g, model);
}

TEST(raft_store, throughput_one_client) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  auto& leader = *g.stores[l];
  constexpr size_t ops_per_entry = 100;
  std::vector<double> latency_ms;
  auto t0 = clock_type::now();
  // Bounded in count and time; informational only (the machine may be shared).
  while (latency_ms.size() < 2000 && ms_since(t0) < 3000) {
    auto n = latency_ms.size();
    auto ops = batch_of(1 + n % 50, 1 + n * ops_per_entry, ops_per_entry, 100);
    auto t = clock_type::now();
    auto st = leader.write(ops);
    latency_ms.push_back(ms_since(t));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  double s = ms_since(t0) / 1000.0;
  size_t entries = latency_ms.size();
  std::sort(latency_ms.begin(), latency_ms.end());
  double load = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1)
      load = 0;
    std::fclose(f);
  }
  std::printf("[ info ] throughput, one client thread, %zu ops of 100 B per entry (%zu B): "
              "%zu entries in %.2f s = %.0f entries/s (%.0f ops/s); write p50 %.2f ms, p99 "
              "%.2f ms; load average %.1f on %u cores\n",
              ops_per_entry, raft_codec::encoded_size(batch_of(1, 1, ops_per_entry, 100)), entries,
              s, entries / s, entries * ops_per_entry / s, latency_ms[entries / 2],
              latency_ms[entries * 99 / 100], load, std::thread::hardware_concurrency());
  ASSERT_TRUE(g.wait_applied(leader.applied_index()));
}

TEST(raft_store, open_errors) {
  std::string err;
  raft_store_options o;
  o.id = 1;
  o.address = "127.0.0.1:1";
  o.members = {{2, "127.0.0.1:2", ""}};
  o.dir = "/nonexistent";
  EXPECT_EQ(open_raft_store(o, &err), nullptr);
  EXPECT_NE(err.find("not in the member list"), std::string::npos) << err;
  if (on_tmpfs("/dev/shm")) {
    std::string dir = "/dev/shm/raft_store_test_" + std::to_string(::getpid());
    o.members = {{1, "127.0.0.1:" + std::to_string(free_port()), ""}};
    o.address = o.members[0].address;
    o.dir = dir;
    EXPECT_EQ(open_raft_store(o, &err), nullptr);
    EXPECT_NE(err.find("tmpfs"), std::string::npos) << err;
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // A port in use: libraft fails to listen, and the half-started replica is released
  // (its directory can be opened again once the port is free).
  {
    disk_dir d;
    ASSERT_FALSE(d.path.empty());
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(::listen(fd, 1), 0);
    ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    o.members = {{1, "127.0.0.1:" + std::to_string(ntohs(a.sin_port)), ""}};
    o.address = o.members[0].address;
    o.dir = d.path;
    EXPECT_EQ(open_raft_store(o, &err), nullptr);
    EXPECT_NE(err.find("cannot listen on " + o.address), std::string::npos) << err;
    std::printf("[ info ] port in use: %s\n", err.c_str());
    ::close(fd);
    auto s = open_raft_store(o, &err);
    ASSERT_NE(s, nullptr) << err;
    // A group of one elects itself.
    ASSERT_TRUE(wait_until([&] { return s->is_leader(); }, 10s));
    EXPECT_TRUE(s->write({put(1, 1, "solo")}).ok());
    EXPECT_EQ(contents(*s), (record_map{{{1, 1}, "solo"}}));
  }
  // A database ahead of an empty Raft directory (the Raft state was wiped) is refused.
  disk_dir d;
  ASSERT_FALSE(d.path.empty());
  {
    auto db = raft_replica_db::open(d.path + "/db", false, &err);
    ASSERT_NE(db, nullptr) << err;
    ASSERT_TRUE(db->apply(3, entry_of({put(1, 1, "x")})).ok());
  }
  o.dir = d.path;
  EXPECT_EQ(open_raft_store(o, &err), nullptr);
  EXPECT_NE(err.find("the Raft state was lost"), std::string::npos) << err;
}

}  // namespace
}  // namespace proctor
