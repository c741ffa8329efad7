// Nonces when slots move (docs/cluster-group.md; executor_handoff.cpp), seeded: three nodes
// of a cluster group (the test publishes the members as the group would, each change at a
// higher log index, to the nodes in a random order and some of them late) while submits of
// 40 nonces, some placed by a key, go to random nodes, and nodes are stopped (as a crash:
// what was not durable is not acknowledged) and started again at random moments — before,
// during and after the handoffs their changes start. Whatever the interleaving, a nonce
// answered once always answers the same id; at the end, with every node up and told the
// last members, every nonce answers. PROCTOR_HANDOFF_SEED=N replays one seed.
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "actors/base/placement.hpp"
#include "tests/engine/engine_group_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

const std::vector<std::string> names{"a", "b", "c"};

class nodes_handoff : public group_nodes_fixture {
protected:
  void SetUp() override {
    nodes_fixture::SetUp();
    for (const auto& n : names) {
      report(n, true);
      members_[n] = {pb::ACTIVE, 1};
    }
    for (const auto& n : names)
      publish(n);
  }

  /// Runs one seeded history; false (having said why) when a nonce answered two ids.
  void run(unsigned seed) {
    std::mt19937 rng(seed);
    auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
    std::map<std::string, uint64_t> ids;
    std::set<std::string> late;  // nodes not yet told the last change
    std::set<std::string> down;
    uint64_t index = 1;
    std::string trace;  // what happened, printed with a failure
    auto note = [&](const std::string& line) { trace += line + "\n"; };
    auto nonce_of = [](size_t i) { return "n-" + std::to_string(i); };
    auto key_of = [](size_t i) { return i % 4 == 0 ? "k-" + std::to_string(i) : std::string{}; };
    auto check = [&](size_t i, const pb::Response& r, const std::string& at) {
      if (r.code() != pb::Response::OK) {
        note("  " + nonce_of(i) + " at " + at + ": " + r.error());
        return;  // refused or unreachable: nothing started (it is sent again later)
      }
      note("  " + nonce_of(i) + " at " + at + ": " + std::to_string(r.id()) + " (node "
           + std::to_string(r.id() >> 40) + ")");
      auto [it, fresh] = ids.emplace(nonce_of(i), r.id());
      ASSERT_EQ(it->second, r.id())
        << "seed " << seed << ": nonce " << nonce_of(i) << " answered " << it->second
        << " and then " << r.id() << " (at " << at << "): it ran twice\n"
        << trace;
    };
    for (int step = 0; step < 70 && !HasFatalFailure(); ++step) {
      const auto what = pick(10);
      if (what < 2) {
        // A member change: a node drains, or an active one again (one stays active).
        const auto& n = names[pick(names.size())];
        auto& m = members_[n];
        size_t active = 0;
        for (const auto& [x, s] : members_)
          active += s.state == pb::ACTIVE;
        if (m.state == pb::ACTIVE && active == 1)
          continue;
        m = {m.state == pb::ACTIVE ? pb::DRAINING : pb::ACTIVE, ++index};
        std::string told;
        for (const auto& x : names)
          if (pick(3) == 0)
            late.insert(x);
          else {
            publish(x);
            told += " " + x;
          }
        note("change " + std::to_string(index) + ": " + n
             + (m.state == pb::ACTIVE ? " active" : " draining") + ", told" + told);
      } else if (what == 2 && !late.empty()) {
        note("the late ones told");
        for (const auto& x : late)
          publish(x);
        late.clear();
      } else if (what == 3 && down.size() < 2) {
        // A crash, at a random moment of whatever runs (a handoff among it).
        const auto& n = names[pick(names.size())];
        if (down.count(n) > 0)
          continue;
        std::this_thread::sleep_for(std::chrono::milliseconds{pick(15)});
        stop_node(n);
        note("stopped " + n);
        report(n, false);
        down.insert(n);
      } else if (what == 4 && !down.empty()) {
        auto n = *std::next(down.begin(), static_cast<long>(pick(down.size())));
        start_node(n);
        if (HasFatalFailure())
          return;
        note("started " + n);
        publish(n);  // its member opens and says what it holds
        late.erase(n);
        report(n, true);
        down.erase(n);
      } else {
        // A submit of a random nonce at a random node that is up.
        std::vector<std::string> up;
        for (const auto& x : names)
          if (down.count(x) == 0)
            up.push_back(x);
        const auto& at = up[pick(up.size())];
        const auto i = pick(40);
        check(i, submit_nonce(at, nonce_of(i), key_of(i)), at);
      }
    }
    if (HasFatalFailure())
      return;
    // Everything up and told: every nonce answered before answers its id again.
    for (const auto& n : std::set<std::string>(down)) {
      start_node(n);
      report(n, true);
    }
    for (const auto& n : names)
      publish(n);
    note("all up and told");
    for (size_t i = 0; i < 40 && !HasFatalFailure(); ++i) {
      pb::Response r;
      const auto& at = names[pick(names.size())];
      EXPECT_TRUE(eventually(
        [&] {
          r = submit_nonce(at, nonce_of(i), key_of(i));
          return r.code() == pb::Response::OK;
        },
        std::chrono::seconds{20}))
        << "seed " << seed << ": nonce " << nonce_of(i) << " at " << at << ": " << r.error();
      check(i, r, at);
    }
  }
};

TEST_F(nodes_handoff, a_nonce_answers_one_id_through_member_changes_crashes_and_late_nodes) {
  unsigned seed = std::random_device{}();
  if (const char* s = std::getenv("PROCTOR_HANDOFF_SEED"))
    seed = static_cast<unsigned>(std::strtoul(s, nullptr, 10));
  SCOPED_TRACE("PROCTOR_HANDOFF_SEED=" + std::to_string(seed));
  run(seed);
}

// A node restarted before it kept the members' list knows no peer: until the group speaks
// it is not a node alone that owns every slot (the churn process test met it: node e,
// SIGKILLed in the middle of its join and started again, answered a nonce c had answered
// with a new root of its own).
TEST_F(nodes_handoff, a_node_that_knows_no_peer_yet_takes_no_nonce_before_the_group_speaks) {
  const auto nonce = key_owned_by({"a", "b", "c"}, "a", "lone-");
  pb::Response first;
  ASSERT_TRUE(eventually([&] {
    first = submit_nonce("b", nonce, "");
    return first.code() == pb::Response::OK;
  }))
    << first.error();
  stop_node("c");
  report("c", false);
  peerless_.insert("c");
  start_node("c");
  report("c", true);
  const auto before = procs_on("c");
  const auto r = submit_nonce("c", nonce, "");
  EXPECT_EQ(r.code(), pb::Response::REFUSED)
    << "answered " << r.id() << ", first " << first.id() << ": " << r.error();
  EXPECT_NE(r.error().find("has not heard from the cluster group"), std::string::npos) << r.error();
  EXPECT_EQ(procs_on("c"), before) << "a procedure was started";
  // The group speaks: c learns its peers, and the nonce answers its id through c.
  publish("c");
  pb::Response again;
  EXPECT_TRUE(eventually([&] {
    again = submit_nonce("c", nonce, "");
    return again.code() == pb::Response::OK;
  }))
    << again.error();
  EXPECT_EQ(again.id(), first.id());
}

// A node the group does not list (a change before its join, replayed at its start; or a join
// the group refused) owns no slot: it places nonces on the members. Counting itself in, it
// took a slot over from the members (who do not ask it: it is none) and accepted a nonce the
// slot's owner then accepted again.
TEST_F(nodes_handoff, a_node_the_group_does_not_list_owns_no_slot) {
  members_.erase("c");
  members_["a"].since_index = 2;
  for (const auto& n : names)
    publish(n);
  const auto nonce = key_owned_by({"a", "b", "c"}, "c", "lone-");
  pb::Response at_c, at_owner;
  ASSERT_TRUE(eventually([&] {
    at_c = submit_nonce("c", nonce, "");
    return at_c.code() == pb::Response::OK;
  }))
    << at_c.error();
  const auto owner = placement::table({"a", "b"}).owner_of(nonce);
  ASSERT_TRUE(eventually([&] {
    at_owner = submit_nonce(owner, nonce, "");
    return at_owner.code() == pb::Response::OK;
  }))
    << at_owner.error();
  EXPECT_EQ(at_owner.id(), at_c.id())
    << "it ran twice: on node " << (at_c.id() >> 40) << " and on node " << (at_owner.id() >> 40);
  EXPECT_EQ(procs_on("c"), 0u) << "node c started a root";
}

}  // namespace
}  // namespace proctor::testing
