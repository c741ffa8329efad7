// The cluster group's rules without Raft (cluster_rules.cpp): each rule's decisions and
// reasons, founding, joining, numbers, addresses, limits, schedules and the feature level.
#include <string>

#include <gtest/gtest.h>

#include "replication/cluster_state.hpp"
#include "tests/support/cluster_commands.hpp"

namespace proctor {
namespace {

using namespace cluster_testing;  // the hand-built commands and `rules`

TEST(cluster_rules, nothing_is_decided_before_the_founding_and_a_cluster_is_founded_once) {
  rules r;
  auto out = r.run(join(member("b", 2)));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("not founded"), std::string::npos) << out.text;
  EXPECT_EQ(r.st.members_size(), 0);

  out = r.run(found("c1", member("a", 1)));
  ASSERT_TRUE(out.applied) << out.text;
  EXPECT_EQ(r.st.cluster_id(), "c1");
  EXPECT_EQ(r.st.slot_count(), 1024u);
  EXPECT_EQ(r.state_of("a"), pb::ACTIVE);
  EXPECT_EQ(r.st.version(), 1u);

  // The same founding again (its proposer retried) is no change; another is refused.
  out = r.run(found("c1", member("a", 1)));
  EXPECT_TRUE(out.applied) << out.text;
  EXPECT_EQ(r.st.version(), 1u);
  out = r.run(found("c2", member("z", 9)));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("two clusters"), std::string::npos) << out.text;
  EXPECT_EQ(r.st.cluster_id(), "c1");
  EXPECT_EQ(r.st.members_size(), 1);
}

TEST(cluster_rules, a_member_joins_is_activated_drained_and_removed) {
  rules r;
  ASSERT_TRUE(r.run(found("c1", member("a", 1))).applied);
  ASSERT_TRUE(r.run(join(member("b", 2))).applied);
  EXPECT_EQ(r.state_of("b"), pb::JOINING);
  EXPECT_EQ(active_members(r.st), std::vector<std::string>{"a"});
  // Activation names the incarnation: an older one's word is not taken.
  EXPECT_FALSE(r.run(activate("b", 3)).applied);
  ASSERT_TRUE(r.run(activate("b", 2)).applied);
  EXPECT_EQ(active_members(r.st), (std::vector<std::string>{"a", "b"}));

  // Removing needs a drain first; a drain of the last active member is refused.
  auto out = r.run(remove("b", 2));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("drain it first"), std::string::npos) << out.text;
  ASSERT_TRUE(r.run(drain("b")).applied);
  EXPECT_EQ(r.state_of("b"), pb::DRAINING);
  EXPECT_EQ(active_members(r.st), std::vector<std::string>{"a"});
  out = r.run(drain("a"));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("only active member"), std::string::npos) << out.text;

  // A drain can be cancelled, then done again and completed.
  ASSERT_TRUE(r.run(activate("b", 2)).applied);
  EXPECT_EQ(r.state_of("b"), pb::ACTIVE);
  ASSERT_TRUE(r.run(drain("b")).applied);
  ASSERT_TRUE(r.run(remove("b", 2)).applied);
  EXPECT_EQ(r.state_of("b"), pb::LEFT);
  EXPECT_TRUE(r.run(remove("b", 2)).applied);  // a retried removal: no change

  // A member that left does not come back under its old incarnation.
  out = r.run(join(member("b", 2)));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("empty data directory"), std::string::npos) << out.text;
  EXPECT_FALSE(r.run(activate("b", 2)).applied);
}

TEST(cluster_rules,
     a_new_incarnation_is_refused_while_the_old_one_takes_part_and_keeps_the_number_and_floor) {
  rules r;
  ASSERT_TRUE(r.run(found("c1", member("a", 1))).applied);
  ASSERT_TRUE(r.run(join(member("b", 2))).applied);
  ASSERT_TRUE(r.run(activate("b", 2)).applied);
  ASSERT_TRUE(r.run(raise("b", 2, 5000, 77)).applied);
  const auto number = find_member(r.st, "b")->number();

  // b restarted empty (or restored from a copy as a new incarnation) while the cluster still
  // counts its old journal in: refused, naming the way out.
  auto out = r.run(join(member("b", 20)));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("node forget b --confirm-lost"), std::string::npos) << out.text;

  // A stale incarnation's reports are not taken; a forgotten one's neither.
  EXPECT_FALSE(r.run(raise("b", 20, 9000, 1)).applied);
  ASSERT_TRUE(r.run(forget("b", 2)).applied);
  EXPECT_EQ(r.state_of("b"), pb::FORGOTTEN);
  EXPECT_FALSE(r.run(raise("b", 2, 9000, 1)).applied);
  EXPECT_EQ(find_member(r.st, "b")->id_floor(), 5000u);

  // The new incarnation joins with the old number, its ids from the old floor up; it cannot
  // take another number.
  out = r.run(join(member("b", 20, number + 1)));
  EXPECT_FALSE(out.applied) << out.text;
  out = r.run(join(member("b", 20)));
  ASSERT_TRUE(out.applied) << out.text;
  const auto* b = find_member(r.st, "b");
  EXPECT_EQ(b->incarnation(), 20u);
  EXPECT_EQ(b->number(), number);
  EXPECT_EQ(b->id_floor(), 5000u);
  EXPECT_EQ(b->journal_lsn(), 0u);
  EXPECT_EQ(b->state(), pb::JOINING);
}

TEST(cluster_rules, numbers_are_never_shared_between_names) {
  rules r;
  ASSERT_TRUE(r.run(found("c1", member("a", 1))).applied);
  // Names whose hashes collide (by pigeonhole among 4096 names) get different numbers.
  std::map<uint32_t, std::string> by_number{{find_member(r.st, "a")->number(), "a"}};
  for (int i = 0; i < 300; ++i) {
    auto name = "n" + std::to_string(i);
    auto out = r.run(join(member(name, 100 + i)));
    ASSERT_TRUE(out.applied) << out.text;
    auto n = find_member(r.st, name)->number();
    ASSERT_GE(n, 1u);
    ASSERT_LE(n, 4095u);
    ASSERT_TRUE(by_number.emplace(n, name).second) << name << " got " << by_number[n] << "'s " << n;
  }
  // A number asked for (a node that ran before the group) is refused when another name holds it.
  auto out = r.run(join(member("x", 999, find_member(r.st, "n7")->number())));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("n7"), std::string::npos) << out.text;
  // ... and given when free, also after its holder left (numbers are never reused).
  uint32_t free_number = 1;
  while (by_number.count(free_number) != 0)
    ++free_number;
  out = r.run(join(member("y", 1000, free_number)));
  ASSERT_TRUE(out.applied) << out.text;
  EXPECT_EQ(find_member(r.st, "y")->number(), free_number);
}

TEST(cluster_rules, addresses_follow_a_rejoin_and_limits_are_set_and_removed) {
  rules r;
  ASSERT_TRUE(r.run(found("c1", member("a", 1))).applied);
  ASSERT_TRUE(r.run(join(member("b", 2))).applied);
  auto moved = member("b", 2);
  moved.set_client_address("10.0.0.9:7000");
  const auto v = r.st.version();
  auto out = r.run(join(moved));
  ASSERT_TRUE(out.applied) << out.text;
  EXPECT_EQ(find_member(r.st, "b")->client_address(), "10.0.0.9:7000");
  EXPECT_EQ(r.st.version(), v + 1);
  EXPECT_EQ(r.state_of("b"), pb::JOINING);

  ASSERT_TRUE(r.run(limit("demo.ledger", 4)).applied);
  ASSERT_TRUE(r.run(limit("a.type", 1)).applied);
  ASSERT_EQ(r.st.limits_size(), 2);
  EXPECT_EQ(r.st.limits(0).type(), "a.type");
  // No limit (0) overrides the code's limits; cleared takes the type back to them.
  ASSERT_TRUE(r.run(limit("demo.ledger", 0)).applied);
  ASSERT_EQ(r.st.limits_size(), 2);
  ASSERT_TRUE(r.run(limit("demo.ledger", 0, true)).applied);
  ASSERT_EQ(r.st.limits_size(), 1);
  EXPECT_FALSE(r.run(limit("", 3)).applied);
}

TEST(cluster_rules, schedules_are_added_once_changed_by_their_creation_and_only_move_forward) {
  rules r;
  ASSERT_TRUE(r.run(found("c1", member("a", 1))).applied);
  ASSERT_TRUE(r.run(schedule("tick", 1000)).applied);
  ASSERT_TRUE(r.run(schedule("a.first", 500)).applied);
  ASSERT_EQ(r.st.schedules_size(), 2);
  EXPECT_EQ(r.st.schedules(0).name(), "a.first");  // sorted by name
  EXPECT_EQ(r.st.schedules(1).fired(), 0u);        // counts are each node's own
  // A second add of the name (another creation) is refused; a change of the same one is not.
  auto out = r.run(schedule("tick", 2000));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("exists already"), std::string::npos) << out.text;
  ASSERT_TRUE(r.run(schedule("tick", 1000, true)).applied);
  EXPECT_TRUE(r.st.schedules(1).paused());

  // Progress only raises, and only for the schedule it was decided for.
  ASSERT_TRUE(r.run(progress("tick", 1000, 60'000)).applied);
  ASSERT_TRUE(r.run(progress("tick", 1000, 30'000)).applied);
  EXPECT_EQ(r.st.schedules(1).decided_until_ms(), 60'000);
  EXPECT_FALSE(r.run(progress("tick", 2000, 90'000)).applied);
  EXPECT_EQ(r.st.schedules(1).decided_until_ms(), 60'000);
  // A resume (its proposer's time as decided) keeps what was decided beyond it.
  ASSERT_TRUE(r.run(schedule("tick", 1000, false, 40'000)).applied);
  EXPECT_EQ(r.st.schedules(1).decided_until_ms(), 60'000);
  EXPECT_FALSE(r.st.schedules(1).paused());

  ASSERT_TRUE(r.run(deleted("tick")).applied);
  ASSERT_EQ(r.st.schedules_size(), 1);
  EXPECT_FALSE(r.run(deleted("tick")).applied);
  EXPECT_FALSE(r.run(progress("tick", 1000, 90'000)).applied);
  // The name is free again.
  ASSERT_TRUE(r.run(schedule("tick", 3000)).applied);
  EXPECT_FALSE(r.run(schedule("", 3000)).applied);
}

TEST(cluster_rules, the_feature_level_rises_to_its_lowest_member_and_never_falls) {
  rules r;
  // A founder recorded before levels existed (0) counts as level 1.
  ASSERT_TRUE(r.run(found("c1", member("a", 1))).applied);
  EXPECT_EQ(cluster_feature_level(r.st), 1u);
  ASSERT_TRUE(r.run(join(at_level(member("b", 2), 2))).applied);
  ASSERT_TRUE(r.run(activate("b", 2)).applied);
  EXPECT_EQ(cluster_feature_level(r.st), 1u);  // a still knows 1 only
  // a, upgraded, says so: every member knows 2 now.
  auto out = r.run(report_level("a", 1, 2));
  ASSERT_TRUE(out.applied) << out.text;
  EXPECT_EQ(cluster_feature_level(r.st), 2u);
  // A node of an older release is refused at its join, and a member's report of a lower
  // level (a downgrade) is refused: neither changes anything.
  const auto before = r.st.SerializeAsString();
  out = r.run(join(at_level(member("c", 3), 1)));
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("feature level 1, below the cluster's 2"), std::string::npos) << out.text;
  out = r.run(join(member("c", 3)));  // (0: from before levels, so 1)
  EXPECT_FALSE(out.applied);
  out = r.run(report_level("b", 2, 1));
  EXPECT_FALSE(out.applied);
  out = r.run(join(at_level(member("b", 2), 1)));  // b restarted on an older release
  EXPECT_FALSE(out.applied);
  EXPECT_EQ(r.st.SerializeAsString(), before);
  // A member of a newer release does not raise the level alone; the level never falls when
  // members leave, and rises when the last member below goes.
  ASSERT_TRUE(r.run(join(at_level(member("d", 4), 3))).applied);
  ASSERT_TRUE(r.run(activate("d", 4)).applied);
  EXPECT_EQ(cluster_feature_level(r.st), 2u);
  ASSERT_TRUE(r.run(report_level("b", 2, 3)).applied);
  EXPECT_EQ(cluster_feature_level(r.st), 2u);  // a knows 2
  ASSERT_TRUE(r.run(forget("a", 1)).applied);
  EXPECT_EQ(cluster_feature_level(r.st), 3u);
  ASSERT_TRUE(r.run(report_level("b", 2, 3)).applied);
  ASSERT_TRUE(r.run(drain("d")).applied);
  ASSERT_TRUE(r.run(remove("d", 4)).applied);
  EXPECT_EQ(cluster_feature_level(r.st), 3u);
  // a, forgotten at level 2, cannot come back on that release even as a new incarnation.
  EXPECT_FALSE(r.run(join(at_level(member("a", 5), 2))).applied);
  EXPECT_TRUE(r.run(join(at_level(member("a", 5), 3))).applied);
}

TEST(cluster_rules, a_command_this_release_does_not_know_is_refused_and_changes_nothing) {
  rules r;
  ASSERT_TRUE(r.run(found("c1", member("a", 1))).applied);
  ASSERT_TRUE(r.run(join(member("b", 2))).applied);
  const auto before = r.st.SerializeAsString();
  // A newer release's command: a oneof case this release parses as an unknown field.
  pb::ClusterCommand c;
  c.set_request_id(9);
  c.GetReflection()->MutableUnknownFields(&c)->AddLengthDelimited(40, "a newer command");
  pb::ClusterCommand parsed;
  ASSERT_TRUE(parsed.ParseFromString(c.SerializeAsString()));
  EXPECT_EQ(parsed.command_case(), pb::ClusterCommand::COMMAND_NOT_SET);
  EXPECT_EQ(command_feature_level(parsed), UINT32_MAX);
  auto out = r.run(parsed);
  EXPECT_FALSE(out.applied);
  EXPECT_NE(out.text.find("newer release"), std::string::npos) << out.text;
  EXPECT_EQ(r.st.SerializeAsString(), before);
  // Every command kind this release knows is at or below its level (a kind added without a
  // level does not compile: command_feature_level's switch has no default).
  for (const auto& k : {found("c1", member("a", 1)), join(member("b", 2)), activate("b", 2),
                        drain("b"), remove("b", 2), forget("b", 2), raise("b", 2, 1, 1),
                        limit("t", 1), schedule("s", 1), progress("s", 1, 1)})
    EXPECT_LE(command_feature_level(k), release_feature_level) << k.ShortDebugString();
}

}  // namespace
}  // namespace proctor
