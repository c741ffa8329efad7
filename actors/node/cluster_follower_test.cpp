// The cluster follower's rules (cluster_follower.hpp): whom it asks, and which answers it
// takes. (Following a real group: tests/process/cluster_replicas_process_test.cpp.)
#include "actors/node/cluster_follower.hpp"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace proctor {
namespace {

pb::ClusterMember member(const std::string& name, uint64_t incarnation, const std::string& client,
                         const std::string& group, pb::MemberState state = pb::ACTIVE) {
  pb::ClusterMember m;
  m.set_name(name);
  m.set_incarnation(incarnation);
  m.set_client_address(client);
  m.set_group_address(group);
  m.set_state(state);
  return m;
}

/// A cluster of a (leader), c, d (left) and b (run as replicas: no group address).
pb::ClusterInfo answer(uint64_t applied, const std::string& leader = "a",
                       const std::string& cluster = "c1") {
  pb::ClusterInfo ci;
  ci.set_node("c");
  ci.set_role("leader");
  ci.set_leader_node(leader);
  auto* st = ci.mutable_state();
  st->set_cluster_id(cluster);
  st->set_applied_index(applied);
  st->set_version(applied);
  *st->add_members() = member("a", 1, "h:1", "h:11");
  *st->add_members() = member("b", 2, "h:2", "");
  *st->add_members() = member("c", 3, "h:3", "h:13");
  *st->add_members() = member("d", 4, "h:4", "h:14", pb::LEFT);
  return ci;
}

TEST(cluster_follower, asks_the_leader_then_the_members_of_the_raft_then_the_seeds_in_turn) {
  const std::vector<std::string> seeds{"s:1", "h:3"};
  // Nothing known: the seeds.
  EXPECT_EQ(cluster_follower::next_target({}, seeds, ""), "s:1");
  EXPECT_EQ(cluster_follower::next_target({}, seeds, "s:1"), "h:3");
  EXPECT_EQ(cluster_follower::next_target({}, seeds, "h:3"), "s:1");
  EXPECT_EQ(cluster_follower::next_target({}, {}, ""), "");
  // Known: the leader first; then c (b has no Raft member, d left), then the seed not yet named.
  auto known = answer(5);
  EXPECT_EQ(cluster_follower::next_target(known, seeds, ""), "h:1");
  EXPECT_EQ(cluster_follower::next_target(known, seeds, "h:1"), "h:3");
  EXPECT_EQ(cluster_follower::next_target(known, seeds, "h:3"), "s:1");
  EXPECT_EQ(cluster_follower::next_target(known, seeds, "s:1"), "h:1");
  EXPECT_EQ(cluster_follower::next_target(known, seeds, "x:9"), "h:1");
  // A leader c: c first, then a.
  known.set_leader_node("c");
  EXPECT_EQ(cluster_follower::next_target(known, seeds, ""), "h:3");
  EXPECT_EQ(cluster_follower::next_target(known, seeds, "h:3"), "h:1");
}

TEST(cluster_follower, takes_only_newer_states_of_its_cluster_from_members_that_apply) {
  std::atomic<int> changes{0};
  cluster_follower_options o;
  o.node_name = "b";
  o.period = std::chrono::milliseconds{50};  // no seed: its own asking finds nobody
  cluster_follower f(o, [&](const cluster_state::state_ptr&) { ++changes; });
  EXPECT_TRUE(f.state()->cluster_id().empty());
  EXPECT_EQ(f.leader_address(), "");

  pb::ClusterInfo unfounded;
  EXPECT_NE(f.take("h:3", unfounded), "");
  EXPECT_EQ(changes, 0);

  EXPECT_EQ(f.take("h:3", answer(5)), "");
  EXPECT_EQ(changes, 1);
  EXPECT_EQ(f.state()->applied_index(), 5u);
  EXPECT_EQ(f.leader_address(), "h:1");
  EXPECT_EQ(f.info().state().members_size(), 4);

  // Older or the same: not taken, and nothing told.
  EXPECT_EQ(f.take("h:3", answer(4)), "");
  EXPECT_EQ(f.take("h:3", answer(5, "c")), "");  // the same state; the leader as now
  EXPECT_EQ(changes, 1);
  EXPECT_EQ(f.state()->applied_index(), 5u);
  EXPECT_EQ(f.leader_address(), "h:3");

  // Another cluster's: refused, saying so.
  auto other = f.take("s:1", answer(9, "a", "c2"));
  EXPECT_NE(other.find("another cluster"), std::string::npos) << other;
  EXPECT_EQ(f.state()->cluster_id(), "c1");

  // A member that stopped applying: not taken.
  auto stopped = answer(9);
  stopped.set_stopped_applying("release below the cluster's level");
  EXPECT_NE(f.take("h:3", stopped), "");
  EXPECT_EQ(f.state()->applied_index(), 5u);

  EXPECT_EQ(f.take("h:1", answer(9)), "");
  EXPECT_EQ(changes, 2);
  EXPECT_EQ(f.state()->applied_index(), 9u);
  EXPECT_EQ(f.stopped(), "");
  EXPECT_EQ(f.cut_off(), "");  // the leader answered just now

  // A state above this release's feature level stops it for good.
  auto above = answer(12);
  above.mutable_state()->set_feature_level(release_feature_level + 1);
  auto why = f.take("h:1", above);
  EXPECT_NE(why.find("feature level"), std::string::npos) << why;
  EXPECT_EQ(f.stopped(), why);
  EXPECT_EQ(f.take("h:1", answer(13)), why);
  EXPECT_EQ(f.state()->applied_index(), 9u);
  EXPECT_EQ(changes, 2);
}

TEST(cluster_follower, says_it_is_cut_off_when_no_leader_answered_for_a_while) {
  cluster_follower_options o;
  o.node_name = "b";
  o.seeds = {"127.0.0.1:1"};  // refuses connections
  o.period = std::chrono::milliseconds{20};
  o.cut_off_after = std::chrono::milliseconds{100};
  cluster_follower f(o, [](const cluster_state::state_ptr&) {});
  for (int i = 0; i < 200 && f.cut_off().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  auto cut = f.cut_off();
  EXPECT_NE(cut.find("127.0.0.1:1"), std::string::npos) << cut;
  auto from_follower = answer(3);
  from_follower.set_role("follower");
  EXPECT_EQ(f.take("h:3", from_follower), "");  // taken, but not from a leader
  EXPECT_NE(f.cut_off(), "");
  EXPECT_EQ(f.take("h:1", answer(4)), "");
  EXPECT_EQ(f.cut_off(), "");
}

}  // namespace
}  // namespace proctor
