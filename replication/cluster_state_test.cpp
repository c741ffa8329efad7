// The cluster group's rules and state machine without Raft: each rule's decisions and
// reasons, and a seeded random run of commands checking the invariants after each (names
// and numbers unique, refusals change nothing, snapshots restore the same state).
#include "replication/cluster_state.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/test_seed.hpp"

namespace proctor {
namespace {

pb::ClusterMember member(const std::string& name, uint64_t incarnation, uint32_t number = 0) {
  pb::ClusterMember m;
  m.set_name(name);
  m.set_incarnation(incarnation);
  m.set_number(number);
  m.set_client_address("127.0.0.1:" + std::to_string(7000 + incarnation % 1000));
  m.set_peer_address("127.0.0.1:" + std::to_string(8000 + incarnation % 1000));
  return m;
}

pb::ClusterCommand found(const std::string& id, const pb::ClusterMember& founder) {
  pb::ClusterCommand c;
  c.mutable_found()->set_cluster_id(id);
  c.mutable_found()->set_slot_count(1024);
  *c.mutable_found()->mutable_founder() = founder;
  return c;
}
pb::ClusterCommand join(const pb::ClusterMember& m) {
  pb::ClusterCommand c;
  *c.mutable_join()->mutable_member() = m;
  return c;
}
pb::ClusterCommand activate(const std::string& name, uint64_t inc) {
  pb::ClusterCommand c;
  c.mutable_activate()->set_name(name);
  c.mutable_activate()->set_incarnation(inc);
  return c;
}
pb::ClusterCommand drain(const std::string& name) {
  pb::ClusterCommand c;
  c.mutable_drain()->set_name(name);
  return c;
}
pb::ClusterCommand remove(const std::string& name, uint64_t inc) {
  pb::ClusterCommand c;
  c.mutable_remove()->set_name(name);
  c.mutable_remove()->set_incarnation(inc);
  return c;
}
pb::ClusterCommand forget(const std::string& name, uint64_t inc) {
  pb::ClusterCommand c;
  c.mutable_forget()->set_name(name);
  c.mutable_forget()->set_incarnation(inc);
  return c;
}
pb::ClusterCommand raise(const std::string& name, uint64_t inc, uint64_t floor, uint64_t lsn) {
  pb::ClusterCommand c;
  auto* r = c.mutable_raise_floor();
  r->set_name(name);
  r->set_incarnation(inc);
  r->set_id_floor(floor);
  r->set_journal_lsn(lsn);
  return c;
}
pb::ClusterCommand limit(const std::string& type, uint32_t max, bool cleared = false) {
  pb::ClusterCommand c;
  c.mutable_set_limit()->mutable_limit()->set_type(type);
  c.mutable_set_limit()->mutable_limit()->set_max_running(max);
  c.mutable_set_limit()->mutable_limit()->set_cleared(cleared);
  return c;
}
pb::ClusterCommand schedule(const std::string& name, int64_t created, bool paused = false,
                            int64_t decided = 0) {
  pb::ClusterCommand c;
  auto* x = c.mutable_set_schedule()->mutable_schedule();
  x->set_name(name);
  x->set_cron("* * * * *");
  x->set_type("demo.noop");
  x->set_created_at_ms(created);
  x->set_decided_until_ms(decided != 0 ? decided : created);
  x->set_paused(paused);
  x->set_fired(9);  // a node's own count: not held by the group
  return c;
}
pb::ClusterCommand deleted(const std::string& name) {
  pb::ClusterCommand c;
  c.mutable_set_schedule()->mutable_schedule()->set_name(name);
  c.mutable_set_schedule()->mutable_schedule()->set_deleted(true);
  return c;
}
pb::ClusterCommand progress(const std::string& name, int64_t created, int64_t until) {
  pb::ClusterCommand c;
  auto* p = c.mutable_schedule_progress();
  p->set_name(name);
  p->set_created_at_ms(created);
  p->set_decided_until_ms(until);
  return c;
}

/// Applies commands at increasing indexes, as the group would.
struct rules {
  pb::ClusterState st;
  uint64_t index = 0;
  cluster_outcome run(const pb::ClusterCommand& c) {
    return apply_cluster_command(&st, c, ++index);
  }
  pb::MemberState state_of(const std::string& name) const {
    const auto* m = find_member(st, name);
    return m == nullptr ? pb::MEMBER_STATE_UNSPECIFIED : m->state();
  }
};

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

pb::ClusterMember at_level(pb::ClusterMember m, uint32_t level) {
  m.set_feature_level(level);
  return m;
}
pb::ClusterCommand report_level(const std::string& name, uint64_t inc, uint32_t level) {
  auto c = raise(name, inc, 0, 0);
  c.mutable_raise_floor()->set_feature_level(level);
  return c;
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

TEST(cluster_state_machine, a_release_below_the_clusters_level_stops_applying_and_says_why) {
  // Founded by a release of level 2: one of level 1 must not decide its commands.
  auto f = encode_cluster_command(found("c1", at_level(member("a", 1), 2)));
  cluster_state old_release(1);
  EXPECT_EQ(old_release.stopped(), "");
  auto st = old_release.apply(1, f);
  EXPECT_TRUE(st.IsAborted()) << st.ToString();
  EXPECT_NE(st.ToString().find("feature level 2, and this release knows up to 1"),
            std::string::npos)
    << st.ToString();
  EXPECT_EQ(old_release.applied_index(), 0u);
  EXPECT_TRUE(old_release.current()->cluster_id().empty());  // nothing published
  // The reason stays for the node to show (`cluster nodes`, its log).
  EXPECT_NE(old_release.stopped().find("this release knows up to 1"), std::string::npos)
    << old_release.stopped();

  cluster_state new_release(2);
  ASSERT_TRUE(new_release.apply(1, f).ok());
  EXPECT_EQ(cluster_feature_level(*new_release.current()), 2u);
  new_release.begin_snapshot(1);
  std::vector<std::string> chunks;
  ASSERT_TRUE(new_release.serialize_snapshot(&chunks).ok());
  new_release.end_snapshot();
  ASSERT_EQ(chunks.size(), 1u);
  bool replaced = false;
  EXPECT_TRUE(old_release.restore(chunks[0], &replaced).IsAborted());
  EXPECT_FALSE(replaced);
  EXPECT_EQ(old_release.applied_index(), 0u);
  EXPECT_EQ(new_release.stopped(), "");
  // A snapshot alone stops it too.
  cluster_state fresh_old(1);
  EXPECT_TRUE(fresh_old.restore(chunks[0], &replaced).IsAborted());
  EXPECT_NE(fresh_old.stopped().find("feature level 2"), std::string::npos);
}

TEST(cluster_state_machine, an_entry_tells_its_length_so_padding_is_ignored) {
  auto c = join(member("b", 2));
  c.set_request_id(7);
  auto entry = encode_cluster_command(c);
  pb::ClusterCommand back;
  ASSERT_TRUE(decode_cluster_command(entry + std::string(7, '\0'), &back));
  EXPECT_EQ(back.SerializeAsString(), c.SerializeAsString());
  EXPECT_FALSE(decode_cluster_command(entry.substr(0, entry.size() - 1), &back));
  EXPECT_FALSE(decode_cluster_command("X" + entry.substr(1), &back));
  EXPECT_FALSE(decode_cluster_command({}, &back));
}

TEST(cluster_state_machine, applies_once_publishes_changes_and_restores_snapshots) {
  cluster_state sm;
  int published = 0;
  sm.subscribe([&](const cluster_state::state_ptr& s) {
    ++published;
    EXPECT_GT(s->version(), 0u);
  });
  auto c = found("c1", member("a", 1));
  c.set_request_id(42);
  ASSERT_TRUE(sm.apply(3, encode_cluster_command(c)).ok());
  EXPECT_EQ(sm.applied_index(), 3u);
  ASSERT_TRUE(sm.outcome(42).has_value());
  EXPECT_TRUE(sm.outcome(42)->applied);
  EXPECT_EQ(published, 1);
  // A replayed entry (libraft replays the log after its last snapshot) is skipped.
  auto j = join(member("b", 2));
  ASSERT_TRUE(sm.apply(3, encode_cluster_command(j)).ok());
  EXPECT_EQ(find_member(*sm.current(), "b"), nullptr);
  // A refused command changes nothing and is not published; its reason is kept.
  auto again = found("c2", member("z", 5));
  again.set_request_id(43);
  ASSERT_TRUE(sm.apply(4, encode_cluster_command(again)).ok());
  EXPECT_FALSE(sm.outcome(43)->applied);
  EXPECT_EQ(published, 1);
  EXPECT_EQ(sm.current()->applied_index(), 4u);
  // A command of a newer release is refused the same way everywhere, not fatal.
  pb::ClusterCommand unknown;
  unknown.set_request_id(44);
  ASSERT_TRUE(sm.apply(5, encode_cluster_command(unknown)).ok());
  EXPECT_FALSE(sm.outcome(44)->applied);
  // A damaged entry stops the replica (libraft retries it): it is never half applied.
  EXPECT_TRUE(sm.apply(6, std::string("\xff\xff\xff", 3)).IsCorruption());
  EXPECT_EQ(sm.applied_index(), 5u);

  sm.begin_snapshot(7);
  std::vector<std::string> chunks;
  ASSERT_TRUE(sm.serialize_snapshot(&chunks).ok());
  sm.end_snapshot();
  ASSERT_EQ(chunks.size(), 1u);

  cluster_state other;
  bool replaced = false;
  ASSERT_TRUE(other.restore(chunks[0], &replaced).ok());
  EXPECT_TRUE(replaced);
  EXPECT_EQ(other.applied_index(), 7u);
  EXPECT_EQ(other.current()->cluster_id(), "c1");
  // A snapshot older than what a member applied is not taken.
  ASSERT_TRUE(sm.apply(8, encode_cluster_command(join(member("b", 2)))).ok());
  ASSERT_TRUE(sm.restore(chunks[0], &replaced).ok());
  EXPECT_FALSE(replaced);
  EXPECT_NE(find_member(*sm.current(), "b"), nullptr);
}

// A seeded random run: commands over a few names, incarnations and numbers, applied to a
// state machine; after each, the invariants hold, and at random moments a snapshot restored
// into a fresh state machine that then applies the rest ends equal.
TEST(cluster_state_machine, random_commands_keep_the_invariants) {
  const uint64_t seed = proctor::testing::seed_from_env();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with PROCTOR_SEED=" + std::to_string(seed)
               + ")");
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return rng() % n; };
  const std::vector<std::string> names{"a", "b", "c", "d", "e", "f"};

  cluster_state sm(3);                  // a release that knows every level the run uses
  std::unique_ptr<cluster_state> copy;  // restored from a snapshot, then fed the same entries
  uint64_t index = 0;
  for (int step = 0; step < 3000; ++step) {
    const auto& name = names[pick(names.size())];
    const uint64_t inc = 1 + pick(4);
    pb::ClusterCommand c;
    switch (pick(10)) {
      case 0:
        c =
          found(pick(2) ? "c1" : "c2", at_level(member(name, inc), static_cast<uint32_t>(pick(4))));
        break;
      case 1:
        c =
          join(at_level(member(name, inc, pick(4) == 0 ? static_cast<uint32_t>(1 + pick(4095)) : 0),
                        static_cast<uint32_t>(pick(4))));
        break;
      case 2:
        c = activate(name, inc);
        break;
      case 3:
        c = drain(name);
        break;
      case 4:
        c = remove(name, inc);
        break;
      case 5:
        c = forget(name, pick(3) == 0 ? 0 : inc);
        break;
      case 6:
        c = raise(name, inc, pick(1u << 20), pick(1000));
        if (pick(3) == 0)
          c.mutable_raise_floor()->set_feature_level(static_cast<uint32_t>(pick(4)));
        break;
      case 7:
        c = limit("t" + std::to_string(pick(3)), static_cast<uint32_t>(pick(3)), pick(3) == 0);
        break;
      case 8:
        c = pick(4) == 0 ? deleted("s" + std::to_string(pick(3)))
            : pick(2) == 0
              ? progress("s" + std::to_string(pick(3)), static_cast<int64_t>(1 + pick(2)),
                         static_cast<int64_t>(pick(1000)))
              : schedule("s" + std::to_string(pick(3)), static_cast<int64_t>(1 + pick(2)),
                         pick(2) == 0);
        break;
      default:
        break;  // an unknown command
    }
    c.set_request_id(static_cast<uint64_t>(step) + 1);
    c.set_proposed_ms(static_cast<int64_t>(step));
    const auto before = *sm.current();
    index += 1 + pick(3);  // barriers and configuration entries take indexes too
    const auto entry = encode_cluster_command(c);
    ASSERT_TRUE(sm.apply(index, entry).ok());
    if (copy) {
      ASSERT_TRUE(copy->apply(index, entry).ok());
    }
    const auto& after = *sm.current();
    const auto out = *sm.outcome(c.request_id());
    SCOPED_TRACE("step " + std::to_string(step) + ": " + c.ShortDebugString() + " -> " + out.text);

    // Refused: nothing changed but the applied index. Applied: the version moved by one at
    // most.
    auto strip = [](pb::ClusterState s) {
      s.clear_applied_index();
      return s.SerializeAsString();
    };
    if (!out.applied) {
      ASSERT_EQ(strip(before), strip(after));
    }
    ASSERT_LE(after.version(), before.version() + 1);
    ASSERT_EQ(after.version() != before.version(), strip(before) != strip(after)) << out.text;
    // Names sorted and unique, numbers unique and in range, floors never go down.
    std::set<uint32_t> numbers;
    for (int i = 0; i < after.members_size(); ++i) {
      const auto& m = after.members(i);
      if (i > 0) {
        ASSERT_LT(after.members(i - 1).name(), m.name());
      }
      ASSERT_TRUE(m.number() >= 1 && m.number() <= 4095);
      ASSERT_TRUE(numbers.insert(m.number()).second) << "number " << m.number() << " twice";
      if (const auto* was = find_member(before, m.name())) {
        ASSERT_GE(m.id_floor(), was->id_floor());
        ASSERT_EQ(m.number(), was->number());
        // LEFT and FORGOTTEN are final for an incarnation.
        if (was->incarnation() == m.incarnation()
            && (was->state() == pb::LEFT || was->state() == pb::FORGOTTEN)) {
          ASSERT_EQ(m.state(), was->state());
        }
      }
    }
    // The feature level never falls; every member taking part knows it, and the lowest of
    // them is it (once the cluster has one).
    ASSERT_GE(cluster_feature_level(after), cluster_feature_level(before));
    uint32_t lowest = UINT32_MAX;
    for (const auto& m : after.members())
      if (member_takes_part(m))
        lowest = std::min(lowest, std::max(1u, m.feature_level()));
    if (lowest != UINT32_MAX) {
      ASSERT_EQ(lowest, cluster_feature_level(after));
    }
    // No member ever disappears, and the founding never changes.
    for (const auto& m : before.members()) {
      ASSERT_NE(find_member(after, m.name()), nullptr);
    }
    if (!before.cluster_id().empty()) {
      ASSERT_EQ(before.cluster_id(), after.cluster_id());
    }

    if (!copy && pick(200) == 0) {
      sm.begin_snapshot(index);
      std::vector<std::string> chunks;
      ASSERT_TRUE(sm.serialize_snapshot(&chunks).ok());
      sm.end_snapshot();
      copy = std::make_unique<cluster_state>(3);
      bool replaced = false;
      ASSERT_TRUE(copy->restore(chunks[0], &replaced).ok());
      ASSERT_TRUE(replaced);
    }
    if (copy) {
      ASSERT_EQ(copy->current()->SerializeAsString(), after.SerializeAsString());
    }
  }
}

}  // namespace
}  // namespace proctor
