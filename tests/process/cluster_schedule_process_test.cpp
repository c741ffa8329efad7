// Schedules are the cluster's (docs/cluster-group.md, "Schedules"), with real proctord
// processes: a schedule added on one node of a cluster group firing every second is held by
// every node and fires on one, the owner of its slot; its owner drained, the next owner goes
// on; that owner SIGKILLed for a few seconds, its catch-up runs what came meanwhile; the
// drained node removed, and the schedule paused on another node. Then every second from the
// add to the pause is asked for by its nonce ("schedule:tick:<ms>", key "schedule:tick")
// through random nodes: each fire time answers one root of the schedule (none lost), no two
// answer the same root, and the cluster holds no root of the schedule that no fire time
// answers (none ran twice). And across a forget: the owner SIGKILLed for good and forgotten,
// no fire time after its loss is lost.
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/cluster_group_fixture.hpp"

namespace proctor::test {
namespace {

using namespace std::chrono_literals;
using google::protobuf::Value;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

class cluster_schedules : public cluster_group_fixture {
protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    members_.reserve(3);
  }

  /// Node i's `schedule show tick --json` entry (a null Value if it did not answer).
  Value show(size_t i) {
    auto r = members_[i].proc->ctl({"schedule", "show", "tick", "--json"}, 15s);
    auto v = r.exit_code == 0 ? parse_json(r.out) : std::nullopt;
    if (v && v->has_list_value() && v->list_value().values_size() == 1)
      return v->list_value().values(0);
    return Value{};
  }
  int64_t fired(size_t i) {
    auto v = show(i);
    return v.has_struct_value() ? static_cast<int64_t>(field(v, "fired").number_value()) : -1;
  }

  /// The node that fires the schedule now: the one whose count grows (within 10 s).
  std::optional<size_t> firing_node(const std::set<size_t>& among) {
    std::vector<int64_t> before(members_.size(), -1);
    for (auto i : among)
      before[i] = fired(i);
    std::optional<size_t> out;
    eventually(
      [&] {
        for (auto i : among)
          if (fired(i) > before[i] + 1) {
            out = i;
            return true;
          }
        return false;
      },
      10s, 200ms);
    return out;
  }

  /// The ids of the roots of `type` node i holds itself.
  std::set<uint64_t> roots_of(size_t i, const std::string& type) {
    std::set<uint64_t> out;
    auto r = members_[i].proc->ctl({"list", "--local", "--json"}, 15s);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    auto v = parse_json(r.out);
    if (v && v->has_list_value())
      for (const auto& x : v->list_value().values())
        if (field(x, "type").string_value() == type)
          out.insert(static_cast<uint64_t>(field(x, "id").number_value()));
    return out;
  }

  /// Fire time `t`'s nonce sent through a random running node as a demo.timer submit: the id
  /// of the root that fire time started, or of a new demo.timer if it started none.
  uint64_t probe(int64_t t) {
    run_result r;
    size_t at = 0;
    eventually(
      [&] {
        std::vector<size_t> up;
        for (size_t i = 0; i < members_.size(); ++i)
          if (members_[i].proc->running() && removed_.count(i) == 0)
            up.push_back(i);
        at = up[std::uniform_int_distribution<size_t>(0, up.size() - 1)(rng_)];
        r = members_[at].proc->ctl({"submit", "demo.timer", "--args-json", R"({"wake_at_ms":1})",
                                    "--nonce", "schedule:tick:" + std::to_string(t), "--key",
                                    "schedule:tick"},
                                   30s);
        return r.exit_code == 0 || r.err.find("retry") == std::string::npos;
      },
      20s, 100ms);
    EXPECT_EQ(r.exit_code, 0) << "fire time " << t << " at " << members_[at].name << ": "
                              << describe(r) << "\nseed " << seed_;
    return parse_id(r.out).value_or(0);
  }

  /// a founds the cluster, b joins through a, c through b; every node sees all three active.
  void start_three() {
    add("a", {"--cluster-init"});
    ASSERT_TRUE(members_[0].proc->start()) << logs();
    add("b", {"--seeds", seed_of(0)});
    ASSERT_TRUE(members_[1].proc->start()) << logs();
    add("c", {"--seeds", seed_of(1)});
    ASSERT_TRUE(members_[2].proc->start()) << logs();
    ASSERT_TRUE(all_see({{"a", "active"}, {"b", "active"}, {"c", "active"}})) << logs();
  }

  /// Schedule "tick" added on node i: demo.noop every second, overlap allowed, catch-up all.
  void add_tick(size_t i) {
    auto r = members_[i].proc->ctl({"schedule", "add", "tick", "demo.noop", "--cron", "* * * * * *",
                                    "--args-json", R"({"steps":1})", "--overlap", "allow",
                                    "--catch-up", "all"},
                                   30s);
    ASSERT_EQ(r.exit_code, 0) << describe(r) << logs();
  }

  /// "tick" paused on node i, until every node not removed (a node that left hears the
  /// group no more) shows it paused.
  void pause_tick(size_t i) {
    auto r = members_[i].proc->ctl({"schedule", "pause", "tick"}, 30s);
    ASSERT_EQ(r.exit_code, 0) << describe(r) << logs();
    ASSERT_TRUE(eventually(
      [&] {
        for (size_t k = 0; k < members_.size(); ++k)
          if (removed_.count(k) == 0 && !field(show(k), "paused").bool_value())
            return false;
        return true;
      },
      20s, 200ms))
      << logs();
  }

  /// Every second from 2 s before `from_ms` to 2 s after `pausing_ms`, asked for by its nonce:
  /// each answers one root, no two the same; a fire time without a root of the schedule on
  /// the running nodes is allowed only up to `lost_until_ms` (`window` says why) or from
  /// `pausing_ms`; every such root answers a fire time, and at least `min_ran` ran.
  void expect_each_fire_time_once(int64_t from_ms, int64_t lost_until_ms, int64_t pausing_ms,
                                  const std::string& window, size_t min_ran) {
    std::set<uint64_t> roots;
    for (size_t i = 0; i < members_.size(); ++i)
      if (members_[i].proc->running()) {
        for (auto id : roots_of(i, "demo.noop"))
          ASSERT_TRUE(roots.insert(id).second) << "root " << id << " listed by two nodes";
      }
    std::set<uint64_t> answered;
    size_t ran = 0;
    for (int64_t t = from_ms / 1000 * 1000 - 2000; t <= pausing_ms / 1000 * 1000 + 2000;
         t += 1000) {
      const auto id = probe(t);
      ASSERT_NE(id, 0u) << logs();
      ASSERT_TRUE(answered.insert(id).second)
        << "fire times answered one root twice: " << id << "\nseed " << seed_;
      if (roots.count(id) != 0) {
        ++ran;
      } else {
        EXPECT_TRUE(t <= lost_until_ms || t >= pausing_ms)
          << "fire time " << t << " was lost (" << window << ", paused from " << pausing_ms
          << ")\nseed " << seed_ << "\n"
          << logs();
      }
    }
    EXPECT_EQ(ran, roots.size()) << "a fire time ran twice, or a root answers none ("
                                 << roots.size() << " roots, " << ran << " fire times)\n"
                                 << logs();
    EXPECT_GE(ran, min_ran) << logs();
  }

  std::set<size_t> removed_;
  unsigned seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(cluster_schedules, each_fire_time_runs_once_across_a_drain_a_sigkill_and_a_remove) {
  ASSERT_NO_FATAL_FAILURE(start_three());

  // Added on c (the group's leader or not), held by every node, fired by one. Fire times up
  // to the add's answer may or may not run (c may answer a second or two after it was asked:
  // it has just joined); every one after it must.
  ASSERT_NO_FATAL_FAILURE(add_tick(2));
  const auto added_ms = now_ms();
  ASSERT_TRUE(eventually(
    [&] {
      for (size_t i = 0; i < 3; ++i)
        if (!field(show(i), "cluster").bool_value())
          return false;
      return true;
    },
    20s, 200ms))
    << logs();
  auto first = firing_node({0, 1, 2});
  ASSERT_TRUE(first.has_value()) << "the schedule fires nowhere\n" << logs();

  // Its owner drained: another node fires it from then on.
  auto drain = members_[(*first + 1) % 3].proc->ctl({"node", "drain", members_[*first].name}, 30s);
  ASSERT_EQ(drain.exit_code, 0) << describe(drain) << logs();
  std::set<size_t> active;
  for (size_t i = 0; i < 3; ++i)
    if (i != *first)
      active.insert(i);
  auto second = firing_node(active);
  ASSERT_TRUE(second.has_value()) << "the schedule did not move from " << members_[*first].name
                                  << "\n"
                                  << logs();

  // That owner SIGKILLed for about 3 s (its slot stays its own: it is still a member), then
  // restarted: its catch-up runs the fire times that came meanwhile.
  members_[*second].proc->kill();
  std::this_thread::sleep_for(3s);  // fire times come while it is down: what the test is about
  ASSERT_TRUE(members_[*second].proc->start()) << logs();
  ASSERT_TRUE(eventually(
    [&] {
      auto v = show(*second);
      return v.has_struct_value() && field(v, "next_fire_ms").number_value() > now_ms() - 1500;
    },
    30s, 200ms))
    << "the restarted owner did not catch up\n"
    << logs();

  // The drained node removed (its roots ended, its nonces held by the others), and the
  // schedule paused on the node that is neither.
  auto removed = ctl_until_ok(*second, {"node", "remove", members_[*first].name}, 30s);
  ASSERT_EQ(removed.exit_code, 0) << describe(removed) << logs();
  removed_.insert(*first);
  size_t third = 3 - *first - *second;
  const auto pausing_ms = now_ms();  // fire times from here on may or may not run
  ASSERT_NO_FATAL_FAILURE(pause_tick(third));

  // Every root of the schedule the cluster holds (the removed node's too: it still runs),
  // and every second from before the add to after the pause; none lost after the add's answer.
  expect_each_fire_time_once(added_ms, added_ms, pausing_ms, "added by " + std::to_string(added_ms),
                             8);
}

// Across a forget (docs/cluster-group.md, "Schedules"): the schedule's owner SIGKILLed for
// good and forgotten; the next owner of its slot goes on from the group's word and catches up
// on what came while the owner was dead. Every fire time after the kill answers one root on
// the nodes left (none lost; before the kill, a fire time's root may be lost with the owner),
// no two the same, and they hold no root of the schedule that no fire time answers.
TEST_F(cluster_schedules, no_fire_time_after_its_owners_loss_is_lost_when_it_is_forgotten) {
  ASSERT_NO_FATAL_FAILURE(start_three());
  ASSERT_NO_FATAL_FAILURE(add_tick(0));
  const auto added_ms = now_ms();
  auto owner = firing_node({0, 1, 2});
  ASSERT_TRUE(owner.has_value()) << "the schedule fires nowhere\n" << logs();

  // The owner lost for good; fire times come while it is dead and not yet forgotten.
  members_[*owner].proc->kill();
  const auto killed_ms = now_ms();
  removed_.insert(*owner);
  std::this_thread::sleep_for(3s);
  const size_t other = (*owner + 1) % 3;
  auto forget =
    members_[other].proc->ctl({"node", "forget", members_[*owner].name, "--confirm-lost"}, 30s);
  ASSERT_EQ(forget.exit_code, 0) << describe(forget) << logs();
  std::set<size_t> left;
  for (size_t i = 0; i < 3; ++i)
    if (i != *owner)
      left.insert(i);
  auto next = firing_node(left);
  ASSERT_TRUE(next.has_value()) << "the schedule did not move from the forgotten "
                                << members_[*owner].name << "\n"
                                << logs();
  std::this_thread::sleep_for(2s);
  const auto pausing_ms = now_ms();
  ASSERT_NO_FATAL_FAILURE(pause_tick(other));

  // Every root the nodes left hold answers a fire time; none after the kill is lost.
  expect_each_fire_time_once(added_ms, killed_ms, pausing_ms,
                             "owner killed at " + std::to_string(killed_ms) + ", forgotten", 5);
}

}  // namespace
}  // namespace proctor::test
