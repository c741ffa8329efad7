// The fixture of the cluster group's process tests (cluster_group_process_test.cpp,
// cluster_group_members_process_test.cpp): the group fixture, and what those tests read of
// each node (its `cluster nodes --json`, the members it sees active, its peers up).
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>

#include <google/protobuf/struct.pb.h>

#include "tests/process/cluster_group_fixture.hpp"

namespace proctor::test::group_nodes {

using namespace std::chrono_literals;
using google::protobuf::Value;

class cluster_group_nodes : public cluster_group_fixture {
protected:
  /// Node i's `cluster nodes --json` (nullopt when it did not answer).
  std::optional<Value> view(size_t i) {
    auto r = members_[i].proc->ctl({"cluster", "nodes", "--json"}, 15s);
    auto v = r.exit_code == 0 ? parse_json(r.out) : std::nullopt;
    if (!v)
      last_failure_ = describe(r);
    return v;
  }

  /// Node i's view, which must be there (a failure says why not).
  Value view_of(size_t i) {
    auto v = eventually([&] { return view(i).has_value(); }, 10s, 200ms) ? view(i) : std::nullopt;
    EXPECT_TRUE(v) << members_[i].name << ": " << last_failure_;
    return v.value_or(Value{});
  }

  /// Whether every running node lists exactly `names`, each active, within `limit`.
  bool all_see_active(const std::set<std::string>& names, std::chrono::milliseconds limit = 30s) {
    return eventually(
      [&] {
        for (size_t i = 0; i < members_.size(); ++i) {
          if (!members_[i].proc->running())
            continue;
          auto seen = states_seen_by(i);
          if (seen.size() != names.size())
            return false;
          for (const auto& [name, state] : seen)
            if (names.count(name) == 0 || state != "active")
              return false;
        }
        return true;
      },
      limit, 200ms);
  }

  /// a founds the cluster, b and c join through it: all three active.
  void start_three() {
    members_.reserve(3);
    add("a", {"--cluster-init"});
    ASSERT_TRUE(members_[0].proc->start()) << logs();
    add("b", {"--seeds", seed_of(0)});
    add("c", {"--seeds", seed_of(0)});
    ASSERT_TRUE(members_[1].proc->start()) << logs();
    ASSERT_TRUE(members_[2].proc->start()) << logs();
    ASSERT_TRUE(all_see_active({"a", "b", "c"})) << logs();
  }

  /// Whether node i sees `n` peers up (`proctor nodes`) within `limit`.
  bool peers_up(size_t i, size_t n, std::chrono::milliseconds limit = 20s) {
    return eventually(
      [&] {
        auto r = members_[i].proc->ctl({"nodes", "--json"}, 10s);
        auto v = parse_json(r.out);
        if (r.exit_code != 0 || !v)
          return false;
        size_t up = 0;
        for (const auto& x : v->list_value().values())
          up += !x.struct_value().fields().at("self").bool_value()
                && x.struct_value().fields().at("up").bool_value();
        return up == n;
      },
      limit, 200ms);
  }

  std::string field_of(size_t i, const std::string& key) {
    auto v = view(i);
    return v ? field(*v, key).string_value() : std::string{};
  }

  std::string last_failure_;
};

}  // namespace proctor::test::group_nodes
