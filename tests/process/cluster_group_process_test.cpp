// The cluster group with real proctord processes (docs/cluster-group.md): a cluster founded on
// one node grows to five by --seeds (through the leader and through nodes that hand the join
// on), every node listing every member active and linking to it; the group's leader
// SIGKILLed, another leads and the old one comes back as it was; a node restarted empty under
// a member's name is refused and stops, and once forgotten joins as a new incarnation whose
// ids go on above the old ones (drains, removals, forgets, the move from --peers and the
// founding: cluster_group_members_process_test.cpp).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/cluster_group_nodes_fixture.hpp"

namespace proctor::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using google::protobuf::Value;
using group_nodes::cluster_group_nodes;

TEST_F(cluster_group_nodes, grows_from_one_to_five_and_every_node_lists_every_member) {
  members_.reserve(5);
  add("a", {"--cluster-init"});
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  ASSERT_TRUE(all_see_active({"a"})) << logs();
  const auto id = field_of(0, "cluster_id");
  ASSERT_EQ(id.size(), 32u) << id;

  // b through a (the leader); c through b, d through c, e through d: nodes that do not lead
  // hand the join on to the leader's node.
  const std::vector<std::string> names{"a", "b", "c", "d", "e"};
  std::set<std::string> expected{"a"};
  for (size_t i = 1; i < names.size(); ++i) {
    add(names[i], {"--seeds", seed_of(i - 1)});
    ASSERT_TRUE(members_[i].proc->start()) << logs();
    expected.insert(names[i]);
    ASSERT_TRUE(all_see_active(expected)) << logs();
  }
  // One cluster, one number per name, and five voters once all five are settled.
  std::set<double> numbers;
  for (size_t i = 0; i < members_.size(); ++i) {
    EXPECT_EQ(field_of(i, "cluster_id"), id) << names[i];
    const auto v = view_of(i);
    for (const auto& m : field(v, "members").list_value().values())
      numbers.insert(m.struct_value().fields().at("number").number_value());
  }
  EXPECT_EQ(numbers.size(), 5u);
  ASSERT_TRUE(eventually(
    [&] {
      for (size_t i = 0; i < members_.size(); ++i) {
        auto v = view(i);
        if (!v || field(*v, "role").string_value() != "leader")
          continue;
        size_t voters = 0;
        for (const auto& g : field(*v, "group").list_value().values())
          voters += g.struct_value().fields().at("role").string_value() == "voter";
        return voters == 5;
      }
      return false;
    },
    30s, 200ms))
    << logs();
  // The CLI's table says the same.
  auto table = members_[2].proc->ctl({"cluster", "nodes"}, 15s);
  EXPECT_EQ(table.exit_code, 0) << describe(table);
  EXPECT_NE(table.out.find("cluster " + id), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("c*"), std::string::npos) << table.out;

  // Every member is a peer of every other, none given by --peers: a tree spreads its
  // children over all five.
  for (size_t i = 0; i < members_.size(); ++i)
    ASSERT_TRUE(peers_up(i, 4)) << names[i] << "\n" << logs();
  fs::create_directories(dir_.path() / "ledger");
  auto sub = members_[0].proc->ctl({"submit", "demo.ledger", "--args-json",
                                    R"({"ledger_dir":")" + (dir_.path() / "ledger").string()
                                      + R"(","spread":true,"steps":2,"children":5,"depth":1})"},
                                   30s);
  ASSERT_EQ(sub.exit_code, 0) << describe(sub);
  auto root = parse_id(sub.out);
  ASSERT_TRUE(root) << sub.out;
  auto waited = members_[0].proc->ctl({"wait", std::to_string(*root), "--timeout-s", "60"}, 90s);
  auto status = parse_json(waited.out);
  ASSERT_TRUE(status) << describe(waited);
  EXPECT_EQ(state_of(*status), "SUCCESS") << waited.out << logs();
  auto all = members_[0].proc->ctl({"list", "--all", "--json"}, 30s);
  auto listed = parse_json(all.out);
  ASSERT_TRUE(listed) << describe(all);
  std::set<std::string> ran_on;
  for (const auto& p : listed->list_value().values())
    if (auto n = p.struct_value().fields().find("node"); n != p.struct_value().fields().end())
      ran_on.insert(n->second.string_value());
  EXPECT_EQ(ran_on, (std::set<std::string>{"b", "c", "d", "e"}));

  // A member restarted knows its peers at once (the group's last list, kept beside it).
  ASSERT_EQ(members_[2].proc->stop(), 0) << logs();
  ASSERT_TRUE(members_[2].proc->start()) << logs();
  EXPECT_TRUE(peers_up(2, 4)) << logs();
  EXPECT_TRUE(all_see_active(expected)) << logs();
}

TEST_F(cluster_group_nodes, the_group_leader_killed_another_leads_and_it_comes_back_as_it_was) {
  start_three();
  if (HasFatalFailure())
    return;
  // Three settled members: three voters, so the group outlives its leader.
  std::string leader;
  ASSERT_TRUE(eventually(
    [&] {
      auto v = view(0);
      if (!v)
        return false;
      leader = field(*v, "leader").string_value();
      size_t voters = 0;
      for (const auto& g : field(*v, "group").list_value().values())
        voters += g.struct_value().fields().at("role").string_value() == "voter";
      return voters == 3 && !leader.empty();
    },
    30s, 200ms))
    << logs();
  size_t li = leader == "a" ? 0 : leader == "b" ? 1 : 2;
  const auto incarnation_before = [&] {
    auto v = view_of(li);
    for (const auto& m : field(v, "members").list_value().values())
      if (m.struct_value().fields().at("name").string_value() == leader)
        return m.struct_value().fields().at("incarnation").string_value();
    return std::string{};
  }();
  members_[li].proc->kill();
  const size_t other = (li + 1) % 3;
  std::string next;
  ASSERT_TRUE(eventually(
    [&] {
      next = field_of(other, "leader");
      return !next.empty() && next != leader;
    },
    20s, 100ms))
    << logs();
  ASSERT_TRUE(members_[li].proc->start()) << logs();
  ASSERT_TRUE(all_see_active({"a", "b", "c"})) << logs();
  auto v = view_of(li);
  for (const auto& m : field(v, "members").list_value().values()) {
    if (m.struct_value().fields().at("name").string_value() == leader) {
      EXPECT_EQ(m.struct_value().fields().at("incarnation").string_value(), incarnation_before);
    }
  }
  EXPECT_EQ(field_of(li, "cluster_id"), field_of(other, "cluster_id"));
}

TEST_F(cluster_group_nodes, a_node_restarted_empty_is_refused_until_forgotten_its_ids_go_on) {
  members_.reserve(2);
  add("a", {"--cluster-init"});
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  add("b", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  ASSERT_TRUE(all_see_active({"a", "b"})) << logs();
  ASSERT_TRUE(peers_up(0, 1)) << logs();
  // b hands out some ids (a submit sent to b runs there).
  fs::create_directories(dir_.path() / "ledger");
  uint64_t last_id = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = members_[1].proc->ctl(
      {"submit", "demo.ledger", "--args-json",
       R"({"ledger_dir":")" + (dir_.path() / "ledger").string() + R"(","steps":1})"},
      30s);
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    last_id = parse_id(r.out).value_or(0);
  }
  // b reports how far its ids went to the group: every member holds b's floor.
  ASSERT_TRUE(eventually(
    [&] {
      auto v = view(0);
      if (!v)
        return false;
      for (const auto& m : field(*v, "members").list_value().values())
        if (m.struct_value().fields().at("name").string_value() == "b")
          return m.struct_value().fields().at("id_floor").number_value()
                 > static_cast<double>(last_id);
      return false;
    },
    20s, 200ms))
    << last_id << "\n"
    << logs();
  members_[1].proc->kill();
  fs::remove_all(members_[1].proc->data_dir());
  ASSERT_TRUE(members_[1].proc->launch());
  ASSERT_TRUE(eventually([&] { return !members_[1].proc->running(); }, 30s)) << logs();
  EXPECT_EQ(members_[1].proc->last_exit_code(), 1) << logs();
  auto log = read_file(members_[1].proc->log_file());
  EXPECT_NE(log.find("the cluster refused node b"), std::string::npos) << logs();
  EXPECT_NE(log.find("proctor node forget b --confirm-lost"), std::string::npos) << logs();
  // a still lists the old b, untouched.
  EXPECT_EQ(states_seen_by(0).at("b"), "active");

  // Forgotten (on a, for the cluster), b started empty again joins as a new incarnation,
  // under its number, and its ids go on above the old ones: they never repeat.
  run_result forgot;
  ASSERT_TRUE(eventually(
    [&] {
      forgot = members_[0].proc->ctl({"node", "forget", "b", "--confirm-lost"}, 30s);
      return forgot.exit_code == 0;
    },
    20s, 500ms))
    << describe(forgot) << logs();
  fs::remove_all(members_[1].proc->data_dir());
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  ASSERT_TRUE(all_see_active({"a", "b"})) << logs();
  auto r = members_[1].proc->ctl(
    {"submit", "demo.ledger", "--args-json",
     R"({"ledger_dir":")" + (dir_.path() / "ledger").string() + R"(","steps":1})"},
    30s);
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto id = parse_id(r.out).value_or(0);
  EXPECT_EQ(id >> 40, last_id >> 40) << id << " " << last_id;
  EXPECT_GT(id, last_id) << logs();
  // It began above the group's floor for its name (and above what a heard of b).
  EXPECT_NE(read_file(members_[1].proc->log_file()).find("the cluster group holds ids below"),
            std::string::npos)
    << logs();
}

}  // namespace
}  // namespace proctor::test
