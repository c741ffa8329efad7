// A member of the cluster group restarted at new addresses (another --listen port and another
// --group-port, the same data directory) is found by every node without a restart elsewhere
// (docs/cluster-group.md, "How a node takes part"): its join tells the group, every node's
// link to it moves to the new address, the keeper moves its Raft member to the new group
// address (out, then back as a standby with the log it kept), and work placed on it runs.
// Before, the links kept the old address (the node stayed down for its peers) and the Raft
// configuration kept the old group address (it heard the group's log no more).
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/cluster_group_fixture.hpp"

namespace proctor::test {
namespace {

using namespace std::chrono_literals;

class cluster_move : public cluster_group_fixture {
protected:
  void SetUp() override {
    if (auto why = raft_unfit_dir(dir_.path()); !why.empty())
      GTEST_SKIP() << why;
    members_.reserve(3);
  }

  using cluster_group_fixture::member_field;

  /// A member's field as node i's `cluster nodes --json` lists it ("" when not).
  std::string member_field(size_t i, const std::string& name, const std::string& key) {
    auto v = parse_json(members_[i].proc->ctl({"cluster", "nodes", "--json"}, 10s).out);
    return v ? member_field(*v, name, key) : std::string{};
  }

  /// The role node i's view of the group gives the Raft member at `address` ("" when none).
  std::string group_role_at(size_t i, const std::string& address) {
    auto v = parse_json(members_[i].proc->ctl({"cluster", "nodes", "--json"}, 10s).out);
    if (!v)
      return {};
    for (const auto& g : field(*v, "group").list_value().values())
      if (g.struct_value().fields().at("address").string_value() == address)
        return g.struct_value().fields().at("role").string_value();
    return {};
  }
};

TEST_F(cluster_move, a_member_restarted_at_new_addresses_is_found_by_every_node) {
  add("a", {"--cluster-init"});
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  add("c", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  add("d", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[2].proc->start()) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"c", "active"}, {"d", "active"}})) << logs();
  ASSERT_TRUE(sees_up(0, "c", true)) << logs();

  // c stops and starts again elsewhere: other ports, the same journal and group directory.
  ASSERT_EQ(members_[1].proc->stop(), 0) << logs();
  const auto port = free_port();
  const auto group_port = free_port();
  members_[1].port = port;
  members_[1].proc = std::make_unique<node>(dir_.path() / "c", port,
                                            std::vector<std::string>{"--name", "c", "--group-port",
                                                                     std::to_string(group_port),
                                                                     "--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  const auto client = "127.0.0.1:" + std::to_string(port);
  const auto group = "127.0.0.1:" + std::to_string(group_port);

  // Every node lists its new addresses, links to it there, and the group's leader has its Raft
  // member at the new group address.
  for (size_t i : {size_t{0}, size_t{2}}) {
    EXPECT_TRUE(eventually(
      [&] {
        return member_field(i, "c", "client_address") == client
               && member_field(i, "c", "group_address") == group;
      },
      30s, 200ms))
      << members_[i].name << " did not learn c's new addresses\n"
      << logs();
    EXPECT_TRUE(sees_up(i, "c", true)) << members_[i].name << " does not reach c\n" << logs();
  }
  EXPECT_TRUE(eventually([&] { return !group_role_at(0, group).empty(); }, 30s, 200ms))
    << "c's Raft member did not move to " << group << "\n"
    << logs();

  // c hears the group's log there: a drain of d decided afterwards reaches it.
  auto drain = members_[0].proc->ctl({"node", "drain", "d"}, 30s);
  ASSERT_EQ(drain.exit_code, 0) << describe(drain) << logs();
  EXPECT_TRUE(all_see({{"a", "active"}, {"c", "active"}, {"d", "draining"}})) << seen() << logs();

  // And work placed on c by a runs there: keyed submits through a, some owned by c.
  const auto c_number = std::stoull(member_field(0, "c", "number"));
  size_t on_c = 0;
  for (int k = 0; k < 24; ++k) {
    auto r = ctl_until_ok(0, {"submit", "demo.noop", "--key", "k" + std::to_string(k)}, 30s);
    ASSERT_EQ(r.exit_code, 0) << describe(r) << logs();
    const auto id = parse_id(r.out).value_or(0);
    if ((id >> 40) != c_number)
      continue;
    ++on_c;
    auto w = members_[1].proc->ctl({"wait", std::to_string(id), "--timeout-s", "60"}, 90s);
    EXPECT_EQ(w.exit_code, 0) << describe(w);
    EXPECT_NE(w.out.find("SUCCESS"), std::string::npos) << "root " << id << ": " << w.out;
  }
  EXPECT_GT(on_c, 0u) << "no keyed root was placed on c\n" << logs();
}

}  // namespace
}  // namespace proctor::test
