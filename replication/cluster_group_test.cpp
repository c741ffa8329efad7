// The cluster group over real Raft: members in this process on 127.0.0.1, each on a disk
// directory (raft_test_group.hpp). Commands commit on a majority and every member ends with
// the same state, through a leader's loss, a member's restart and snapshots. Waits are on
// conditions, bounded.
#include "replication/cluster_group.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "replication/cluster_keeper.hpp"
#include "tests/support/raft_test_group.hpp"

namespace proctor {
namespace {

using namespace std::chrono_literals;
using raft_test::disk_dir;
using raft_test::free_port;
using raft_test::wait_until;

pb::ClusterMember member(const std::string& name, uint64_t incarnation) {
  pb::ClusterMember m;
  m.set_name(name);
  m.set_incarnation(incarnation);
  m.set_client_address("127.0.0.1:1");
  m.set_peer_address("127.0.0.1:2");
  return m;
}

struct cluster_members {
  disk_dir root;
  std::vector<raft_member> members;
  std::vector<std::unique_ptr<cluster_group>> groups;  // null: closed
  raft_store_options base;

  explicit cluster_members(size_t n) {
    for (size_t i = 0; i < n; ++i)
      members.push_back({i + 1, "127.0.0.1:" + std::to_string(free_port()), ""});
    groups.resize(n);
  }

  /// With `joining`: member i starts as a member of no group and waits to be added (the
  /// keeper's way); else the group is bootstrapped with every member of `members`.
  std::vector<uint32_t> levels;  ///< each member's release's feature level (default: this one's)

  bool try_open(size_t i, std::string* err, bool joining = false) {
    auto o = base;
    o.id = members[i].id;
    o.address = members[i].address;
    o.members = members;
    o.join = joining;
    o.dir = root.path + "/member" + std::to_string(i + 1);
    groups[i] = cluster_group::open(
      o, err, i < levels.size() && levels[i] != 0 ? levels[i] : release_feature_level);
    return groups[i] != nullptr;
  }
  void open_all() {
    std::string err;
    for (size_t i = 0; i < groups.size(); ++i) {
      ASSERT_TRUE(try_open(i, &err)) << err;
    }
  }
  int leader() const {
    for (size_t i = 0; i < groups.size(); ++i)
      if (groups[i] && groups[i]->raft().is_leader())
        return static_cast<int>(i);
    return -1;
  }
  int wait_leader() const {
    int l = -1;
    wait_until([&] { return (l = leader()) >= 0; }, 15s);
    return l;
  }
  /// Proposes on whichever member leads, retrying while leadership moves (every rule is
  /// idempotent, so a retry of a command that did commit changes nothing).
  cluster_group::result propose(const pb::ClusterCommand& c) {
    cluster_group::result r;
    wait_until(
      [&] {
        int l = leader();
        if (l < 0)
          return false;
        r = groups[static_cast<size_t>(l)]->propose(c);
        return r.status.ok();
      },
      15s);
    return r;
  }
  /// Waits until every open member holds the same state, at least `version`.
  bool wait_same(uint64_t version, std::chrono::milliseconds limit = 15s) const {
    return wait_until(
      [&] {
        std::string first;
        for (const auto& g : groups) {
          if (!g)
            continue;
          auto s = g->state();
          if (s->version() < version)
            return false;
          // The applied index may differ (configuration entries); compare the rest.
          pb::ClusterState copy = *s;
          copy.clear_applied_index();
          auto bytes = copy.SerializeAsString();
          if (first.empty())
            first = bytes;
          else if (bytes != first)
            return false;
        }
        return true;
      },
      limit);
  }
};

pb::ClusterCommand found(const pb::ClusterMember& m) {
  pb::ClusterCommand c;
  c.mutable_found()->set_cluster_id("0123456789abcdef0123456789abcdef");
  c.mutable_found()->set_slot_count(1024);
  *c.mutable_found()->mutable_founder() = m;
  return c;
}
pb::ClusterCommand join(const pb::ClusterMember& m) {
  pb::ClusterCommand c;
  *c.mutable_join()->mutable_member() = m;
  return c;
}
pb::ClusterCommand raise(const std::string& name, uint64_t inc, uint64_t floor) {
  pb::ClusterCommand c;
  c.mutable_raise_floor()->set_name(name);
  c.mutable_raise_floor()->set_incarnation(inc);
  c.mutable_raise_floor()->set_id_floor(floor);
  return c;
}

TEST(cluster_group, one_member_founds_and_decides_alone) {
  cluster_members g(1);
  if (g.root.path.empty())
    GTEST_SKIP() << "no disk file system for libraft";
  g.open_all();
  ASSERT_EQ(g.wait_leader(), 0);
  auto r = g.propose(found(member("a", 1)));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.outcome.applied) << r.outcome.text;
  EXPECT_EQ(r.state->members_size(), 1);
  r = g.propose(join(member("b", 2)));
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(r.outcome.applied) << r.outcome.text;
  EXPECT_EQ(find_member(*g.groups[0]->state(), "b")->state(), pb::JOINING);
}

// A rolling upgrade on real Raft: three members of release level 1 restarted one at a time
// as releases of level 2. The cluster's level rises in the report of the last one (never
// before); then a member restarted on the old release stops applying (it replays the log up
// to the rise and no further) while the other two go on deciding.
TEST(cluster_group, a_rolling_upgrade_raises_the_level_once_every_member_says_it) {
  cluster_members g(3);
  if (g.root.path.empty())
    GTEST_SKIP() << "no disk file system for libraft";
  g.levels = {1, 1, 1};
  g.open_all();
  ASSERT_GE(g.wait_leader(), 0);
  const std::vector<std::string> names{"a", "b", "c"};
  auto at_level = [](pb::ClusterMember m, uint32_t level) {
    m.set_feature_level(level);
    return m;
  };
  ASSERT_TRUE(g.propose(found(at_level(member("a", 1), 1))).outcome.applied);
  ASSERT_TRUE(g.propose(join(at_level(member("b", 2), 1))).outcome.applied);
  ASSERT_TRUE(g.propose(join(at_level(member("c", 3), 1))).outcome.applied);
  for (size_t i = 0; i < 3; ++i) {
    // Member i closed and opened again as the new release, which says its level.
    g.groups[i].reset();
    g.levels[i] = 2;
    std::string err;
    ASSERT_TRUE(g.try_open(i, &err)) << err;
    auto report = raise(names[i], i + 1, 1);
    report.mutable_raise_floor()->set_feature_level(2);
    auto r = g.propose(report);
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    ASSERT_TRUE(r.outcome.applied) << r.outcome.text;
    EXPECT_EQ(cluster_feature_level(*r.state), i < 2 ? 1u : 2u) << "after " << names[i];
  }
  const auto risen = g.groups[static_cast<size_t>(g.wait_leader())]->state();
  ASSERT_TRUE(g.wait_same(risen->version()));

  // a rolled back to the old release: its state machine stops at the command that raised
  // the level, and it never holds a state it cannot decide.
  g.groups[0].reset();
  g.levels[0] = 1;
  std::string err;
  ASSERT_TRUE(g.try_open(0, &err)) << err;
  // The other two still decide (a majority), and a stays behind them.
  pb::ClusterCommand lim;
  lim.mutable_set_limit()->mutable_limit()->set_type("t");
  lim.mutable_set_limit()->mutable_limit()->set_max_running(3);
  cluster_group::result r;
  ASSERT_TRUE(wait_until(
    [&] {
      for (size_t i = 1; i < 3; ++i)
        if (g.groups[i]->raft().is_leader()) {
          r = g.groups[i]->propose(lim);
          return r.status.ok();
        }
      return false;
    },
    20s))
    << r.status.ToString();
  EXPECT_TRUE(r.outcome.applied) << r.outcome.text;
  // The limit is applied on both (so the group went on without a), and a, whatever it
  // received meanwhile, holds a state from before the rise.
  ASSERT_TRUE(wait_until(
    [&] {
      return g.groups[1]->state()->limits_size() == 1 && g.groups[2]->state()->limits_size() == 1;
    },
    15s));
  const auto old_view = g.groups[0]->state();
  EXPECT_EQ(cluster_feature_level(*old_view), 1u);
  EXPECT_LT(old_view->version(), risen->version());
  EXPECT_TRUE(old_view->limits().empty());
  // ... and says why, for its node to show; the others apply.
  EXPECT_TRUE(wait_until([&] { return !g.groups[0]->stopped_applying().empty(); }, 15s));
  EXPECT_NE(g.groups[0]->stopped_applying().find("this release knows up to 1"), std::string::npos)
    << g.groups[0]->stopped_applying();
  EXPECT_EQ(g.groups[1]->stopped_applying(), "");
}

TEST(cluster_group, members_agree_through_a_leaders_loss_a_restart_and_snapshots) {
  cluster_members g(3);
  if (g.root.path.empty())
    GTEST_SKIP() << "no disk file system for libraft";
  g.base.snapshot_threshold = 8;  // snapshots every few commands
  g.base.snapshot_trailing = 4;
  g.base.snapshot_max_log_bytes = 0;
  g.open_all();
  int l = g.wait_leader();
  ASSERT_GE(l, 0);

  // A follower does not decide: it names the leader.
  auto follower = static_cast<size_t>((l + 1) % 3);
  auto r = g.groups[follower]->propose(found(member("a", 1)));
  EXPECT_TRUE(r.status.IsBusy()) << r.status.ToString();

  r = g.propose(found(member("a", 1)));
  ASSERT_TRUE(r.status.ok() && r.outcome.applied) << r.status.ToString() << " " << r.outcome.text;
  for (const auto& name : {"b", "c", "d"}) {
    r = g.propose(join(member(name, 10)));
    ASSERT_TRUE(r.status.ok() && r.outcome.applied) << r.outcome.text;
  }
  // A refusal is decided once, in the group, and said to the proposer.
  r = g.propose(join(member("b", 11)));
  ASSERT_TRUE(r.status.ok());
  EXPECT_FALSE(r.outcome.applied);
  EXPECT_NE(r.outcome.text.find("another journal"), std::string::npos) << r.outcome.text;
  ASSERT_TRUE(g.wait_same(r.state->version()));

  // The leader goes; the others go on deciding, and agree.
  l = g.leader();
  ASSERT_GE(l, 0);
  g.groups[static_cast<size_t>(l)].reset();
  uint64_t floor = 0;
  for (int i = 0; i < 30; ++i) {
    floor += 100;
    r = g.propose(raise("b", 10, floor));
    ASSERT_TRUE(r.status.ok() && r.outcome.applied) << r.status.ToString() << r.outcome.text;
  }
  const auto version = r.state->version();
  ASSERT_TRUE(g.wait_same(version));
  for (const auto& gr : g.groups)
    if (gr) {
      EXPECT_GT(gr->raft().snapshot_index(), 0u);
    }

  // The old leader comes back (its state from its snapshot and log, then the newer entries
  // from the leader) and holds the same state as the others.
  std::string err;
  ASSERT_TRUE(g.try_open(static_cast<size_t>(l), &err)) << err;
  ASSERT_TRUE(g.wait_same(version));
  EXPECT_EQ(find_member(*g.groups[static_cast<size_t>(l)]->state(), "b")->id_floor(), floor);

  // Every member restarts: the state is back from the snapshots and logs alone.
  for (auto& gr : g.groups)
    gr.reset();
  g.open_all();
  ASSERT_GE(g.wait_leader(), 0);
  ASSERT_TRUE(g.wait_same(version));
  auto s = g.groups[0]->state();
  EXPECT_EQ(s->cluster_id(), "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(s->members_size(), 4);
  EXPECT_EQ(find_member(*s, "b")->id_floor(), floor);
}

// The keeper grows the Raft group with the cluster: a one-node cluster, then four nodes that
// join (each a member of no group until the keeper adds it as a standby, then active once it
// caught up), with 1, 3, then 5 voters as they become active; a forgotten voter leaves the group and the voters shrink back
// to 3; a voter that dies is replaced by a standby. Every change reaches every member.
TEST(cluster_group, the_keeper_adds_joiners_keeps_odd_voters_and_replaces_a_dead_one) {
  cluster_members g(5);
  if (g.root.path.empty())
    GTEST_SKIP() << "no disk file system for libraft";
  // Raft ids are the incarnations.
  for (size_t i = 0; i < g.members.size(); ++i) {
    g.members[i].id = 1000 + i;
    g.members[i].label = std::string(1, static_cast<char>('a' + i));
  }
  auto founder_only = g.members;
  founder_only.resize(1);
  std::string err;
  {
    auto all = g.members;
    g.members = founder_only;
    ASSERT_TRUE(g.try_open(0, &err)) << err;
    g.members = all;
  }
  for (size_t i = 1; i < g.members.size(); ++i) {
    ASSERT_TRUE(g.try_open(i, &err, true)) << err;
  }
  std::vector<std::unique_ptr<cluster_keeper>> keepers;
  for (auto& gr : g.groups)
    keepers.push_back(std::make_unique<cluster_keeper>(*gr, 50ms));
  auto as_member = [&](size_t i) {
    auto m = member(g.members[i].label, g.members[i].id);
    m.set_group_address(g.members[i].address);
    return m;
  };
  ASSERT_EQ(g.wait_leader(), 0);
  auto r = g.propose(found(as_member(0)));
  ASSERT_TRUE(r.status.ok() && r.outcome.applied) << r.outcome.text;

  // The leader's view of the Raft group: members and voters.
  auto counts = [&] {
    std::pair<size_t, size_t> c{0, 0};
    int l = g.leader();
    if (l < 0)
      return c;
    for (const auto& m : g.groups[static_cast<size_t>(l)]->raft().members()) {
      ++c.first;
      c.second += m.role == raft_group::member_status::role_kind::voter ? 1 : 0;
    }
    return c;
  };
  auto wait_counts = [&](size_t members, size_t voters) {
    return wait_until([&] { return counts() == std::make_pair(members, voters); }, 30s);
  };
  // Each joins, comes in as a standby, and is made active by the keeper once it caught up;
  // the voters follow the active members.
  const std::vector<size_t> voters_after{1, 3, 3, 5};
  for (size_t i = 1; i < g.members.size(); ++i) {
    r = g.propose(join(as_member(i)));
    ASSERT_TRUE(r.status.ok() && r.outcome.applied) << r.outcome.text;
    const auto& name = g.members[i].label;
    ASSERT_TRUE(wait_until(
      [&] {
        const auto* m = find_member(*g.groups[0]->state(), name);
        return m != nullptr && m->state() == pb::ACTIVE;
      },
      30s))
      << name << " was not made active";
    ASSERT_TRUE(wait_counts(i + 1, voters_after[i - 1]))
      << "after " << name << ": members/voters " << counts().first << "/" << counts().second;
  }
  r = g.propose(raise("a", 1000, 1));
  ASSERT_TRUE(r.status.ok());
  ASSERT_TRUE(g.wait_same(r.state->version()));

  // How long a change takes to reach all five (docs/benchmarks.md has proctor-bench's
  // figures; this only bounds it).
  auto t0 = raft_test::clock_type::now();
  r = g.propose(raise("b", 1001, 4242));
  ASSERT_TRUE(r.status.ok() && r.outcome.applied) << r.outcome.text;
  ASSERT_TRUE(g.wait_same(r.state->version(), 5s));
  std::printf("a change reached all 5 members in %.1f ms\n", raft_test::ms_since(t0));

  // A forgotten voter leaves the Raft group; four members keep three voters.
  pb::ClusterCommand f;
  f.mutable_forget()->set_name("c");
  f.mutable_forget()->set_incarnation(1002);
  r = g.propose(f);
  ASSERT_TRUE(r.status.ok() && r.outcome.applied) << r.outcome.text;
  ASSERT_TRUE(wait_counts(4, 3)) << "members/voters " << counts().first << "/" << counts().second;
  keepers[2].reset();
  g.groups[2].reset();

  // The leader dies: the others elect one, and it replaces the dead voter with the standby
  // once it trusts the silence (cluster_keeper::liveness_grace).
  int l = g.leader();
  ASSERT_GE(l, 0);
  keepers[static_cast<size_t>(l)].reset();
  g.groups[static_cast<size_t>(l)].reset();
  const auto dead = g.members[static_cast<size_t>(l)].id;
  ASSERT_TRUE(wait_until(
    [&] {
      int nl = g.leader();
      if (nl < 0)
        return false;
      size_t alive_voters = 0;
      for (const auto& m : g.groups[static_cast<size_t>(nl)]->raft().members())
        if (m.role == raft_group::member_status::role_kind::voter)
          alive_voters += m.id != dead ? 1 : 0;
      return alive_voters == 3;
    },
    30s))
    << "members/voters " << counts().first << "/" << counts().second;
  keepers.clear();
}

}  // namespace
}  // namespace proctor
