// What a type declares at registration, end to end: its version and the upgrades of older
// data (a journal of another version is upgraded or quarantined, never run as it is), and
// child-only types.
#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

/// What the steps of `versioned` saw, in order.
std::mutex log_mtx;
std::vector<std::string> step_log;

void note(std::string s) {
  std::lock_guard<std::mutex> g(log_mtx);
  step_log.push_back(std::move(s));
}

std::vector<std::string> logged() {
  std::lock_guard<std::mutex> g(log_mtx);
  return step_log;
}

std::string seen(const pb::FlakyData& d) {
  return "crash_times=" + std::to_string(d.crash_times()) + " ledger_dir=" + d.ledger_dir();
}

/// One class for every version: the registry says which version it is. Prepares, waits for
/// the event "go-<id>", then goes on to succeed or (payload "fail") fails so that the tree
/// rolls back.
class versioned : public state_machine<pb::FlakyData, pb::FlakyState> {
public:
  versioned() {
    on(pb::FLAKY_PREPARE, &versioned::prepare, &versioned::unprepare);
    on(pb::FLAKY_RISKY, &versioned::risky, &versioned::unrisky);
    on(
      pb::FLAKY_FINISH, [](pb::FlakyData&, context&) { return done(); },
      [](pb::FlakyData&, context&) {});
  }

private:
  outcome prepare(pb::FlakyData& d, context& ctx) {
    note("prepare " + seen(d));
    d.set_crash_times(1);
    return suspend("go-" + std::to_string(ctx.id()), pb::FLAKY_RISKY);
  }
  void unprepare(pb::FlakyData& d, context&) { note("undo prepare " + seen(d)); }
  outcome risky(pb::FlakyData& d, context& ctx) {
    note("risky " + seen(d));
    if (ctx.event_payload() == R"("fail")")
      return fail("asked to fail");
    return next(pb::FLAKY_FINISH);  // a StepCommitted (a root's last step is its summary)
  }
  void unrisky(pb::FlakyData& d, context&) { note("undo risky " + seen(d)); }
};

/// Version 2 counts crash_times in hundredths and names its ledger.
void upgrade_1_to_2(pb::FlakyData& d) {
  d.set_crash_times(d.crash_times() * 100);
  d.set_ledger_dir("v2");
}

class types_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    std::lock_guard<std::mutex> g(log_mtx);
    step_log.clear();
  }

  /// The node's types from now on: the demo types and, when `version` > 0, test.versioned.
  registry& retype(uint32_t version, bool with_upgrade = false) {
    types_ = registry{};
    register_demo_procedures(types_);
    if (version > 0) {
      auto decl = types_.add<versioned>("test.versioned", version);
      if (with_upgrade)
        decl.upgrade(1, upgrade_1_to_2);
    }
    return types_;
  }

  /// Runs a test.versioned of version `v` to its wait for the event, and stops the node.
  uint64_t journal_waiting_tree(uint32_t v) {
    retype(v);
    start();
    auto id = submit("test.versioned", R"({"crash_times":7})");
    EXPECT_TRUE(eventually([&] { return status(id).state() == pb::WAITING; }));
    stop();
    return id;
  }

  /// The data_version of every StepCommitted of tree `root`, in order.
  std::vector<uint32_t> step_versions(uint64_t root) {
    std::string err;
    auto store = open_rocksdb_store(dir_ + "/data", &err);
    EXPECT_TRUE(store) << err;
    std::vector<stored_record> recs;
    EXPECT_TRUE(store->read_tree(root, &recs).ok());
    std::vector<uint32_t> out;
    for (const auto& r : recs) {
      pb::JournalRecord rec;
      if (rec.ParseFromString(r.value) && rec.has_step())
        out.push_back(rec.step().data_version());
    }
    return out;
  }

  /// The node quarantined exactly the tree `root`, for `reason`, and ran nothing of it.
  void expect_quarantined(uint64_t root, const std::string& reason) {
    pb::Request req;
    req.mutable_quarantine();
    auto r = call(req);
    ASSERT_EQ(r.code(), pb::Response::OK);
    ASSERT_EQ(r.quarantined_size(), 1);
    EXPECT_EQ(r.quarantined(0).root_id(), root);
    EXPECT_EQ(r.quarantined(0).reason(), reason);
    EXPECT_NE(status(root).waiting_for().find("quarantined: " + reason), std::string::npos)
      << status(root).waiting_for();
    auto before = logged();
    event("go-" + std::to_string(root), R"("ok")");
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
    EXPECT_EQ(logged(), before);
    EXPECT_EQ(starts(root), 1);  // its first run only, before the restart
  }
};

TEST_F(types_test, data_of_an_older_version_is_upgraded_and_runs_to_success) {
  auto id = journal_waiting_tree(1);
  retype(2, true);
  // The finished tree's records stay (not collected into its summary) to be read below.
  start([](node_options& o) { o.executor.collect_after = std::chrono::seconds{60}; });
  event("go-" + std::to_string(id), R"("ok")");
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_EQ(logged(), (std::vector<std::string>{"prepare crash_times=7 ledger_dir=",
                                                "risky crash_times=100 ledger_dir=v2"}));
  stop();
  // The step of version 1 says 1; the one the upgraded node committed says 2.
  EXPECT_EQ(step_versions(id), (std::vector<uint32_t>{1, 2}));
}

TEST_F(types_test, a_rollback_undoes_a_step_of_an_older_version_with_upgraded_data) {
  auto id = journal_waiting_tree(1);
  retype(2, true);
  start();
  event("go-" + std::to_string(id), R"("fail")");
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
  EXPECT_EQ(logged(), (std::vector<std::string>{
                        "prepare crash_times=7 ledger_dir=", "risky crash_times=100 ledger_dir=v2",
                        "undo risky crash_times=100 ledger_dir=v2",
                        // what prepare committed (1), upgraded
                        "undo prepare crash_times=100 ledger_dir=v2"}));
}

TEST_F(types_test, an_older_version_without_an_upgrade_is_quarantined) {
  auto id = journal_waiting_tree(1);
  retype(2, false);
  start();
  expect_quarantined(id, "procedure " + std::to_string(id)
                           + " of type test.versioned was written by version 1; this node "
                             "knows version 2 and has no upgrade from version 1 to 2");
}

TEST_F(types_test, a_newer_version_is_quarantined) {
  auto id = journal_waiting_tree(2);
  retype(1);
  start();
  expect_quarantined(id, "procedure " + std::to_string(id)
                           + " of type test.versioned was written by version 2; this node "
                             "knows version 1 (no downgrade)");
}

TEST_F(types_test, an_unknown_type_is_quarantined) {
  auto id = journal_waiting_tree(1);
  retype(0);
  start();
  expect_quarantined(id, "procedure " + std::to_string(id)
                           + ": unknown procedure type 'test.versioned' (known types: "
                             "demo.call, demo.dispatch, demo.fanout, demo.flaky, demo.forward, "
                             "demo.ledger, demo.ledger.impatient, demo.noop, demo.race, "
                             "demo.reconcile, demo.timer, demo.timers, ... 1 more)");
}

TEST_F(types_test, an_upgrade_that_throws_is_quarantined) {
  auto id = journal_waiting_tree(1);
  retype(0).add<versioned>("test.versioned", 2).upgrade(1, [](pb::FlakyData&) {
    throw std::runtime_error("no way back from 7");
  });
  start();
  expect_quarantined(id, "procedure " + std::to_string(id)
                           + " of type test.versioned: upgrade of 'test.versioned' data from "
                             "version 1 to 2 failed: no way back from 7");
}

// -- child-only types ---------------------------------------------------------------------------

class only_child : public state_machine<pb::NoopData, pb::NoopState> {
public:
  only_child() {
    on(
      pb::NOOP_STEP, [](pb::NoopData&, context&) { return outcome::done(); },
      [](pb::NoopData&, context&) {});
  }
};

class its_parent : public state_machine<pb::FanoutData, pb::FanoutState> {
public:
  its_parent() {
    on(
      pb::FANOUT_SPAWN,
      [](pb::FanoutData&, context&) {
        return spawn({child("test.only_child", pb::NoopData{})}, pb::FANOUT_JOIN);
      },
      [](pb::FanoutData&, context&) {});
    on(
      pb::FANOUT_JOIN, [](pb::FanoutData&, context&) { return done(); },
      [](pb::FanoutData&, context&) {});
  }
};

TEST_F(types_test, a_child_only_type_is_refused_as_a_root_and_spawned_by_a_parent) {
  types_.add<only_child>("test.only_child").child_only();
  types_.add<its_parent>("test.its_parent");
  start();
  pb::Request req;
  req.mutable_submit()->set_type("test.only_child");
  auto r = call(req);
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  EXPECT_EQ(r.error(), "type 'test.only_child' is child-only: only a parent procedure can "
                       "spawn it");
  auto id = submit("test.its_parent", "");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS);
  ASSERT_EQ(s.children_size(), 1);
  EXPECT_EQ(status(s.children(0)).state(), pb::SUCCESS);
  EXPECT_EQ(status(s.children(0)).type(), "test.only_child");
}

}  // namespace
}  // namespace proctor::testing
