// Passivation: a root that only waits for an event gives up its actor; the executor keeps
// its status and its place among the event's waiters, and the event, the deadline or an
// abort brings the actor back from the journal. Trees found so at recovery start passivated.
#include <string>
#include <vector>

#include "actors/testing/fault_store.hpp"
#include "persistence/rocksdb_store.hpp"
#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

class passivate_root_test : public engine {
protected:
  /// Starts a node whose waiting roots passivate after `after` (negative: never).
  void start_with(std::chrono::milliseconds after) {
    start([after](node_options& o) { o.executor.passivate_after = after; });
  }

  /// The node's proctor_passivated_roots gauge.
  long passivated() { return static_cast<long>(metric("proctor_passivated_roots")); }

  pb::Response abort(uint64_t id) {
    pb::Request req;
    req.mutable_abort()->set_id(id);
    return call(req);
  }
};

TEST_F(passivate_root_test, an_event_wakes_a_passivated_root_from_the_journal) {
  start_with(std::chrono::milliseconds{0});
  auto id = submit("demo.wait_event", R"({"key":"k1"})");
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }));
  auto s = status(id);
  EXPECT_EQ(s.state(), pb::WAITING);
  EXPECT_EQ(s.waiting_for(), "event k1");
  EXPECT_EQ(starts(id), 1);
  auto r = event("k1", R"({"v":42})");
  EXPECT_EQ(r.text(), "event 'k1' delivered to 1 waiting procedure(s)");
  s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.result_json(), R"({"v":42})");
  EXPECT_EQ(starts(id), 2);  // started, then woken from the journal
  EXPECT_EQ(passivated(), 0);
}

TEST_F(passivate_root_test, the_deadline_of_a_passivated_root_still_fires) {
  start_with(std::chrono::milliseconds{0});
  // Over a second ahead: a nearer deadline keeps the tree awake (proc_passivate_tree.cpp).
  auto id = submit("demo.wait_event", R"({"key":"nobody","timeout_ms":1500})");
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }));
  auto s = wait(id);
  EXPECT_NE(s.state(), pb::SUCCESS);
  EXPECT_NE(s.error().find("timed out"), std::string::npos) << s.error();
  EXPECT_EQ(starts(id), 2);
}

TEST_F(passivate_root_test, an_abort_reaches_a_passivated_root) {
  start_with(std::chrono::milliseconds{0});
  auto id = submit("demo.wait_event", R"({"key":"k2"})");
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }));
  auto r = abort(id);
  EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK) << s.error();
  EXPECT_NE(s.error().find("aborted by operator"), std::string::npos) << s.error();
}

TEST_F(passivate_root_test, waiting_roots_start_passivated_after_a_restart) {
  start_with(std::chrono::milliseconds{-1});
  std::vector<uint64_t> ids;
  for (int i = 0; i < 20; ++i)
    ids.push_back(submit("demo.wait_event", R"({"key":"r)" + std::to_string(i) + R"("})"));
  auto key = [&](uint64_t id) { return "r" + std::to_string(id - ids[0]); };
  for (auto id : ids)
    ASSERT_TRUE(eventually([&] { return status(id).waiting_for() == "event " + key(id); }));
  EXPECT_EQ(passivated(), 0);  // never, on this node
  restart();
  EXPECT_EQ(passivated(), 20);
  for (auto id : ids) {
    EXPECT_EQ(status(id).waiting_for(), "event " + key(id));
    EXPECT_EQ(starts(id), 1) << "recovery started an actor for a waiting root";
  }
  for (int i = 0; i < 20; ++i)
    event("r" + std::to_string(i), std::to_string(i));
  for (size_t i = 0; i < ids.size(); ++i) {
    auto s = wait(ids[i]);
    EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
    EXPECT_EQ(s.result_json(), std::to_string(i));
  }
}

TEST_F(passivate_root_test, no_passivation_when_disabled_even_after_a_restart) {
  start_with(std::chrono::milliseconds{-1});
  auto id = submit("demo.wait_event", R"({"key":"k3"})");
  ASSERT_TRUE(eventually([&] { return status(id).waiting_for() == "event k3"; }));
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{-1}; });
  ASSERT_TRUE(eventually([&] { return starts(id) == 2; }));
  EXPECT_EQ(passivated(), 0);
  event("k3", "1");
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
}

// The node dies after an event for a passivated root was journaled and before the root's
// actor journaled the delivery: the restarted node finds the event and wakes the root.
TEST_F(passivate_root_test, an_event_journaled_before_a_crash_wakes_the_root_after_recovery) {
  std::shared_ptr<fault_store> faults;
  start([&](node_options& o) {
    o.executor.passivate_after = std::chrono::milliseconds{0};
    std::string err;
    std::shared_ptr<journal_store> inner = open_rocksdb_store(o.data_dir, &err);
    ASSERT_TRUE(inner) << err;
    faults = std::make_shared<fault_store>(inner);
    o.store = faults;
    o.on_journal_fatal = [](const std::string&) {};  // the "crash"
  });
  auto id = submit("demo.wait_event", R"({"key":"kc"})");
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }));
  faults->crash_at(2, false);  // 1: the event is journaled; 2 (the delivery) never is
  auto r = event("kc", R"("after the crash")");
  EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
  ASSERT_TRUE(faults->wait_frozen(std::chrono::seconds{10}));
  faults.reset();
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{0}; });
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.result_json(), R"("after the crash")");
}

// Events and aborts race with roots deciding to passivate: none may be lost.
TEST_F(passivate_root_test, events_and_aborts_racing_with_passivation_are_never_lost) {
  start_with(std::chrono::milliseconds{0});
  std::vector<uint64_t> ids;
  for (int i = 0; i < 150; ++i) {
    ids.push_back(submit("demo.wait_event", R"({"key":"race)" + std::to_string(i) + R"("})"));
    if (i % 3 == 2)
      abort(ids[static_cast<size_t>(i - 1)]);  // may find it live, passivating or passivated
    if (i % 3 == 1)
      continue;
    event("race" + std::to_string(i), std::to_string(i));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    auto s = wait(ids[i], std::chrono::seconds{20});
    if (i % 3 == 1) {
      // Aborted wherever the abort found it: running, passivating, passivated or waking.
      EXPECT_EQ(s.state(), pb::ROLLEDBACK) << "procedure " << ids[i] << ": " << s.error();
    } else {
      EXPECT_EQ(s.state(), pb::SUCCESS) << "procedure " << ids[i] << ": " << s.error();
      EXPECT_EQ(s.result_json(), std::to_string(i));
    }
  }
  EXPECT_EQ(passivated(), 0);
}

}  // namespace
}  // namespace proctor::testing
