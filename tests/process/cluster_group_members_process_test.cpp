// The cluster group's members with real proctord processes (docs/cluster-group.md): a node
// drained, removed once its trees ended, another forgotten for the whole cluster from one
// node; a --peers cluster moved to the group one restart at a time; the founding by command,
// and what is refused around it.
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

TEST_F(cluster_group_nodes, drains_removes_and_forgets_through_the_group) {
  start_three();
  if (HasFatalFailure())
    return;
  for (size_t i = 0; i < 3; ++i)
    ASSERT_TRUE(peers_up(i, 2)) << logs();
  const auto ledger = dir_.path() / "ledger";
  fs::create_directories(ledger);
  // A submit placed by the slot table is refused ("retry") while the nodes' heartbeats still
  // carry different member lists, for up to a heartbeat after a change: a client retries.
  auto submit = [&](size_t at, const std::string& extra) -> uint64_t {
    run_result r;
    eventually(
      [&] {
        r = members_[at].proc->ctl({"submit", "demo.ledger", "--args-json",
                                    R"({"ledger_dir":")" + ledger.string() + R"(")" + extra + "}"},
                                   30s);
        return r.exit_code == 0 || r.err.find("retry") == std::string::npos;
      },
      10s, 100ms);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return parse_id(r.out).value_or(0);
  };
  auto final_state = [&](size_t at, uint64_t id) {
    auto r = members_[at].proc->ctl({"wait", std::to_string(id), "--timeout-s", "60"}, 90s);
    auto v = parse_json(r.out);
    return v ? state_of(*v) : "unreadable: " + describe(r);
  };
  // b holds a slow tree when it starts to drain.
  const auto slow = submit(1, R"(,"steps":4,"step_sleep_ms":1500)");
  ASSERT_NE(slow, 0u);

  // Drained, asked at c: every node places nothing new on it.
  auto drain = members_[2].proc->ctl({"node", "drain", "b"}, 30s);
  ASSERT_EQ(drain.exit_code, 0) << describe(drain) << logs();
  EXPECT_NE(drain.out.find("draining"), std::string::npos) << drain.out;
  ASSERT_TRUE(eventually(
    [&] {
      for (size_t i = 0; i < 3; ++i)
        if (states_seen_by(i)["b"] != "draining")
          return false;
      return true;
    },
    10s, 100ms))
    << logs();
  // Not removed while it holds the slow tree: the refusal says what it holds.
  auto early = members_[0].proc->ctl({"node", "remove", "b"}, 30s);
  EXPECT_EQ(early.exit_code, 1) << describe(early);
  EXPECT_NE(early.err.find("still holds"), std::string::npos) << describe(early);
  // A tree spread over "the nodes" skips b; submits sent to b run elsewhere.
  const auto spread = submit(0, R"(,"spread":true,"steps":1,"children":4,"depth":1)");
  EXPECT_EQ(final_state(0, spread), "SUCCESS") << logs();
  auto all = members_[0].proc->ctl({"list", "--all", "--json"}, 30s);
  auto listed = parse_json(all.out);
  ASSERT_TRUE(listed) << describe(all);
  for (const auto& p : listed->list_value().values()) {
    if (static_cast<uint64_t>(field(p, "root_id").number_value()) != spread)
      continue;  // (the slow tree runs on b)
    if (auto n = p.struct_value().fields().find("node"); n != p.struct_value().fields().end()) {
      EXPECT_NE(n->second.string_value(), "b") << all.out;
    }
  }
  double b_number = 0;
  const auto seen = view_of(0);
  for (const auto& m : field(seen, "members").list_value().values())
    if (m.struct_value().fields().at("name").string_value() == "b")
      b_number = m.struct_value().fields().at("number").number_value();
  for (int i = 0; i < 5; ++i) {
    const auto id = submit(1, R"(,"steps":1)");
    ASSERT_NE(id, 0u);
    EXPECT_NE(static_cast<double>(id >> 40), b_number) << "submit " << i << " ran on b";
  }
  // Once its tree ended, b is removed (asked at a, answered by b).
  EXPECT_EQ(final_state(1, slow), "SUCCESS") << logs();
  auto removed = ctl_until_ok(0, {"node", "remove", "b"}, 20s);
  ASSERT_EQ(removed.exit_code, 0) << describe(removed) << logs();
  EXPECT_NE(removed.out.find("left"), std::string::npos) << removed.out;
  ASSERT_TRUE(eventually([&] { return states_seen_by(0)["b"] == "left"; }, 10s, 100ms)) << logs();

  // c is lost: forgotten once, on a, for the whole cluster.
  members_[2].proc->kill();
  ASSERT_TRUE(eventually(
    [&] {
      auto r = members_[0].proc->ctl({"node", "forget", "c", "--confirm-lost"}, 30s);
      return r.exit_code == 0 && r.out.find("the cluster group") != std::string::npos;
    },
    20s, 500ms))
    << logs();
  EXPECT_EQ(states_seen_by(0)["c"], "forgotten");
  // Its data directory started again: the group forgot that incarnation, it does not serve.
  const auto before = read_file(members_[2].proc->log_file()).size();
  ASSERT_TRUE(members_[2].proc->launch());
  EXPECT_TRUE(eventually([&] { return !members_[2].proc->running(); }, 30s)) << logs();
  EXPECT_NE(read_file(members_[2].proc->log_file()).substr(before).find("forgot"),
            std::string::npos)
    << logs();
}

TEST_F(cluster_group_nodes, a_cluster_of_peers_moves_to_the_group_one_restart_at_a_time) {
  // Two nodes of a --peers cluster (docs/cluster.md, "From --peers to the group"), a tree
  // across them.
  const auto pa = free_port(), pb = free_port(), ga = free_port(), gb = free_port();
  const auto addr = [](uint16_t p) { return "127.0.0.1:" + std::to_string(p); };
  node a(dir_.path() / "a", pa, {"--name", "a", "--peers", "b=" + addr(pb)});
  node b(dir_.path() / "b", pb, {"--name", "b", "--peers", "a=" + addr(pa)});
  ASSERT_TRUE(a.start()) << a.log_tail();
  ASSERT_TRUE(b.start()) << b.log_tail();
  fs::create_directories(dir_.path() / "ledger");
  auto sub = a.ctl({"submit", "demo.ledger", "--args-json",
                    R"({"ledger_dir":")" + (dir_.path() / "ledger").string()
                      + R"(","spread":true,"steps":1,"children":2,"depth":1})"},
                   30s);
  ASSERT_EQ(sub.exit_code, 0) << describe(sub);
  const auto id = parse_id(sub.out).value_or(0);
  auto waited = a.ctl({"wait", std::to_string(id), "--timeout-s", "60"}, 90s);
  ASSERT_NE(waited.out.find("SUCCESS"), std::string::npos) << describe(waited);

  // a founds the group, then b joins it: each restarted once, --peers kept.
  ASSERT_EQ(a.stop(), 0);
  node a2(dir_.path() / "a", pa,
          {"--name", "a", "--peers", "b=" + addr(pb), "--group-port", std::to_string(ga),
           "--cluster-init"});
  ASSERT_TRUE(a2.start()) << a2.log_tail();
  ASSERT_EQ(b.stop(), 0);
  node b2(dir_.path() / "b", pb,
          {"--name", "b", "--peers", "a=" + addr(pa), "--group-port", std::to_string(gb), "--seeds",
           addr(pa)});
  ASSERT_TRUE(b2.start()) << b2.log_tail();
  auto both_active = [&](node& n) {
    return eventually(
      [&] {
        auto r = n.ctl({"cluster", "nodes", "--json"}, 15s);
        auto v = parse_json(r.out);
        if (r.exit_code != 0 || !v)
          return false;
        std::set<std::string> active;
        for (const auto& m : field(*v, "members").list_value().values())
          if (m.struct_value().fields().at("state").string_value() == "active")
            active.insert(m.struct_value().fields().at("name").string_value());
        return active == std::set<std::string>{"a", "b"};
      },
      30s, 200ms);
  };
  ASSERT_TRUE(both_active(a2)) << a2.log_tail() << b2.log_tail();
  ASSERT_TRUE(both_active(b2)) << a2.log_tail() << b2.log_tail();
  // The tree of the --peers days is still answered, from either node (once b's link to the
  // restarted a is connected again: until then b answers "not connected yet").
  run_result seen;
  eventually(
    [&] {
      seen = b2.ctl({"status", std::to_string(id)}, 30s);
      return seen.out.find("SUCCESS") != std::string::npos;
    },
    20s, 200ms);
  EXPECT_NE(seen.out.find("SUCCESS"), std::string::npos) << describe(seen);

  // --peers dropped: a restarted with the group alone still links to b.
  ASSERT_EQ(a2.stop(), 0);
  node a3(dir_.path() / "a", pa, {"--name", "a", "--group-port", std::to_string(ga)});
  ASSERT_TRUE(a3.start()) << a3.log_tail();
  ASSERT_TRUE(eventually(
    [&] {
      auto v = parse_json(a3.ctl({"nodes", "--json"}, 10s).out);
      if (!v)
        return false;
      for (const auto& x : v->list_value().values())
        if (x.struct_value().fields().at("name").string_value() == "b")
          return x.struct_value().fields().at("up").bool_value();
      return false;
    },
    20s, 200ms))
    << a3.log_tail();
  auto again = a3.ctl({"status", std::to_string(id)}, 30s);
  EXPECT_NE(again.out.find("SUCCESS"), std::string::npos) << describe(again);
}

TEST_F(cluster_group_nodes, founded_by_command_once_and_refused_where_it_cannot_be) {
  members_.reserve(2);
  add("x", {});
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  auto before = members_[0].proc->ctl({"cluster", "nodes"}, 15s);
  EXPECT_EQ(before.exit_code, 0) << describe(before);
  EXPECT_NE(before.out.find("member of no cluster"), std::string::npos) << before.out;
  auto init = members_[0].proc->ctl({"cluster", "init"}, 30s);
  ASSERT_EQ(init.exit_code, 0) << describe(init) << logs();
  EXPECT_NE(init.out.find("founded the cluster"), std::string::npos) << init.out;
  auto again = members_[0].proc->ctl({"cluster", "init"}, 30s);
  EXPECT_EQ(again.exit_code, 1) << describe(again);
  EXPECT_NE(again.err.find("already"), std::string::npos) << describe(again);
  ASSERT_TRUE(all_see_active({"x"})) << logs();
  const auto id = field_of(0, "cluster_id");

  // Its restart reads the group back from its directory: the same cluster, x active.
  ASSERT_EQ(members_[0].proc->stop(), 0) << logs();
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  ASSERT_TRUE(all_see_active({"x"})) << logs();
  EXPECT_EQ(field_of(0, "cluster_id"), id);

  // A node that joined cannot found another cluster.
  add("y", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  ASSERT_TRUE(all_see_active({"x", "y"})) << logs();
  auto refused = members_[1].proc->ctl({"cluster", "init"}, 30s);
  EXPECT_EQ(refused.exit_code, 1) << describe(refused);
  EXPECT_NE(refused.err.find("already"), std::string::npos) << describe(refused);

  // A node without --group-port takes no part, and says so.
  node plain(dir_.path() / "plain", 0, {"--name", "plain"});
  ASSERT_TRUE(plain.start()) << plain.log_tail();
  auto none = plain.ctl({"cluster", "nodes"}, 15s);
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("takes no part in a cluster group"), std::string::npos) << describe(none);

  // Options that do not go together are refused before anything starts.
  auto bad =
    run_program(bin_path("proctord"), {"--data-dir", (dir_.path() / "bad").string(), "--listen",
                                       "127.0.0.1:0", "--name", "z", "--seeds", seed_of(0)});
  EXPECT_EQ(bad.exit_code, 64) << describe(bad);
  EXPECT_NE(bad.err.find("go with --group-port"), std::string::npos) << describe(bad);
  auto any = run_program(bin_path("proctord"),
                         {"--data-dir", (dir_.path() / "any").string(), "--listen", "0.0.0.0:0",
                          "--name", "z", "--group-port", std::to_string(free_port())});
  EXPECT_EQ(any.exit_code, 64) << describe(any);
  EXPECT_NE(any.err.find("IPv4 address other nodes reach"), std::string::npos) << describe(any);
}

}  // namespace
}  // namespace proctor::test
