// A node run as replicas in the cluster group (docs/cluster-group.md, "A node run as
// replicas"), with real proctord processes: node b as three replicas joins a cluster of a and
// c through a seed (no Raft member of its own: it follows the group's state), is made active
// and takes keyed submits; its leader is SIGKILLed and the replica elected instead tells the
// group its address, with no restart elsewhere; b is drained and removed. Through all of it,
// every nonce sent through random nodes (b by its three addresses among them) answers its
// first id, and every root ends SUCCESS.
#include <signal.h>

#include <array>
#include <chrono>
#include <iostream>
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

class cluster_replicas : public cluster_group_fixture {
protected:
  void SetUp() override {
    if (auto why = raft_unfit_dir(dir_.path()); !why.empty())
      GTEST_SKIP() << why;
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    members_.reserve(2);
    for (size_t i = 0; i < 3; ++i) {
      ports_[i] = free_port();
      spec_ += (i ? "," : "") + replica(i) + "=127.0.0.1:" + std::to_string(ports_[i]) + "/"
               + std::to_string(free_port());
    }
  }

  static std::string replica(size_t i) { return "b" + std::to_string(i + 1); }
  std::string b_address(size_t i) const { return "127.0.0.1:" + std::to_string(ports_[i]); }
  std::string b_addresses() const { return b_address(0) + "," + b_address(1) + "," + b_address(2); }

  /// Replica i of node b, following the cluster through seed `seed`, with `extra` options.
  std::unique_ptr<node> make_replica(size_t i, const std::string& seed,
                                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--name",     "b",   "--replica", replica(i),
                                  "--replicas", spec_, "--seeds",   seed};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<node>(dir_.path() / replica(i), ports_[i], args);
  }

  /// The CLI against node b by its three addresses.
  run_result b_ctl(const std::vector<std::string>& args, std::chrono::milliseconds limit = 60s) {
    std::vector<std::string> all{"--node", b_addresses()};
    all.insert(all.end(), args.begin(), args.end());
    return run_proctor(all, limit);
  }

  /// `cluster nodes --json` as node b answers it (null when it does not).
  std::optional<google::protobuf::Value> b_cluster() {
    auto r = b_ctl({"cluster", "nodes", "--json"}, 15s);
    return r.exit_code == 0 ? parse_json(r.out) : std::nullopt;
  }

  /// Whether a, c and b all list `want` (name: state) within `limit`.
  bool everyone_sees(const std::map<std::string, std::string>& want,
                     std::chrono::milliseconds limit = 30s) {
    return eventually(
      [&] {
        if (!all_see(want, 1ms))
          return false;
        auto v = b_cluster();
        if (!v)
          return false;
        for (const auto& [name, state] : want)
          if (member_field(*v, name, "state") != state)
            return false;
        return true;
      },
      limit, 200ms);
  }

  /// Submits nonce `n` with key `key` through a random node (b by its three addresses among
  /// them; only nodes in `through`), again while refused with "retry": the id, or 0.
  uint64_t submit(const std::string& n, const std::string& key,
                  const std::vector<std::string>& through) {
    run_result r;
    std::string at;
    eventually(
      [&] {
        at = through[std::uniform_int_distribution<size_t>(0, through.size() - 1)(rng_)];
        std::vector<std::string> args{"submit", "demo.noop", "--nonce", n, "--key", key};
        r = at == "b" ? b_ctl(args, 30s) : members_[at == "a" ? 0 : 1].proc->ctl(args, 30s);
        return r.exit_code == 0 || r.err.find("retry") == std::string::npos;
      },
      30s, 100ms);
    EXPECT_EQ(r.exit_code, 0) << "nonce " << n << " through " << at << ": " << describe(r)
                              << "\nseed " << seed_;
    return parse_id(r.out).value_or(0);
  }

  void send_new(size_t count, const std::vector<std::string>& through) {
    for (size_t k = 0; k < count; ++k) {
      const auto n = "order-" + std::to_string(ids_.size());
      const auto id = submit(n, "customer-" + std::to_string(ids_.size()), through);
      ASSERT_NE(id, 0u) << all_logs();
      ids_[n] = id;
    }
  }

  void send_all_again(const std::string& when, const std::vector<std::string>& through) {
    for (const auto& [n, id] : ids_) {
      const auto suffix = n.substr(n.find('-') + 1);
      EXPECT_EQ(submit(n, "customer-" + suffix, through), id)
        << "nonce " << n << " " << when << ": answered another id, so it ran twice\nseed " << seed_
        << "\n"
        << all_logs();
    }
  }

  std::string all_logs() {
    std::string out = logs(15);
    for (size_t i = 0; i < 3; ++i)
      if (b_[i])
        out += "--- " + replica(i) + ":\n" + b_[i]->log_tail(25);
    return out;
  }

  /// The replica of b that serves (-1 when none does within `limit`), not `skip`.
  int b_leader(std::chrono::milliseconds limit = 30s, int skip = -1) {
    return serving_replica({b_[0].get(), b_[1].get(), b_[2].get()}, limit, skip);
  }

  std::array<uint16_t, 3> ports_{};
  std::string spec_;
  std::array<std::unique_ptr<node>, 3> b_;
  std::map<std::string, uint64_t> ids_;
  unsigned seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(cluster_replicas,
       a_node_run_as_replicas_joins_fails_over_and_leaves_and_no_nonce_runs_twice) {
  add("a", {"--cluster-init"});
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  add("c", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"c", "active"}})) << logs();
  send_new(12, {"a", "c"});

  // b joins through a (its seed) and is made active once it holds the group's state: within
  // a few seconds every node lists it, b too, through the member it follows.
  const auto launched = std::chrono::steady_clock::now();
  for (size_t i = 0; i < 3; ++i) {
    b_[i] = make_replica(i, seed_of(0));
    ASSERT_TRUE(b_[i]->launch()) << all_logs();
  }
  const int l = b_leader();
  ASSERT_GE(l, 0) << all_logs();
  ASSERT_TRUE(everyone_sees({{"a", "active"}, {"b", "active"}, {"c", "active"}}))
    << seen() << all_logs();
  const auto joined = std::chrono::steady_clock::now() - launched;
  auto v = b_cluster();
  ASSERT_TRUE(v) << all_logs();
  EXPECT_EQ(member_field(*v, "b", "group_address"), "") << "b has no Raft member of its own";
  EXPECT_EQ(member_field(*v, "b", "client_address"), b_address(l))
    << "b's client address: its leader's";
  const auto b_number = std::stoull(member_field(*v, "b", "number"));
  const auto a_number = std::stoull(member_field(*v, "a", "number"));
  EXPECT_EQ(member_field(*v, "b", "peer_address").find(b_address(l)), 0u)
    << "peers reach b at every replica's address, its leader's first";

  // Slots moved to b: its nonces answer as before, through any node; new keyed roots land on
  // b too, sent to b or forwarded to it.
  send_all_again("after b joined", {"a", "b", "c"});
  send_new(36, {"a", "b", "c"});
  size_t on_b = 0;
  for (const auto& [n, id] : ids_)
    on_b += (id >> 40) == b_number ? 1 : 0;
  EXPECT_GT(on_b, 0u) << "no keyed root was placed on b";
  std::cout << "b's replicas launched until every node listed b active: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(joined).count() << " ms; "
            << on_b << " of " << ids_.size() << " roots on b\n";

  // b's leader SIGKILLed: another replica leads, joins again with its address, and b stays
  // an active member; nobody else restarts.
  b_[l]->kill();
  const auto killed = std::chrono::steady_clock::now();
  const int l2 = b_leader(30s, l);
  ASSERT_GE(l2, 0) << all_logs();
  ASSERT_TRUE(eventually(
    [&] {
      auto a_view = parse_json(members_[0].proc->ctl({"cluster", "nodes", "--json"}, 10s).out);
      return a_view && member_field(*a_view, "b", "client_address") == b_address(l2)
             && member_field(*a_view, "b", "state") == "active";
    },
    30s, 200ms))
    << "a did not learn b's new leader's address\n"
    << seen() << all_logs();
  std::cout << "b's leader SIGKILLed until a listed the new leader's address: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - killed)
                 .count()
            << " ms\n";
  send_all_again("after b's leader was SIGKILLed", {"a", "b", "c"});
  send_new(12, {"a", "b", "c"});
  ASSERT_TRUE(b_[l]->launch()) << all_logs();  // back as a follower

  // Every root ended SUCCESS, asked through the node it runs on.
  for (const auto& [n, id] : ids_) {
    const auto owner = id >> 40;
    const std::vector<std::string> wait{"wait", std::to_string(id), "--timeout-s", "60"};
    auto r = owner == b_number   ? b_ctl(wait, 90s)
             : owner == a_number ? members_[0].proc->ctl(wait, 90s)
                                 : members_[1].proc->ctl(wait, 90s);
    EXPECT_EQ(r.exit_code, 0) << "root " << id << " (nonce " << n << "): " << describe(r);
    EXPECT_NE(r.out.find("SUCCESS"), std::string::npos) << "root " << id << ": " << r.out;
  }

  // b drained (placed on no more) and removed once its roots ended and its nonces were taken
  // over; then a and c still answer every nonce with its first id.
  auto drain = members_[1].proc->ctl({"node", "drain", "b"}, 30s);
  ASSERT_EQ(drain.exit_code, 0) << describe(drain) << all_logs();
  ASSERT_TRUE(everyone_sees({{"a", "active"}, {"b", "draining"}, {"c", "active"}}))
    << seen() << all_logs();
  auto removed = ctl_until_ok(0, {"node", "remove", "b"}, 60s);
  ASSERT_EQ(removed.exit_code, 0) << describe(removed) << all_logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "left"}, {"c", "active"}})) << seen() << all_logs();
  send_all_again("after b left", {"a", "c"});
}

TEST_F(cluster_replicas, a_node_run_as_replicas_refuses_a_raft_port_and_a_founding) {
  auto r = run_program(bin_path("proctord"),
                       {"--name", "b", "--replica", "b1", "--replicas", spec_, "--data-dir",
                        (dir_.path() / "x").string(), "--group-port", std::to_string(free_port())},
                       30s);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  EXPECT_NE(r.err.find("takes part with --seeds alone"), std::string::npos) << r.err;
  r = run_program(bin_path("proctord"),
                  {"--name", "b", "--replica", "b1", "--replicas", spec_, "--data-dir",
                   (dir_.path() / "x").string(), "--cluster-init"},
                  30s);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  EXPECT_NE(r.err.find("cannot found the cluster"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace proctor::test
