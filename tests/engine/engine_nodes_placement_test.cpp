// Placement by key (docs/cluster.md, "Placement by key"; executor_placement.cpp): a submit
// with a key or a nonce runs on the node owning the key's slot, whichever node is asked, so
// the same nonce sent to every node answers one id and starts the work once; an owner that
// does not answer, a forwarded submit for a slot the node does not own, and nodes that
// disagree on the members are refused, never run twice.
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "actors/base/placement.hpp"
#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

class nodes_placement : public nodes_fixture {
protected:
  void SetUp() override {
    nodes_fixture::SetUp();
    for (std::string n : {"a", "b", "c"})
      report(n, true);
  }

  static const placement::table& abc() {
    static const placement::table t({"a", "b", "c"});
    return t;
  }

  pb::Response submit_with(const std::string& at, const std::string& nonce,
                           const std::string& key = {}, bool nonce_local = false) {
    pb::Request req;
    auto* s = req.mutable_submit();
    s->set_type("demo.noop");
    s->set_args_json(R"({"steps":2})");
    s->set_nonce(nonce);
    s->set_key(key);
    s->set_nonce_local(nonce_local);
    return call(at, req);
  }

  /// A key whose slot node `owner` owns.
  static std::string key_owned_by(const std::string& owner, int skip = 0) {
    for (int i = 0;; ++i) {
      auto k = "key-" + std::to_string(i);
      if (abc().owner_of(k) == owner && skip-- == 0)
        return k;
    }
  }

  size_t all_procs() { return procs_on("a") + procs_on("b") + procs_on("c"); }
};

TEST_F(nodes_placement, the_same_nonce_sent_to_every_node_answers_one_id_and_runs_once) {
  for (int i = 0; i < 12; ++i) {
    const auto nonce = "order-" + std::to_string(i);
    std::set<uint64_t> ids;
    for (std::string at : {"a", "b", "c", "b", "a"}) {
      auto r = submit_with(at, nonce);
      ASSERT_EQ(r.code(), pb::Response::OK) << at << ": " << r.error();
      ids.insert(r.id());
    }
    ASSERT_EQ(ids.size(), 1u) << nonce;
    const auto id = *ids.begin();
    EXPECT_EQ(owner_of(id), node_number_of(abc().owner_of(nonce))) << nonce;
    EXPECT_EQ(wait("c", id).state(), pb::SUCCESS);  // asked of any node
  }
  EXPECT_EQ(all_procs(), 12u);
}

TEST_F(nodes_placement, a_key_places_the_root_on_its_slots_owner_and_spreads_keys) {
  std::map<uint16_t, int> per_node;
  for (int i = 0; i < 30; ++i) {
    const auto key = "customer-" + std::to_string(i);
    const std::string at = i % 3 == 0 ? "a" : i % 3 == 1 ? "b" : "c";
    auto r = submit_with(at, /*nonce=*/"", key);
    ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
    EXPECT_EQ(owner_of(r.id()), node_number_of(abc().owner_of(key))) << key;
    ++per_node[owner_of(r.id())];
    // A key without a nonce places, and deduplicates nothing: the same key is a new root.
    auto again = submit_with(at, "", key);
    ASSERT_EQ(again.code(), pb::Response::OK) << again.error();
    EXPECT_NE(again.id(), r.id());
    EXPECT_EQ(owner_of(again.id()), owner_of(r.id()));
  }
  EXPECT_EQ(per_node.size(), 3u);  // 30 keys over 3 nodes: each gets some
  // The key places, the nonce deduplicates (on the key's owner).
  const auto key = key_owned_by("c");
  auto first = submit_with("a", "n-with-key", key);
  auto second = submit_with("b", "n-with-key", key);
  ASSERT_EQ(first.code(), pb::Response::OK) << first.error();
  EXPECT_EQ(first.id(), second.id());
  EXPECT_EQ(owner_of(first.id()), node_number_of("c"));
}

TEST_F(nodes_placement, the_clis_own_nonce_and_a_submit_without_either_run_on_the_node_asked) {
  for (std::string at : {"a", "b", "c"}) {
    auto r = submit_with(at, "cli-" + at, "", /*nonce_local=*/true);
    ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
    EXPECT_EQ(owner_of(r.id()), node_number_of(at));
    auto plain = submit_with(at, "");
    ASSERT_EQ(plain.code(), pb::Response::OK) << plain.error();
    EXPECT_EQ(owner_of(plain.id()), node_number_of(at));
  }
}

TEST_F(nodes_placement, an_unreachable_owner_refuses_the_submit_and_nothing_starts) {
  const auto nonce = key_owned_by("c");  // used as the nonce: it places too
  cut("c");
  report("c", false);
  const auto before = procs_on("a") + procs_on("b");
  for (std::string at : {"a", "b"}) {
    auto r = submit_with(at, nonce);
    EXPECT_EQ(r.code(), pb::Response::UNREACHABLE) << r.ShortDebugString();
    EXPECT_NE(r.error().find("owned by node c, which is unreachable"), std::string::npos)
      << r.error();
  }
  EXPECT_EQ(procs_on("a") + procs_on("b"), before);
  // Down without being known so (the report came late): the request times out, saying the
  // submit may have been taken there; sent again once c is back, it is answered once.
  report("c", true);
  auto r = submit_with("a", nonce);
  EXPECT_EQ(r.code(), pb::Response::UNREACHABLE) << r.ShortDebugString();
  EXPECT_NE(r.error().find("did not answer"), std::string::npos) << r.error();
  uncut("c");
  auto ok = submit_with("b", nonce);
  ASSERT_EQ(ok.code(), pb::Response::OK) << ok.error();
  EXPECT_EQ(owner_of(ok.id()), node_number_of("c"));
  EXPECT_EQ(submit_with("a", nonce).id(), ok.id());
  EXPECT_EQ(procs_on("a") + procs_on("b"), before);
}

TEST_F(nodes_placement, a_forwarded_submit_for_a_slot_not_owned_here_is_refused) {
  pb::Request req;
  auto* s = req.mutable_submit();
  s->set_type("demo.noop");
  s->set_nonce(key_owned_by("b"));
  s->set_placement(abc().fingerprint());
  req.set_tag(1);
  auto r = call("a", req);  // as if a node took a for the owner
  EXPECT_EQ(r.code(), pb::Response::REFUSED) << r.ShortDebugString();
  EXPECT_NE(r.error().find("does not own its key's slot"), std::string::npos) << r.error();
  // A sender whose members differ (its --peers, or a node it forgot).
  s->set_nonce(key_owned_by("a"));
  s->set_placement(placement::fingerprint({"a", "b"}));
  r = call("a", req);
  EXPECT_EQ(r.code(), pb::Response::REFUSED) << r.ShortDebugString();
  EXPECT_NE(r.error().find("other members"), std::string::npos) << r.error();
  EXPECT_EQ(all_procs(), 0u);
  // The same, from a sender that agrees: run here.
  s->set_placement(abc().fingerprint());
  r = call("a", req);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(owner_of(r.id()), node_number_of("a"));
}

TEST_F(nodes_placement, nodes_that_disagree_on_the_members_refuse_keyed_submits) {
  // b says (in its heartbeat answer) that it places on a and b only.
  peer_status s;
  s.name = "b";
  s.up = true;
  s.heard = true;
  s.number = node_number_of("b");
  s.members = {"a", "b"};
  caf::anon_send(nodes_.at("a")->executor(), peer_status_atom::value, s);
  ASSERT_TRUE(eventually([&] {
    auto r = submit_with("a", "", "any-key");
    return r.code() == pb::Response::REFUSED
           && r.error().find("node b on {a, b}") != std::string::npos;
  }))
    << submit_with("a", "", "any-key").ShortDebugString();
  // A submit that places nothing still runs.
  EXPECT_EQ(submit_with("a", "").code(), pb::Response::OK);
  s.members = {"a", "b", "c"};
  caf::anon_send(nodes_.at("a")->executor(), peer_status_atom::value, s);
  EXPECT_TRUE(
    eventually([&] { return submit_with("a", "", "any-key").code() == pb::Response::OK; }));
}

// Clients send nonces (many repeated) to random nodes while nodes are cut off and come back
// and one restarts from its journal: whatever each answer was, no nonce is ever answered
// with two ids, and once every node is back each nonce, sent again anywhere, names exactly
// one procedure in the cluster. PROCTOR_TEST_SEED replays a run; a failure prints its seed.
TEST_F(nodes_placement, random_nonces_to_random_nodes_while_owners_come_and_go_start_each_once) {
  const char* env = std::getenv("PROCTOR_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  SCOPED_TRACE("PROCTOR_TEST_SEED=" + std::to_string(seed));
  const std::vector<std::string> names{"a", "b", "c"};
  std::mutex mtx;
  std::map<std::string, uint64_t> answered;  // nonce -> the id every OK answer gave
  std::set<std::string> sent;
  std::map<pb::Response::Code, int> codes;
  auto client = [&](uint64_t s) {
    std::mt19937_64 rng(s);
    for (int i = 0; i < 40; ++i) {
      auto nonce = "r-" + std::to_string(rng() % 30);
      auto at = names[rng() % 3];
      {
        std::lock_guard g(mtx);
        sent.insert(nonce);
      }
      auto r = submit_with(at, nonce);
      std::lock_guard g(mtx);
      ++codes[r.code()];
      if (r.code() != pb::Response::OK)
        continue;
      auto [it, fresh] = answered.emplace(nonce, r.id());
      // (In a client's thread: the seed is in the message, not in the SCOPED_TRACE.)
      EXPECT_EQ(it->second, r.id())
        << "nonce " << nonce << " answered with two ids (seed " << seed << ")";
    }
  };
  std::mt19937_64 chaos(seed);
  std::vector<std::thread> clients;
  for (uint64_t c = 0; c < 3; ++c)
    clients.emplace_back(client, seed * 31 + c);
  // Meanwhile a node is cut off and comes back, six times.
  for (int round = 0; round < 6; ++round) {
    auto victim = names[chaos() % 3];
    cut(victim);
    report(victim, false);
    std::this_thread::sleep_for(std::chrono::milliseconds(10 + chaos() % 40));
    uncut(victim);
    report(victim, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(chaos() % 30));
  }
  for (auto& t : clients)
    t.join();
  // A restart: what the owners took is in their journals.
  stop_node("c");
  start_node("c");
  for (auto& n : names)
    report(n, true);
  // Every nonce sent, once more, anywhere: one id each, the one any earlier OK gave.
  std::set<uint64_t> ids;
  for (const auto& nonce : sent) {
    auto r = submit_with(names[chaos() % 3], nonce);
    ASSERT_EQ(r.code(), pb::Response::OK) << nonce << ": " << r.error();
    if (auto it = answered.find(nonce); it != answered.end()) {
      EXPECT_EQ(it->second, r.id()) << "nonce " << nonce << " answered with two ids";
    }
    EXPECT_EQ(owner_of(r.id()), node_number_of(abc().owner_of(nonce))) << nonce;
    ids.insert(r.id());
  }
  EXPECT_EQ(ids.size(), sent.size());
  EXPECT_EQ(all_procs(), sent.size()) << "a nonce started the work more than once";
  std::string tally;
  for (auto [code, n] : codes)
    tally += pb::Response::Code_Name(code) + " " + std::to_string(n) + " ";
  std::printf("[ info ] seed %llu: %zu nonces, answers %s\n", static_cast<unsigned long long>(seed),
              sent.size(), tally.c_str());
}

}  // namespace
}  // namespace proctor::testing
