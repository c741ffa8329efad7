// Nonces when slots move (docs/cluster-group.md; executor_handoff.cpp), crashed at each of the
// handoff's journal boundaries, on both sides, by construction rather than by chance (the
// seeded nodes_handoff test stops nodes at random moments):
//   - the taker: node b becomes active and takes slots over from a; its store dies at the
//     write of the nonces it took (NonceTaken), before it or right after it;
//   - the giver: a accepts a nonce in a slot about to move to b; its store dies at that
//     root's Submitted record, before it or right after it, and the change comes while a is
//     down.
// Each time the crashed node is restarted on what its store kept, and then every nonce,
// sent through random nodes, answers the id it answered first (and the giver's nonce, if
// its Submitted became durable, that root's id), and none answers two.
#include <atomic>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/engine_group_nodes_fixture.hpp"

namespace proctor::testing {
namespace {

/// A node's RocksDB store that dies at the first write carrying a record `trip` names: the
/// write refused ("before"), or applied and then nothing more ("after"), as a kill at that
/// moment would leave the directory.
class trip_store : public forwarding_store {
public:
  explicit trip_store(std::unique_ptr<journal_store> inner) : forwarding_store(std::move(inner)) {}

  void arm(std::function<bool(const pb::JournalRecord&)> trip, bool after) {
    std::lock_guard<std::mutex> g(mtx_);
    trip_ = std::move(trip);
    after_ = after;
  }
  bool frozen() const { return frozen_; }

  rocksdb::Status write(const std::vector<store_op>& ops) override {
    std::lock_guard<std::mutex> g(mtx_);
    if (frozen_)
      return rocksdb::Status::IOError("store frozen (simulated crash)");
    bool hit = false;
    if (trip_)
      for (const auto& op : ops) {
        pb::JournalRecord r;
        if (op.what == store_op::kind::put && r.ParseFromString(op.value) && trip_(r))
          hit = true;
      }
    if (hit && !after_) {
      frozen_ = true;
      return rocksdb::Status::IOError("store frozen (simulated crash) before the write");
    }
    auto st = forwarding_store::write(ops);
    if (hit)
      frozen_ = true;
    return st;
  }

private:
  std::mutex mtx_;
  std::function<bool(const pb::JournalRecord&)> trip_;
  bool after_ = false;
  std::atomic<bool> frozen_{false};
};

const std::vector<std::string> names{"a", "b", "c"};

class nodes_handoff_crash : public group_nodes_fixture,
                            public ::testing::WithParamInterface<std::tuple<bool, bool>> {
protected:
  void SetUp() override {
    open_store_ = [this](const std::string& name,
                         const std::string& dir) -> std::shared_ptr<journal_store> {
      stores_.erase(name);  // the last incarnation's: let go of its RocksDB
      std::string err;
      auto inner = open_rocksdb_store(dir, &err);
      if (!inner)
        return nullptr;
      auto s = std::make_shared<trip_store>(std::move(inner));
      stores_[name] = s;
      return s;
    };
    nodes_fixture::SetUp();
    // a founded the cluster; b and c have joined and take no work yet.
    members_ = {{"a", {pb::ACTIVE, 1}}, {"b", {pb::JOINING, 1}}, {"c", {pb::JOINING, 1}}};
    for (const auto& n : names)
      report(n, true);
    for (const auto& n : names)
      publish(n);
  }

  /// The nonce's id, sent through a random node until answered (20 s).
  uint64_t answer_of(const std::string& nonce, const std::string& key) {
    pb::Response r;
    eventually(
      [&] {
        r = submit_nonce(names[rng_() % names.size()], nonce, key, std::chrono::seconds{3});
        return r.code() == pb::Response::OK;
      },
      std::chrono::seconds{20});
    EXPECT_EQ(r.code(), pb::Response::OK) << nonce << ": " << r.error();
    return r.id();
  }

  /// Node `n` crashed (its store died) and is started again on what its store kept.
  void restart_crashed(const std::string& n) {
    ASSERT_TRUE(eventually([&] { return stores_.at(n)->frozen(); })) << n << "'s store never died";
    stop_node(n);
    report(n, false);
    start_node(n);
    report(n, true);
    publish(n);
  }

  std::map<std::string, std::shared_ptr<trip_store>> stores_;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_P(nodes_handoff_crash, a_crash_at_a_handoff_write_never_answers_a_nonce_twice) {
  const auto [giver, after] = GetParam();
  SCOPED_TRACE(std::string(giver ? "the giver" : "the taker") + " crashed "
               + (after ? "right after" : "before") + " its write");
  // 24 nonces, every third placed by a key, all accepted by a (it owns every slot).
  std::map<std::string, std::pair<std::string, uint64_t>> ids;
  for (int i = 0; i < 24; ++i) {
    const auto n = "n-" + std::to_string(i);
    const auto key = i % 3 == 0 ? "k-" + std::to_string(i) : std::string{};
    ids[n] = {key, answer_of(n, key)};
    ASSERT_EQ(ids[n].second >> 40, node_number_of("a")) << n;
  }

  // A key whose slot moves to b when b becomes active.
  const auto moving = key_owned_by({"a", "b"}, "b", "late-");
  uint64_t durable = 0;  // the giver's late nonce's id, if its Submitted became durable

  members_["b"] = {pb::ACTIVE, 2};
  if (giver) {
    // a accepts the late nonce (at the old table) and dies at its Submitted record; the
    // change comes while it is down.
    stores_.at("a")->arm(
      [](const pb::JournalRecord& r) {
        return r.has_submitted() && r.submitted().nonce() == "late-nonce";
      },
      after);
    auto r = submit_nonce("a", "late-nonce", moving, std::chrono::seconds{3});
    if (after) {
      ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
      durable = r.id();
    } else {
      EXPECT_NE(r.code(), pb::Response::OK) << "acknowledged what was not durable";
    }
    ASSERT_TRUE(eventually([&] { return stores_.at("a")->frozen(); }));
    stop_node("a");
    report("a", false);
    publish("b");
    publish("c");
    // b takes over and waits for a: the late nonce answers nothing else meanwhile.
    auto mid = submit_nonce("b", "late-nonce", moving, std::chrono::seconds{3});
    EXPECT_NE(mid.code(), pb::Response::OK) << "answered " << mid.id() << " without a's nonces";
    start_node("a");
    report("a", true);
    publish("a");
  } else {
    // b takes over and dies at the write of the nonces it took.
    stores_.at("b")->arm([](const pb::JournalRecord& r) { return r.has_nonce_taken(); }, after);
    for (const auto& n : names)
      publish(n);
    ASSERT_TRUE(eventually([&] { return stores_.at("b")->frozen(); })) << "b wrote no NonceTaken";
    // While b is down, no nonce answers another id (some are refused: "retry").
    for (int i = 0; i < 24; i += 4) {
      const auto n = "n-" + std::to_string(i);
      auto r = submit_nonce("c", n, ids[n].first, std::chrono::seconds{3});
      if (r.code() == pb::Response::OK) {
        EXPECT_EQ(r.id(), ids[n].second) << n << " answered another id while b was down";
      }
    }
    restart_crashed("b");
  }
  if (HasFatalFailure())
    return;

  // Every node up and told: each nonce answers its first id, through any node.
  for (const auto& n : names)
    publish(n);
  for (const auto& [n, x] : ids)
    EXPECT_EQ(answer_of(n, x.first), x.second) << n << " answered another id: it ran twice";
  if (giver) {
    const auto late = answer_of("late-nonce", moving);
    if (after) {
      EXPECT_EQ(late, durable) << "the late nonce's durable root was not found: it ran twice";
    }
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(answer_of("late-nonce", moving), late);
  }
}

INSTANTIATE_TEST_SUITE_P(boundaries, nodes_handoff_crash,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "giver" : "taker")
                                  + (std::get<1>(info.param) ? "_after" : "_before");
                         });

}  // namespace
}  // namespace proctor::testing
