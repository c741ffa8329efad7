// Join policies across nodes (docs/flow-control.md, "Join policies"): a child on another node
// cancelled by its parent's join is ordered rolled back there through the outbox, its end
// waited for, and its fragment released; a child whose fragment failed and rolled back there
// is a failure the policy contains; the same with the child's node restarted meanwhile.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

using ProbeAction = testpb::ProbeAction;
using ProbeData = testpb::ProbeData;

class nodes_join : public nodes_fixture {
protected:
  void SetUp() override {
    nodes_fixture::SetUp();
    world_name_ = dir_;
    for (std::string n : {"a", "b", "c"})
      report(n, true);
  }

  probe_world& world() { return probe_world::get(world_name_); }

  ProbeData probe(std::vector<ProbeAction> actions, const std::string& node = {}) {
    return make_probe(world_name_, std::move(actions), node);
  }

  /// root: SPAWN `kids` with join::at_least(k), then NEXT.
  ProbeData root_of(std::vector<ProbeData> kids, uint32_t k) {
    auto spawn = act(ProbeAction::SPAWN);
    spawn.set_join_at_least(k);
    for (auto& c : kids)
      *spawn.add_children() = std::move(c);
    return probe({std::move(spawn), act(ProbeAction::NEXT)});
  }

  uint64_t submit_probe(const std::string& at, const ProbeData& d) {
    std::string args;
    EXPECT_TRUE(google::protobuf::util::MessageToJsonString(d, &args).ok());
    return submit(at, args, "test.probe");
  }

  std::vector<uint64_t> children_of(const std::string& at, uint64_t id) {
    pb::Request req;
    req.mutable_status()->set_id(id);
    auto s = call(at, req).status();
    return {s.children().begin(), s.children().end()};
  }

  void expect_clean_world() {
    for (const auto& e : world().errors())
      ADD_FAILURE() << e;
  }

  std::string world_name_;
};

std::string seen(uint64_t id, const char* state, bool cancelled = false) {
  return probe_world::join_entry(id, state, cancelled);
}

// join::any won by the child here: the one on node b, waiting for an event there, is ordered
// rolled back on b; its committed steps are undone there, its fragment released.
TEST_F(nodes_join, a_child_on_another_node_is_cancelled_there) {
  auto remote = probe({act(ProbeAction::NEXT), act(ProbeAction::SUSPEND)}, "b");
  remote.mutable_actions(1)->set_event_key("never");
  auto local = probe({act(ProbeAction::NEXT, "local")});
  auto id = submit_probe("a", root_of({remote, local}, 1));
  ASSERT_TRUE(eventually([&] { return children_of("a", id).size() == 2; }));
  auto kids = children_of("a", id);
  ASSERT_TRUE(world().wait_started(probe_world::key(kids[0], 2)));
  world().open("local");
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(world().joins(id), (std::vector<std::string>{seen(kids[0], "ROLLEDBACK", true),
                                                         seen(kids[1], "SUCCESS")}));
  EXPECT_EQ(world().check_rolled_back({kids[0]}), "");
  EXPECT_EQ(world().check_not_undone({id, kids[1]}), "");
  EXPECT_TRUE(eventually([&] { return fragments_on("b") == 0; }))
    << "the cancelled fragment on b was not released";
  expect_clean_world();
}

// join::at_least(1): the child on node b fails there (and rolls back there); the join can
// still be met, so the tree runs on and the parent sees it FAILED.
TEST_F(nodes_join, a_child_failing_on_another_node_is_contained) {
  auto remote = probe({act(ProbeAction::NEXT), act(ProbeAction::FAIL)}, "b");
  auto local = probe({act(ProbeAction::NEXT, "local")});
  auto id = submit_probe("a", root_of({remote, local}, 1));
  ASSERT_TRUE(eventually([&] { return children_of("a", id).size() == 2; }));
  auto kids = children_of("a", id);
  ASSERT_TRUE(eventually([&] {
    pb::Request req;
    req.mutable_status()->set_id(kids[0]);
    return call("a", req).status().state() == pb::ROLLEDBACK;
  }))
    << "the failed child's end never came back";
  world().open("local");
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(world().joins(id),
            (std::vector<std::string>{seen(kids[0], "FAILED"), seen(kids[1], "SUCCESS")}));
  EXPECT_EQ(world().check_rolled_back({kids[0]}), "");
  EXPECT_EQ(world().check_not_undone({id, kids[1]}), "");
  expect_clean_world();
}

// The cancellation's order to node b waits in the outbox while b is down, and is carried out
// once b is back; the tree then ends.
TEST_F(nodes_join, a_cancellation_waits_for_the_childs_node_to_come_back) {
  auto remote = probe({act(ProbeAction::NEXT), act(ProbeAction::SUSPEND)}, "b");
  remote.mutable_actions(1)->set_event_key("never");
  auto local = probe({act(ProbeAction::NEXT, "local")});
  auto id = submit_probe("a", root_of({remote, local}, 1));
  ASSERT_TRUE(eventually([&] { return children_of("a", id).size() == 2; }));
  auto kids = children_of("a", id);
  ASSERT_TRUE(world().wait_started(probe_world::key(kids[0], 2)));
  ASSERT_TRUE(eventually([&] { return fragments_on("b") == 1; }));
  stop_node("b");
  world().open("local");
  pb::Request req;
  req.mutable_status()->set_id(id);
  ASSERT_TRUE(eventually(
    [&] { return call("a", req).status().waiting_for().find("cancelling") != std::string::npos; }))
    << call("a", req).status().ShortDebugString();
  start_node("b");
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(world().check_rolled_back({kids[0]}, 2), "");
  EXPECT_EQ(world().check_not_undone({id, kids[1]}), "");
  expect_clean_world();
}

}  // namespace
}  // namespace proctor::testing
