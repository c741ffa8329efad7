// Randomized interleavings: trees of probes (tests/engine/engine_probe.hpp) with random shapes,
// sibling timings, failures, crashing steps and events, aborted and restarted at random
// moments. Whatever happens, every tree must end (none waits for nothing), an acknowledged
// abort must roll its tree back, a rolled-back tree must have undone every state that
// started exactly once (at most twice across a node restart) and nothing that never
// started, and a tree that succeeded must have undone nothing.
//
// The seed is printed with every failure; PROCTOR_SEED=<n> replays one, PROCTOR_ROUNDS=<n>
// runs more rounds.
#include <cstdlib>
#include <random>

#include <google/protobuf/util/json_util.h>

#include "tests/engine/engine_fixture.hpp"
#include "tests/engine/engine_probe.hpp"

namespace proctor::testing {
namespace {

using testpb::ProbeAction;
using testpb::ProbeData;

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != 0 ? std::strtoull(v, nullptr, 10) : fallback;
}

class random_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    register_probe(types_);
    start();
  }

  /// A random probe tree of at most `depth` more levels; its event keys go to `keys`.
  ProbeData tree_spec(std::mt19937_64& rng, const std::string& world, int depth,
                      std::vector<std::string>* keys) {
    ProbeData d;
    d.set_world(world);
    int states = 1 + static_cast<int>(rng() % 3);
    for (int s = 0; s < states; ++s) {
      auto* a = d.add_actions();
      a->set_sleep_ms(static_cast<int32_t>(rng() % 16));
      auto dice = rng() % 100;
      if (dice < 6) {
        a->set_kind(ProbeAction::FAIL);
      } else if (dice < 14) {
        a->set_kind(ProbeAction::CRASH_ONCE);
      } else if (dice < 24) {
        a->set_kind(ProbeAction::SUSPEND);
        a->set_event_key(world + "-ev" + std::to_string(keys->size()));
        keys->push_back(a->event_key());
      } else if (dice < 44 && depth > 0) {
        a->set_kind(ProbeAction::SPAWN);
        auto n = 1 + rng() % 3;
        for (size_t i = 0; i < n; ++i)
          *a->add_children() = tree_spec(rng, world, depth - 1, keys);
      } else {
        a->set_kind(ProbeAction::NEXT);
      }
    }
    return d;
  }

  /// Procedure id -> its spec, for the tree of `root` spawned from `spec`.
  void map_specs(uint64_t id, const ProbeData& spec, std::map<uint64_t, ProbeData>* out) {
    (*out)[id] = spec;
    std::vector<const ProbeData*> kids;
    for (const auto& a : spec.actions())
      for (const auto& c : a.children())
        kids.push_back(&c);
    auto st = status(id);
    // Children come in spawn order; a step that spawned but was stopped before its
    // children's actors ran still journaled them all.
    for (int i = 0; i < st.children_size() && static_cast<size_t>(i) < kids.size(); ++i)
      map_specs(st.children(i), *kids[static_cast<size_t>(i)], out);
  }

  /// "" if `kind` never started in the tree, else the first key that did.
  std::string started_kind(const std::map<uint64_t, ProbeData>& specs, probe_world& w,
                           ProbeAction::Kind kind) {
    auto starts = w.starts();
    for (const auto& [id, spec] : specs)
      for (int s = 0; s < spec.actions_size(); ++s)
        if (spec.actions(s).kind() == kind && starts.count(probe_world::key(id, s + 1)))
          return probe_world::key(id, s + 1);
    return {};
  }

  std::string json(const ProbeData& d) {
    std::string out;
    EXPECT_TRUE(google::protobuf::util::MessageToJsonString(d, &out).ok());
    return out;
  }
};

TEST_F(random_test, every_tree_ends_and_rolls_back_exactly_what_ran) {
  auto seed = env_or("PROCTOR_SEED", std::random_device{}());
  auto rounds = env_or("PROCTOR_ROUNDS", 10);
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  for (uint64_t round = 0; round < rounds && !HasFailure(); ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto world_name = dir_ + "/round" + std::to_string(round);
    auto& w = probe_world::get(world_name);
    bool restart_node = rng() % 4 == 0;
    struct tree_run {
      ProbeData spec;
      uint64_t id = 0;
      bool aborted = false;
    };
    std::vector<tree_run> trees(3);
    std::vector<std::string> keys;
    for (auto& t : trees) {
      t.spec = tree_spec(rng, world_name, 2, &keys);
      t.id = submit("test.probe", json(t.spec));
      ASSERT_NE(t.id, 0u);
    }
    // A timeline of what happens to the trees over the next 150 ms.
    enum class what { event, abort, restart };
    std::vector<std::tuple<int, what, size_t>> timeline;
    for (size_t i = 0; i < keys.size(); ++i)
      timeline.emplace_back(static_cast<int>(rng() % 150), what::event, i);
    for (size_t i = 0; i < trees.size(); ++i)
      if (rng() % 10 < 3)
        timeline.emplace_back(static_cast<int>(rng() % 150), what::abort, i);
    if (restart_node)
      timeline.emplace_back(static_cast<int>(rng() % 150), what::restart, 0);
    std::sort(timeline.begin(), timeline.end());
    auto t0 = std::chrono::steady_clock::now();
    for (const auto& [at, kind, i] : timeline) {
      std::this_thread::sleep_until(t0 + std::chrono::milliseconds{at});
      switch (kind) {
        case what::event:
          EXPECT_EQ(event(keys[i], "{}").code(), pb::Response::OK);
          break;
        case what::abort: {
          pb::Request req;
          req.mutable_abort()->set_id(trees[i].id);
          trees[i].aborted = call(req).code() == pb::Response::OK;
          break;
        }
        case what::restart:
          restart();
          break;
      }
    }
    for (auto& t : trees) {
      SCOPED_TRACE("tree " + std::to_string(t.id) + ": " + json(t.spec));
      auto s = wait(t.id, std::chrono::seconds{30});
      ASSERT_TRUE(s.state() == pb::SUCCESS || s.state() == pb::ROLLEDBACK)
        << "did not end: " << s.ShortDebugString();
      std::map<uint64_t, ProbeData> specs;
      map_specs(t.id, t.spec, &specs);
      std::set<uint64_t> ids;
      for (const auto& [id, spec] : specs)
        ids.insert(id);
      if (t.aborted) {
        EXPECT_EQ(s.state(), pb::ROLLEDBACK) << "an acknowledged abort was lost";
      }
      if (s.state() == pb::ROLLEDBACK) {
        EXPECT_EQ(w.check_rolled_back(ids, restart_node ? 2 : 1), "");
      } else {
        EXPECT_EQ(w.check_not_undone(ids), "");
        EXPECT_EQ(started_kind(specs, w, ProbeAction::FAIL), "")
          << "a failing step ran, yet the tree succeeded";
      }
    }
    for (const auto& e : w.errors())
      ADD_FAILURE() << e;
  }
}

}  // namespace
}  // namespace proctor::testing
