// A replica group's membership changes (raft_membership.cpp): a member added under load catches
// up and votes, one removed stops counting, one that never comes stays a standby. Three or
// four replicas in this process (raft_test_group.hpp), waits bounded on conditions.
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "replication/journal_replica_db.hpp"
#include "replication/raft_codec.hpp"
#include "replication/raft_fsm.hpp"
#include "replication/raft_store.hpp"
#include "tests/support/raft_test_group.hpp"

namespace proctor {
namespace {

using namespace raft_test;

// -- membership -------------------------------------------------------------------------------

/// Member `id` of `ms`, by value: callers pass members(), a temporary (a pointer into it
/// dangled at the end of the statement: found by AddressSanitizer, scripts/sanitize.sh).
std::optional<raft_store::member_status> member_of(const std::vector<raft_store::member_status>& ms,
                                                   uint64_t id) {
  for (const auto& m : ms)
    if (m.id == id)
      return m;
  return std::nullopt;
}

membership_outcome change(raft_store& s, membership_change::kind what, raft_member m,
                          std::chrono::milliseconds catch_up = 30s) {
  membership_change c;
  c.what = what;
  c.member = std::move(m);
  c.catch_up_timeout = catch_up;
  auto f = s.change_membership(c);
  // The store bounds every change (catch-up timeout, leadership, close): this only guards
  // the test against a hang.
  if (f.wait_for(catch_up + 20s) != std::future_status::ready)
    return {rocksdb::Status::Aborted("test: no outcome"), ""};
  return f.get();
}

TEST(raft_store, add_a_joining_member_under_load_then_remove_one) {
  group g;
  SKIP_WITHOUT_DISK(g);
  for (auto& m : g.members)
    m.label = "m" + std::to_string(m.id) + "@" + m.address;
  // Small snapshots: the new member misses entries the log no longer holds, so it is sent a
  // snapshot first, then the log.
  g.base.snapshot_threshold = 16;
  g.base.snapshot_trailing = 4;
  g.base.snapshot_max_log_bytes = 0;  // every 16 entries, whatever the state's size
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  auto& leader = *g.stores[l];
  record_map model;
  std::mutex model_mtx;
  for (uint64_t i = 0; i < 60; ++i)
    ASSERT_TRUE(written(leader, batch_of(1 + i % 5, 1 + i * 4, 4, 200), &model));

  // A fourth replica starts with join: a fresh directory, in no group until it is added.
  raft_member fourth{4, "127.0.0.1:" + std::to_string(free_port()), ""};
  fourth.label = "m4@" + fourth.address;
  g.members.push_back(fourth);
  g.stores.resize(4);
  g.add_events_slot();
  auto o = g.options(3);
  o.join = true;
  o.members.clear();
  std::string err;
  g.stores[3] = open_raft_store(o, &err);
  ASSERT_TRUE(g.stores[3]) << err;
  EXPECT_FALSE(g.stores[3]->is_leader());

  // Refusals change nothing.
  int f = (l + 1) % 3;
  auto on_follower = change(*g.stores[f], membership_change::kind::add, fourth);
  EXPECT_TRUE(on_follower.status.IsBusy()) << on_follower.status.ToString();
  auto unknown = change(leader, membership_change::kind::remove, raft_member{99, "", ""});
  EXPECT_TRUE(unknown.status.IsNotFound()) << unknown.status.ToString();
  auto self = change(leader, membership_change::kind::remove, g.members[l]);
  EXPECT_TRUE(self.status.IsInvalidArgument()) << self.status.ToString();
  auto taken =
    change(leader, membership_change::kind::add, raft_member{5, g.members[f].address, "m5"});
  EXPECT_TRUE(taken.status.IsInvalidArgument()) << taken.status.ToString();
  auto voter = change(leader, membership_change::kind::add, g.members[f]);
  EXPECT_TRUE(voter.status.ok()) << voter.status.ToString();
  EXPECT_NE(voter.text.find("already a voter"), std::string::npos) << voter.text;

  // Added while a writer keeps writing: every write acknowledged is on the new member.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> acked{0};
  std::thread writer([&] {
    for (uint64_t i = 0; !stop.load(); ++i) {
      auto ops = batch_of(10 + i % 3, 1 + i * 2, 2, 200);
      if (!leader.write(ops).ok())
        break;
      std::lock_guard<std::mutex> lk(model_mtx);
      model_apply(&model, ops);
      ++acked;
    }
  });
  auto t0 = clock_type::now();
  auto added = change(leader, membership_change::kind::add, fourth);
  auto took = ms_since(t0);
  stop = true;
  writer.join();
  ASSERT_TRUE(added.status.ok()) << added.status.ToString() << ": " << added.text;
  std::printf("[ info ] member 4 joined (snapshot, then log) in %.0f ms while %llu writes "
              "were acknowledged: %s\n",
              took, static_cast<unsigned long long>(acked.load()), added.text.c_str());
  ASSERT_TRUE(g.wait_applied(leader.applied_index()));
  EXPECT_EQ(contents(*g.stores[3]), model);
  ASSERT_TRUE(wait_until(
    [&] {
      auto m = member_of(leader.members(), 4);
      return m && m->role == raft_store::member_status::role_kind::voter;
    },
    5s));
  auto m4 = member_of(g.stores[3]->members(), 4);
  ASSERT_TRUE(m4.has_value());  // the new member learned the group, labels included
  EXPECT_EQ(m4->label, fourth.label);
  EXPECT_EQ(m4->address, fourth.address);

  // A follower is removed; then it is closed and the three left carry on (a majority of
  // three is two: closing one more still leaves the group writable).
  auto removed = change(leader, membership_change::kind::remove, g.members[f]);
  ASSERT_TRUE(removed.status.ok()) << removed.status.ToString();
  ASSERT_TRUE(wait_until([&] { return !member_of(leader.members(), g.members[f].id); }, 5s));
  g.close(f);
  int other = 3 - l - f;  // the third of the first three
  g.close(other);
  ASSERT_TRUE(written(leader, batch_of(20, 1, 3), &model));
  ASSERT_TRUE(
    wait_until([&] { return g.stores[3]->applied_index() >= leader.applied_index(); }, 10s));
  EXPECT_EQ(contents(*g.stores[3]), model);
}

TEST(raft_store, a_member_that_never_comes_stays_a_standby_and_can_be_removed) {
  group g;
  SKIP_WITHOUT_DISK(g);
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);
  auto& leader = *g.stores[l];
  ASSERT_TRUE(leader.write(batch_of(1, 1, 3)).ok());
  raft_member ghost{7, "127.0.0.1:" + std::to_string(free_port()), "ghost"};
  auto t0 = clock_type::now();
  auto added = change(leader, membership_change::kind::add, ghost, 1500ms);
  EXPECT_TRUE(added.status.IsTimedOut()) << added.status.ToString();
  EXPECT_GE(ms_since(t0), 1400);
  EXPECT_NE(added.text.find("standby"), std::string::npos) << added.text;
  ASSERT_TRUE(wait_until(
    [&] {
      auto m = member_of(leader.members(), 7);
      return m && m->role == raft_store::member_status::role_kind::standby;
    },
    5s));
  // A standby does not count for the majority: writes go on.
  ASSERT_TRUE(leader.write(batch_of(2, 1, 3)).ok());
  auto removed = change(leader, membership_change::kind::remove, ghost);
  ASSERT_TRUE(removed.status.ok()) << removed.status.ToString();
  ASSERT_TRUE(wait_until([&] { return !member_of(leader.members(), 7); }, 5s));
}

}  // namespace
}  // namespace proctor
