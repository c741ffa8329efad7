// Nonces stay unique in a cluster whose members change (docs/cluster-group.md, "Nonces when
// slots move"), with real proctord processes: a cluster founded on one node grows to three
// and shrinks back to two (a drain, then a remove) while submits with nonces, some placed by
// a key, are sent through random nodes; after every change every nonce sent so far is sent
// again through a random node and must answer the id it got the first time, starting
// nothing. Before the handoff existed, a nonce whose slot moved to a joining node started a
// second tree there. And a member SIGSTOPped while slots move holds up the slots that moved
// (refused, "retry") and nothing else, until it runs again.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/cluster_group_fixture.hpp"

namespace proctor::test {
namespace {

using namespace std::chrono_literals;
using google::protobuf::Value;

class cluster_nonces : public cluster_group_fixture {
protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    members_.reserve(3);
  }

  /// A running member, at random.
  size_t any_node() {
    std::vector<size_t> up;
    for (size_t i = 0; i < members_.size(); ++i)
      if (members_[i].proc->running() && !removed_.count(i))
        up.push_back(i);
    return up[std::uniform_int_distribution<size_t>(0, up.size() - 1)(rng_)];
  }

  /// Submits nonce `n` (with key `key` if not empty) through a random node, again while it
  /// is refused with "retry" (placement tables, a handoff): the id, or 0.
  uint64_t submit(const std::string& n, const std::string& key) {
    run_result r;
    size_t at = 0;
    eventually(
      [&] {
        at = any_node();
        std::vector<std::string> args{"submit", "demo.noop", "--nonce", n};
        if (!key.empty()) {
          args.push_back("--key");
          args.push_back(key);
        }
        r = members_[at].proc->ctl(args, 30s);
        return r.exit_code == 0 || r.err.find("retry") == std::string::npos;
      },
      20s, 100ms);
    EXPECT_EQ(r.exit_code, 0) << "nonce " << n << " at " << members_[at].name << ": " << describe(r)
                              << "\nseed " << seed_;
    return parse_id(r.out).value_or(0);
  }

  /// Sends `count` new nonces (every third placed by a key) and remembers their ids.
  void send_new(size_t count) {
    for (size_t k = 0; k < count; ++k) {
      const auto n = "order-" + std::to_string(ids_.size());
      const auto key = ids_.size() % 3 == 0 ? "customer-" + std::to_string(ids_.size()) : "";
      const auto id = submit(n, key);
      ASSERT_NE(id, 0u) << logs();
      keys_[n] = key;
      ids_[n] = id;
    }
  }

  /// Sends every nonce so far again, through random nodes: each answers its first id.
  void send_all_again(const std::string& when) {
    for (const auto& [n, id] : ids_) {
      const auto again = submit(n, keys_[n]);
      EXPECT_EQ(again, id) << "nonce " << n << " (key '" << keys_[n] << "') " << when
                           << ": answered another id, so it ran twice\nseed " << seed_ << "\n"
                           << logs();
    }
  }

  std::set<size_t> removed_;
  std::map<std::string, uint64_t> ids_;
  std::map<std::string, std::string> keys_;
  unsigned seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(cluster_nonces, every_nonce_answers_one_id_while_the_cluster_grows_and_shrinks) {
  add("a", {"--cluster-init"});
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}})) << logs();
  send_new(24);  // all on a, the only member: it owns every slot

  // b joins and takes about half of the slots: a's nonces in them go with them.
  add("b", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "active"}})) << logs();
  send_all_again("after b joined");
  send_new(24);

  // c joins: slots move from a and from b.
  add("c", {"--seeds", seed_of(1)});
  ASSERT_TRUE(members_[2].proc->start()) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "active"}, {"c", "active"}})) << logs();
  send_all_again("after c joined");
  send_new(24);

  // b drains: its slots move to a and c, its nonces with them.
  auto drain = members_[0].proc->ctl({"node", "drain", "b"}, 30s);
  ASSERT_EQ(drain.exit_code, 0) << describe(drain) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "draining"}, {"c", "active"}})) << logs();
  send_all_again("while b drains");
  send_new(12);

  // b removed (once every active member holds its nonces), and stopped: they are still one.
  auto removed = ctl_until_ok(0, {"node", "remove", "b"}, 30s);
  ASSERT_EQ(removed.exit_code, 0) << describe(removed) << logs();
  ASSERT_EQ(members_[1].proc->stop(), 0) << logs();
  removed_.insert(1);
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "left"}, {"c", "active"}})) << logs();
  send_all_again("after b left");

  // a restarted: what it took over is read back from its journal.
  ASSERT_EQ(members_[0].proc->stop(), 0) << logs();
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  send_all_again("after a restarted");
}

TEST_F(cluster_nonces, a_member_stopped_while_slots_move_holds_them_up_and_nothing_runs_twice) {
  add("a", {"--cluster-init"});
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  add("b", {"--seeds", seed_of(0)});
  add("c", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  ASSERT_TRUE(members_[2].proc->start()) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "active"}, {"c", "active"}})) << logs();
  send_new(48);

  // c frozen (its links still open: a finds it down by its heartbeats), then b drains: the
  // slots b gave a wait for c, which might know nonces of them.
  ASSERT_EQ(::kill(members_[2].proc->pid(), SIGSTOP), 0);
  ASSERT_TRUE(sees_up(0, "c", false)) << logs();
  auto drain = members_[0].proc->ctl({"node", "drain", "b"}, 30s);
  ASSERT_EQ(drain.exit_code, 0) << describe(drain) << logs();
  ASSERT_TRUE(eventually([&] { return states_seen_by(0)["b"] == "draining"; }, 10s, 100ms))
    << logs();
  size_t held = 0;
  for (const auto& [n, id] : ids_) {
    std::vector<std::string> args{"submit", "demo.noop", "--nonce", n};
    if (!keys_[n].empty()) {
      args.push_back("--key");
      args.push_back(keys_[n]);
    }
    // (Refused while b's heartbeats still carry the members before the drain: a heartbeat.)
    run_result r;
    eventually(
      [&] {
        r = members_[0].proc->ctl(args, 30s);
        return r.err.find("disagree") == std::string::npos;
      },
      10s, 100ms);
    if (r.exit_code == 0) {
      EXPECT_EQ(parse_id(r.out).value_or(0), id) << "nonce " << n << ": it ran twice";
      continue;
    }
    EXPECT_NE(r.err.find("retry"), std::string::npos) << describe(r);
    held += r.err.find("taking over the nonces") != std::string::npos
            && r.err.find("waiting for c") != std::string::npos;
  }
  EXPECT_GT(held, 0u) << "no nonce of a slot that moved from b to a was held up by c\n" << logs();

  // c runs again: every nonce answers its first id.
  ASSERT_EQ(::kill(members_[2].proc->pid(), SIGCONT), 0);
  send_all_again("once c ran again");
}

}  // namespace
}  // namespace proctor::test
