// The cluster group's state machine without Raft (cluster_state.hpp): a release below the
// cluster's level stops applying, entries tell their length, applies publish and snapshots
// restore; and a seeded random run of commands checking the invariants after each (names and
// numbers unique, refusals change nothing, snapshots restore the same state).
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "replication/cluster_state.hpp"
#include "tests/support/cluster_commands.hpp"
#include "tests/support/test_seed.hpp"

namespace proctor {
namespace {

using namespace cluster_testing;  // the hand-built commands and `rules`

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
