// Who is in the cluster group and who votes (next_group_change), without Raft: the decision
// in the cases that matter, and a seeded random run that carries the changes out on a
// simulated configuration until none is left, checking that it ends and where.
#include "replication/cluster_keeper.hpp"

#include <algorithm>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

namespace proctor {
namespace {

using role = raft_group::member_status::role_kind;
using kind = membership_change::kind;

struct fixture {
  pb::ClusterState state;
  std::vector<raft_group::member_status> config;
  uint64_t self = 1;

  fixture() { state.set_cluster_id("c1"); }

  void member(uint64_t id, pb::MemberState s) {
    auto* m = state.add_members();
    m->set_name(std::string(1, static_cast<char>('a' + id - 1)));
    m->set_incarnation(id);
    m->set_state(s);
    m->set_group_address("127.0.0.1:" + std::to_string(9000 + id));
  }
  void in_group(uint64_t id, role r, bool heard = true) {
    raft_group::member_status c;
    c.id = id;
    c.address = "127.0.0.1:" + std::to_string(9000 + id);
    c.label = std::string(1, static_cast<char>('a' + id - 1));
    c.role = r;
    c.recently_heard = heard;
    config.push_back(c);
  }
  std::optional<membership_change> next(bool trust = true) const {
    return next_group_change(state, config, self, trust);
  }
};

TEST(cluster_keeper_rules, voters_are_odd_and_follow_the_settled_members) {
  EXPECT_EQ(voters_wanted(0), 0u);
  EXPECT_EQ(voters_wanted(1), 1u);
  EXPECT_EQ(voters_wanted(2), 1u);
  EXPECT_EQ(voters_wanted(3), 3u);
  EXPECT_EQ(voters_wanted(4), 3u);
  EXPECT_EQ(voters_wanted(5), 5u);
  EXPECT_EQ(voters_wanted(64), 5u);
}

TEST(cluster_keeper_rules, nothing_changes_before_the_founding) {
  fixture f;
  f.state.clear_cluster_id();
  f.in_group(1, role::voter);
  f.in_group(2, role::voter);
  f.in_group(3, role::voter);
  EXPECT_FALSE(f.next());  // not "remove 2 and 3": the state says nothing of them yet
}

TEST(cluster_keeper_rules, a_joiner_comes_in_as_a_standby_and_votes_once_active) {
  fixture f;
  f.member(1, pb::ACTIVE);
  f.in_group(1, role::voter);
  EXPECT_FALSE(f.next());
  f.member(2, pb::ACTIVE);
  f.member(3, pb::JOINING);
  auto c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::add_standby);
  EXPECT_EQ(c->member.id, 2u);
  EXPECT_EQ(c->member.label, "b");
  EXPECT_EQ(c->member.address, "127.0.0.1:9002");
  f.in_group(2, role::standby);
  f.in_group(3, role::standby);
  EXPECT_FALSE(f.next());  // two settled members: one voter
  f.state.mutable_members(2)->set_state(pb::ACTIVE);
  c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::add);  // three: b is made a voter, then c
  EXPECT_EQ(c->member.id, 2u);
}

TEST(cluster_keeper_rules, who_leaves_the_cluster_leaves_the_group_but_never_the_leader_itself) {
  fixture f;
  f.member(1, pb::LEFT);
  f.member(2, pb::FORGOTTEN);
  f.in_group(1, role::voter);
  f.in_group(2, role::voter);
  auto c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::remove);
  EXPECT_EQ(c->member.id, 2u);
  f.config.pop_back();
  EXPECT_FALSE(f.next());
  // A member replaced by a new incarnation: the old Raft id leaves, the new one comes in.
  f.member(3, pb::ACTIVE);
  f.in_group(7, role::standby);
  c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::remove);
  EXPECT_EQ(c->member.id, 7u);
}

TEST(cluster_keeper_rules, a_member_at_a_new_group_address_leaves_and_comes_back_there) {
  fixture f;
  f.member(1, pb::ACTIVE);
  f.member(2, pb::ACTIVE);
  f.member(3, pb::ACTIVE);
  f.in_group(1, role::voter);
  f.in_group(2, role::voter);
  f.in_group(3, role::voter);
  EXPECT_FALSE(f.next());
  // c restarted with another --group-port: its Raft member moves (out, then in as a standby
  // at the new address, then a voter again).
  f.state.mutable_members(2)->set_group_address("127.0.0.1:9999");
  auto c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::remove);
  EXPECT_EQ(c->member.id, 3u);
  f.config.pop_back();
  c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::add_standby);
  EXPECT_EQ(c->member.address, "127.0.0.1:9999");
  // The leader's own address is not changed under it: it stays until another leads.
  f.state.mutable_members(0)->set_group_address("127.0.0.1:9998");
  f.config.push_back(raft_group::member_status{});
  f.config.back().id = 3;
  f.config.back().address = "127.0.0.1:9999";
  f.config.back().label = "c";
  f.config.back().role = role::voter;
  f.config.back().recently_heard = true;
  EXPECT_FALSE(f.next());
}

TEST(cluster_keeper_rules, an_unheard_voter_is_replaced_once_the_leader_trusts_the_silence) {
  fixture f;
  for (uint64_t i = 1; i <= 4; ++i)
    f.member(i, pb::ACTIVE);
  f.in_group(1, role::voter);
  f.in_group(2, role::voter, false);
  f.in_group(3, role::voter);
  f.in_group(4, role::standby);
  EXPECT_FALSE(f.next(false));  // just elected: nobody's silence counts yet
  auto c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::add);  // the standby is promoted first ...
  EXPECT_EQ(c->member.id, 4u);
  f.config[3].role = role::voter;
  c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::demote);  // ... then the silent voter demoted
  EXPECT_EQ(c->member.id, 2u);
}

TEST(cluster_keeper_rules, active_members_vote_before_draining_ones) {
  fixture f;
  f.member(1, pb::ACTIVE);
  f.member(2, pb::DRAINING);
  f.member(3, pb::ACTIVE);
  f.member(4, pb::ACTIVE);
  f.in_group(1, role::voter);
  f.in_group(2, role::standby);
  f.in_group(3, role::standby);
  f.in_group(4, role::standby);
  auto c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->member.id, 3u);
  f.config[2].role = role::voter;
  c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->member.id, 4u);
  f.config[3].role = role::voter;
  EXPECT_FALSE(f.next());
  // One more voter than wanted: the draining one goes back first.
  f.config[1].role = role::voter;
  c = f.next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->what, kind::demote);
  EXPECT_EQ(c->member.id, 2u);
}

TEST(cluster_keeper_rules, a_joiner_is_made_active_once_it_caught_up) {
  fixture f;
  f.member(1, pb::ACTIVE);
  f.member(2, pb::JOINING);
  f.member(3, pb::JOINING);
  f.in_group(1, role::voter);
  EXPECT_FALSE(next_activation(f.state, f.config, 100));  // not in the group yet
  f.in_group(2, role::standby);
  f.in_group(3, role::standby);
  f.config[1].match_index = 0;  // has not answered yet
  f.config[2].match_index = 100 - caught_up_entries - 1;
  EXPECT_FALSE(next_activation(f.state, f.config, 100));
  f.config[2].match_index = 100 - caught_up_entries;
  auto c = next_activation(f.state, f.config, 100);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->activate().name(), "c");
  EXPECT_EQ(c->activate().incarnation(), 3u);
  f.state.mutable_members(2)->set_state(pb::ACTIVE);
  EXPECT_FALSE(next_activation(f.state, f.config, 100));
}

// Random clusters and configurations: carrying the changes out one by one ends (no change
// undoes another) in a configuration holding exactly the members taking part (and the
// leader), with as many good voters as wanted or as there are.
TEST(cluster_keeper_rules, random_configurations_settle) {
  const uint64_t seed = proctor::testing::seed_from_env();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with PROCTOR_SEED=" + std::to_string(seed)
               + ")");
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return rng() % n; };
  const pb::MemberState states[] = {pb::JOINING,  pb::ACTIVE, pb::ACTIVE,   pb::ACTIVE,
                                    pb::DRAINING, pb::LEFT,   pb::FORGOTTEN};
  for (int round = 0; round < 2000; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    fixture f;
    const uint64_t n = 1 + pick(9);
    for (uint64_t id = 1; id <= n; ++id)
      f.member(id, id == 1 ? pb::ACTIVE : states[pick(7)]);
    for (uint64_t id = 1; id <= n + 2; ++id)
      if (id == 1 || pick(2) == 0)
        f.in_group(id, id == 1 || pick(2) == 0 ? role::voter : role::standby,
                   id == 1 || pick(5) != 0);
    const bool trust = pick(4) != 0;
    int steps = 0;
    while (auto c = f.next(trust)) {
      ASSERT_LT(++steps, 40) << "no end: " << static_cast<int>(c->what) << " " << c->member.id;
      auto it = std::find_if(f.config.begin(), f.config.end(),
                             [&](const auto& x) { return x.id == c->member.id; });
      switch (c->what) {
        case kind::add_standby:
          ASSERT_EQ(it, f.config.end());
          f.in_group(c->member.id, role::standby, pick(5) != 0);
          break;
        case kind::add:
          ASSERT_NE(it, f.config.end());
          ASSERT_NE(it->role, role::voter);
          it->role = role::voter;
          break;
        case kind::demote:
          ASSERT_NE(it, f.config.end());
          ASSERT_EQ(it->role, role::voter);
          ASSERT_NE(it->id, f.self);
          it->role = role::standby;
          break;
        case kind::remove:
          ASSERT_NE(it, f.config.end());
          ASSERT_NE(it->id, f.self);
          f.config.erase(it);
          break;
      }
    }
    // Where it ended.
    size_t settled = 0, good = 0, voters = 0, good_voters = 0;
    for (const auto& m : f.state.members()) {
      const bool part =
        m.state() == pb::JOINING || m.state() == pb::ACTIVE || m.state() == pb::DRAINING;
      auto it = std::find_if(f.config.begin(), f.config.end(),
                             [&](const auto& x) { return x.id == m.incarnation(); });
      ASSERT_EQ(part || m.incarnation() == f.self, it != f.config.end()) << m.name();
      if (m.state() == pb::ACTIVE || m.state() == pb::DRAINING) {
        ++settled;
        const bool heard = !trust || it->id == f.self || it->recently_heard;
        good += heard ? 1 : 0;
        good_voters += heard && it->role == role::voter ? 1 : 0;
      }
    }
    ASSERT_EQ(f.config.size(),
              static_cast<size_t>(std::count_if(
                f.state.members().begin(), f.state.members().end(), [&](const auto& m) {
                  return m.state() == pb::JOINING || m.state() == pb::ACTIVE
                         || m.state() == pb::DRAINING;
                })));
    for (const auto& c : f.config)
      voters += c.role == role::voter ? 1 : 0;
    const size_t want = voters_wanted(settled);
    EXPECT_EQ(good_voters, std::min(want, good));
    EXPECT_LE(voters, std::max<size_t>(want, 1));
  }
}

}  // namespace
}  // namespace proctor
