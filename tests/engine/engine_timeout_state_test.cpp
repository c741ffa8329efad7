// A suspend's own timeout state (outcome::on_timeout): when the deadline passes before the
// event, the procedure runs that state instead of its resume state, and instead of failing.
// The state is journaled with the wait (Suspended.timeout_state), so a restart while the
// procedure waits, or a crash after the timed-out delivery was journaled, keeps it.
#include <memory>
#include <mutex>
#include <regex>
#include <string>

#include "actors/testing/fault_store.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/rocksdb_store.hpp"
#include "tests/engine/engine_passivation_fixture.hpp"

namespace proctor::testing {
namespace {

/// A store that "crashes" (every later write refused) right after the write that journals
/// a timed-out delivery: the procedure then never commits the step the timeout runs.
class crash_after_timeout_store : public fault_store {
public:
  explicit crash_after_timeout_store(std::shared_ptr<journal_store> inner)
      : fault_store(std::move(inner)) {}

  rocksdb::Status write(const std::vector<store_op>& ops) override {
    std::lock_guard<std::mutex> g(m_);
    auto st = fault_store::write(ops);
    for (const auto& op : ops) {
      pb::JournalRecord r;
      if (st.ok() && op.what == store_op::kind::put && r.ParseFromString(op.value)
          && r.has_delivered() && r.delivered().timed_out())
        crash_now();
    }
    return st;
  }

private:
  std::mutex m_;
};

class timeout_state_test : public passivation_test {
protected:
  /// Suspends on `key` for `deadline_ms` with state 3 as its timeout state; its resume state
  /// 2 `resumed` (DONE or FAIL), state 3 ends it.
  ProbeData waiter(const std::string& key, int deadline_ms, ProbeAction::Kind resumed) {
    auto d =
      probe({act(ProbeAction::SUSPEND, key, deadline_ms), act(resumed), act(ProbeAction::NEXT)});
    d.mutable_actions(0)->set_timeout_state(3);
    return d;
  }

  int started(uint64_t id, int32_t state) {
    auto s = world().starts();
    auto i = s.find(probe_world::key(id, state));
    return i == s.end() ? 0 : i->second;
  }

  /// The history's "suspended" entry of `id`.
  pb::HistoryEntry suspended(uint64_t id) {
    pb::Request h;
    h.mutable_history()->set_id(id);
    auto r = call(h);
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    for (const auto& e : r.history().entries())
      if (e.kind() == "suspended")
        return e;
    return {};
  }
  std::string suspended_entry(uint64_t id) { return suspended(id).detail(); }
};

TEST_F(timeout_state_test, a_passed_deadline_runs_the_suspends_timeout_state) {
  start();
  auto id = submit("test.probe", json(waiter("ts.live", 30, ProbeAction::FAIL)));
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(started(id, 3), 1);
  EXPECT_EQ(started(id, 2), 0) << "the resume state ran after the deadline passed";
  EXPECT_NE(suspended_entry(id).find("on timeout 3"), std::string::npos) << suspended_entry(id);
  expect_clean_world();
}

TEST_F(timeout_state_test, an_event_before_the_deadline_runs_the_resume_state) {
  start();
  auto id = submit("test.probe", json(waiter("ts.event", 60000, ProbeAction::DONE)));
  ASSERT_TRUE(eventually([&] { return status(id).waiting_for() == "event ts.event"; }));
  // The history shows the deadline as a time a person reads, and how far after the step.
  auto e = suspended(id);
  EXPECT_GT(e.deadline_ms(), 0);
  std::smatch m;
  std::string detail = e.detail();
  ASSERT_TRUE(std::regex_search(
    detail, m,
    std::regex(R"(deadline (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) \((\d+) ms after its step\))")))
    << detail;
  EXPECT_EQ(m[1].str(), utc_ms_text(e.deadline_ms()));
  EXPECT_NEAR(std::stoll(m[2].str()), 60000, 1000) << detail;
  EXPECT_EQ(event("ts.event", R"("paid")").code(), pb::Response::OK);
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(started(id, 2), 1);
  EXPECT_EQ(started(id, 3), 0);
  expect_clean_world();
}

// The node restarts while the procedure waits: its wait comes back from the journal with
// its timeout state, and the deadline that passes after the restart runs it.
TEST_F(timeout_state_test, the_timeout_state_survives_a_restart_while_waiting) {
  start();
  auto id = submit("test.probe", json(waiter("ts.restart", 1500, ProbeAction::FAIL)));
  ASSERT_TRUE(eventually([&] { return status(id).waiting_for() == "event ts.restart"; }));
  restart();
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(started(id, 3), 1);
  EXPECT_EQ(started(id, 2), 0);
  expect_clean_world();
}

// The crash comes after the timed-out delivery is durable, before the timeout state's step
// commits: recovery folds the delivery into the timeout state, which runs after the restart.
TEST_F(timeout_state_test, a_crash_after_the_timed_out_delivery_runs_the_timeout_state_again) {
  std::shared_ptr<crash_after_timeout_store> store;
  start([&](node_options& o) {
    std::string err;
    std::shared_ptr<journal_store> inner = open_rocksdb_store(o.data_dir, &err);
    ASSERT_TRUE(inner) << err;
    store = std::make_shared<crash_after_timeout_store>(inner);
    o.store = store;
    o.on_journal_fatal = [](const std::string&) {};  // the "crash"
  });
  auto id = submit("test.probe", json(waiter("ts.crash", 30, ProbeAction::FAIL)));
  ASSERT_TRUE(eventually([&] { return store->frozen(); }));
  stop();
  store.reset();  // the crashed incarnation's database is closed first
  start();
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_GE(started(id, 3), 1);
  EXPECT_EQ(started(id, 2), 0) << "the resume state ran after a timed-out delivery";
  expect_clean_world();
}

// A waiter that gave up its actor while a sibling runs (proc_passivate_waiter.cpp) is held
// passivated by its parent from the image it handed over: the timeout state goes with it.
TEST_F(timeout_state_test, a_passivated_waiter_runs_its_timeout_state) {
  start_with(std::chrono::milliseconds{20});
  auto busy = probe({act(ProbeAction::NEXT)});
  busy.mutable_actions(0)->set_gate("busy");
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = busy;
  *r.mutable_actions(0)->add_children() = waiter("ts.passivated", 2500, ProbeAction::FAIL);
  auto id = submit("test.probe", json(r));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 1; }))
    << "the waiter kept its actor";
  std::vector<uint64_t> ids;  // root, busy, waiter
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 3; }));
  ASSERT_TRUE(eventually([&] { return started(ids[2], 3) == 1; }, std::chrono::seconds{10}));
  world().open("busy");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(started(ids[2], 2), 0) << "the resume state ran after the deadline passed";
  expect_clean_world();
}

}  // namespace
}  // namespace proctor::testing
