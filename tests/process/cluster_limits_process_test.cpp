// Type limits are the cluster's (docs/flow-control.md, "In a cluster"), with real proctord
// processes: set on one node of a cluster group they hold on every node (each enforcing them
// on what it runs), a node restarted keeps them, a node that joins later gets them, and
// cleared on another node they are gone everywhere.
#include <chrono>
#include <string>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/cluster_group_fixture.hpp"

namespace proctor::test {
namespace {

using namespace std::chrono_literals;
using google::protobuf::Value;

class cluster_limits : public cluster_group_fixture {
protected:
  /// Node i's `limits --json` entry of `type` (a null Value if it did not answer).
  Value limits_of(size_t i, const std::string& type) {
    auto r = members_[i].proc->ctl({"limits", "--json"}, 15s);
    auto v = r.exit_code == 0 ? parse_json(r.out) : std::nullopt;
    if (v)
      for (const auto& x : v->list_value().values())
        if (field(x, "type").string_value() == type)
          return x;
    return Value{};
  }

  /// Whether every running node says `max_running` for demo.noop, set by `source`.
  bool all_hold(double max_running, const std::string& source) {
    return eventually(
      [&] {
        for (size_t i = 0; i < members_.size(); ++i) {
          if (!members_[i].proc->running())
            continue;
          auto l = limits_of(i, "demo.noop");
          if (!l.has_struct_value() || field(l, "max_running").number_value() != max_running
              || field(l, "source").string_value() != source)
            return false;
        }
        return true;
      },
      20s, 200ms);
  }
};

TEST_F(cluster_limits, set_on_one_node_they_hold_on_every_node_and_cleared_on_another_gone) {
  members_.reserve(3);
  add("a", {"--cluster-init"});
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  add("b", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "active"}})) << logs();

  // Set on b (not the group's leader: handed on to it), answered once the group holds it.
  auto set = members_[1].proc->ctl({"limits", "set", "demo.noop", "--max-running", "2"}, 30s);
  ASSERT_EQ(set.exit_code, 0) << describe(set) << logs();
  EXPECT_TRUE(all_hold(2, "operator")) << logs();

  // A node restarted keeps them; one that joins later gets them.
  ASSERT_EQ(members_[0].proc->stop(), 0) << logs();
  ASSERT_TRUE(members_[0].proc->start()) << logs();
  add("c", {"--seeds", seed_of(1)});
  ASSERT_TRUE(members_[2].proc->start()) << logs();
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "active"}, {"c", "active"}})) << logs();
  EXPECT_TRUE(all_hold(2, "operator")) << logs();
  EXPECT_NE(read_file(members_[2].proc->log_file())
              .find("limits set by an operator for the "
                    "cluster"),
            std::string::npos)
    << logs();

  // Changed on c (a field over what holds), then cleared on a: every node follows.
  auto rate = members_[2].proc->ctl({"limits", "set", "demo.noop", "--rate", "50/1s"}, 30s);
  ASSERT_EQ(rate.exit_code, 0) << describe(rate) << logs();
  EXPECT_TRUE(eventually(
    [&] {
      for (size_t i = 0; i < 3; ++i) {
        auto l = limits_of(i, "demo.noop");
        if (field(l, "rate").number_value() != 50 || field(l, "max_running").number_value() != 2)
          return false;
      }
      return true;
    },
    20s, 200ms))
    << logs();
  auto clear = members_[0].proc->ctl({"limits", "clear", "demo.noop"}, 30s);
  ASSERT_EQ(clear.exit_code, 0) << describe(clear) << logs();
  EXPECT_TRUE(all_hold(0, "code")) << logs();
}

}  // namespace
}  // namespace proctor::test
