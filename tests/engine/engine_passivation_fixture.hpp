// The fixture of the passivation tests (engine_passivation_test.cpp: trees that wholly wait;
// engine_passivate_waiter_test.cpp: waiters that give up their actors while their tree runs): a
// node with the probe type registered, a probe world of its own, and the trees and checks both
// build on.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include "tests/engine/engine_fixture.hpp"
#include "tests/engine/engine_probe.hpp"

namespace proctor::testing {

class passivation_test : public engine {
protected:
  using ProbeAction = testpb::ProbeAction;
  using ProbeData = testpb::ProbeData;

  static ProbeAction act(ProbeAction::Kind kind, std::string key = {}, int wait_ms = 0) {
    ProbeAction a;
    a.set_kind(kind);
    a.set_event_key(std::move(key));
    a.set_wait_ms(wait_ms);
    return a;
  }

  static std::string json(const ProbeData& d) {
    std::string out;
    EXPECT_TRUE(google::protobuf::util::MessageToJsonString(d, &out).ok());
    return out;
  }

  void SetUp() override {
    engine::SetUp();
    register_probe(types_);
    world_name_ = dir_;  // unique per test
  }

  void start_with(std::chrono::milliseconds after) {
    start([after](node_options& o) { o.executor.passivate_after = after; });
  }

  probe_world& world() { return probe_world::get(world_name_); }

  ProbeData probe(std::vector<ProbeAction> actions) {
    return make_probe(world_name_, std::move(actions));
  }

  /// root -> child -> grandchild (depth 3), the grandchild running `leaf` then NEXT; each
  /// parent runs a step after its child ended.
  ProbeData chain(std::vector<ProbeAction> leaf) {
    auto g = probe(std::move(leaf));
    *g.add_actions() = act(ProbeAction::NEXT);
    auto c = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
    *c.mutable_actions(0)->add_children() = g;
    auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
    *r.mutable_actions(0)->add_children() = c;
    return r;
  }

  /// Every procedure of the tree of `root`, root first, depth first.
  std::vector<uint64_t> tree(uint64_t root) {
    std::vector<uint64_t> ids;
    std::vector<uint64_t> todo{root};
    while (!todo.empty()) {
      auto id = todo.back();
      todo.pop_back();
      ids.push_back(id);
      auto st = status(id);
      for (auto i = st.children().rbegin(); i != st.children().rend(); ++i)
        todo.push_back(*i);
    }
    return ids;
  }

  long passivated() { return static_cast<long>(metric("proctor_passivated_roots")); }

  /// Milliseconds since the epoch (what deadlines are given in).
  static int64_t wall() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
  }

  pb::Response abort(uint64_t id) {
    pb::Request req;
    req.mutable_abort()->set_id(id);
    return call(req);
  }

  void expect_clean_world() {
    for (const auto& e : world().errors())
      ADD_FAILURE() << e;
  }

  std::string world_name_;
};

}  // namespace proctor::testing
