// Procedure trees end to end in one process: exact ledgers, rollback in exact reverse journal
// order, abort, the point of no return, events, nonces, restarts.
#include <algorithm>
#include <thread>
#include <vector>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "persistence/actor_messages.hpp"
#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

/// PREPARE (undoable) -> RISKY (point of no return) -> FINISH: fails `crash_times` times
/// with a business failure (retried forward, since the tree is past its point of no return)
/// or, with a non-empty ledger_dir, suspends on event "pnr-<id>" before finishing.
class pnr : public state_machine<pb::FlakyData, pb::FlakyState> {
public:
  pnr() {
    on(pb::FLAKY_PREPARE, &pnr::prepare, &pnr::nothing);
    on_no_rollback(pb::FLAKY_RISKY, &pnr::risky);
    on(pb::FLAKY_FINISH, &pnr::finish, &pnr::nothing);
  }

private:
  outcome prepare(pb::FlakyData&, context&) { return next(pb::FLAKY_RISKY); }
  outcome risky(pb::FlakyData& d, context& ctx) {
    if (!d.ledger_dir().empty())
      return suspend("pnr-" + std::to_string(ctx.id()), pb::FLAKY_FINISH);
    return next(pb::FLAKY_FINISH);
  }
  outcome finish(pb::FlakyData& d, context& ctx) {
    if (ctx.attempt() <= d.crash_times())
      throw procedure_failure("not yet (attempt " + std::to_string(ctx.attempt()) + ")");
    return done();
  }
  void nothing(pb::FlakyData&, context&) {}
};

/// Yields `steps` times before finishing.
class yielder : public state_machine<pb::NoopData, pb::NoopState> {
public:
  yielder() { on(pb::NOOP_STEP, &yielder::step, &yielder::nothing); }

private:
  outcome step(pb::NoopData& d, context& ctx) {
    if (ctx.attempt() <= d.steps())
      return yield(pb::NOOP_STEP);
    return done(R"({"attempts":)" + std::to_string(ctx.attempt()) + "}");
  }
  void nothing(pb::NoopData&, context&) {}
};

/// Spawns a demo.noop (which ends at once) and a demo.wait_event on its own key, and ends
/// once both did.
class two_children : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  two_children() {
    on(pb::WAIT_EVENT_SUSPEND, &two_children::fan, &two_children::nothing);
    on(pb::WAIT_EVENT_RESUME, &two_children::join, &two_children::nothing);
  }

private:
  outcome fan(pb::WaitEventData& d, context&) {
    pb::NoopData quick;
    quick.set_steps(1);
    pb::WaitEventData waiter;
    waiter.set_key(d.key());
    return spawn({child("demo.noop", quick), child("demo.wait_event", waiter)},
                 pb::WAIT_EVENT_RESUME);
  }
  outcome join(pb::WaitEventData&, context&) { return done(); }
  void nothing(pb::WaitEventData&, context&) {}
};

class tree_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    retry_policy fast;
    fast.kind = retry_policy::backoff::fixed;
    fast.delay = std::chrono::milliseconds{5};
    types_.add<pnr>("test.pnr", 1, {}, fast);
    types_.add<yielder>("test.yielder");
    types_.add<two_children>("test.two_children");
  }

  /// Each procedure of `root`'s tree: its state and times, one line each.
  std::vector<std::string> tree_times(uint64_t root) {
    pb::Request req;
    req.mutable_tree()->set_id(root);
    auto r = call(req);
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    std::vector<std::string> out;
    for (const auto& s : r.list())
      out.push_back(std::to_string(s.id()) + " " + pb::ProcState_Name(s.state()) + " started "
                    + std::to_string(s.started_at_ms()) + " since " + std::to_string(s.since_ms())
                    + " ended " + std::to_string(s.ended_at_ms()));
    return out;
  }

  std::string ledger_args(const std::string& extra = {}) {
    return R"({"steps":3,"children":3,"depth":2,"ledger_dir":")" + dir_ + "/ledger\"" + extra + "}";
  }
};

TEST_F(tree_test, tree_succeeds_with_exact_ledger) {
  start();
  auto id = submit("demo.ledger", ledger_args());
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS);
  EXPECT_EQ(s.children_size(), 3);
  EXPECT_EQ(ledger_files(), 39u);
  // Every procedure of the tree is visible and ended SUCCESS.
  for (auto c : s.children()) {
    auto cs = status(c);
    EXPECT_EQ(cs.state(), pb::SUCCESS);
    EXPECT_EQ(cs.root_id(), id);
    EXPECT_EQ(cs.parent_id(), id);
    EXPECT_EQ(cs.children_size(), 3);
    for (auto g : cs.children())
      EXPECT_EQ(status(g).state(), pb::SUCCESS);
  }
}

TEST_F(tree_test, failing_tree_undoes_every_step_in_exact_reverse_journal_order) {
  std::shared_ptr<recording_store> rec;
  start([&](node_options& o) {
    std::string err;
    std::shared_ptr<journal_store> inner = open_rocksdb_store(o.data_dir, &err);
    ASSERT_TRUE(inner) << err;
    rec = std::make_shared<recording_store>(inner);
    o.store = rec;
  });
  auto id = submit("demo.ledger", ledger_args(R"(,"fail_at":2)"));
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("fail_at"), std::string::npos) << s.error();
  EXPECT_EQ(ledger_files(), 0u);
  auto steps = rec->steps(id);
  ASSERT_EQ(steps.size(), 38u);  // 13 procedures x 3 steps, but the root's step 2 failed
  std::vector<uint64_t> expected;
  for (const auto& st : steps)
    expected.push_back(st.lsn);
  std::sort(expected.rbegin(), expected.rend());
  EXPECT_EQ(rec->undone(), expected);
  for (auto c : s.children())
    EXPECT_EQ(status(c).state(), pb::ROLLEDBACK);
}

TEST_F(tree_test, finished_trees_and_nonces_survive_a_restart) {
  start();
  auto a = submit("demo.ledger", ledger_args(), "nonce-a");
  EXPECT_EQ(wait(a).state(), pb::SUCCESS);
  EXPECT_EQ(submit("demo.ledger", ledger_args(), "nonce-a"), a);
  restart();
  EXPECT_EQ(status(a).state(), pb::SUCCESS);
  EXPECT_EQ(status(a).children_size(), 3);
  EXPECT_EQ(submit("demo.ledger", ledger_args(), "nonce-a"), a);
  auto b = submit("demo.ledger", ledger_args());
  EXPECT_GT(b, a);
  EXPECT_EQ(wait(b).state(), pb::SUCCESS);
  EXPECT_EQ(ledger_files(), 78u);
}

TEST_F(tree_test, bad_submits_are_refused_with_a_reason) {
  start();
  pb::Request req;
  req.mutable_submit()->set_type("no.such.type");
  auto r = call(req);
  EXPECT_EQ(r.code(), pb::Response::UNKNOWN_TYPE);
  EXPECT_NE(r.error().find("no.such.type"), std::string::npos);
  req.mutable_submit()->set_type("demo.ledger");
  req.mutable_submit()->set_args_json("{not json");
  r = call(req);
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  req.mutable_submit()->set_args_json(R"({"steps":2})");
  r = call(req);
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(r.error().find("ledger_dir"), std::string::npos) << r.error();
  auto garbage = call(pb::Request{});
  EXPECT_EQ(garbage.code(), pb::Response::BAD_REQUEST);
  caf::scoped_actor self{*sys_};
  self
    ->request(node_->executor(), std::chrono::seconds{5}, rpc_atom::value,
              std::string("\xff\xff\xff garbage"))
    .receive(
      [&](const std::string& bytes) {
        pb::Response resp;
        ASSERT_TRUE(resp.ParseFromString(bytes));
        EXPECT_EQ(resp.code(), pb::Response::BAD_REQUEST);
      },
      [&](caf::error& e) { FAIL() << sys_->render(e); });
}

TEST_F(tree_test, failure_past_the_point_of_no_return_is_retried_forward) {
  start();
  auto id = submit("test.pnr", R"({"crash_times":3})");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
}

TEST_F(tree_test, abort_is_refused_past_the_point_of_no_return_and_rolls_back_before_it) {
  start();
  auto id = submit("test.pnr", R"({"ledger_dir":"x"})");
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::WAITING; }));
  pb::Request req;
  req.mutable_abort()->set_id(id);
  auto r = call(req);
  EXPECT_EQ(r.code(), pb::Response::REFUSED);
  EXPECT_NE(r.error().find("point of no return"), std::string::npos) << r.error();
  event("pnr-" + std::to_string(id), "{}");
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);

  auto w = submit("demo.wait_event", R"({"key":"never"})");
  ASSERT_TRUE(eventually([&] { return status(w).state() == pb::WAITING; }));
  req.mutable_abort()->set_id(w);
  r = call(req);
  EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
  auto s = wait(w);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("aborted"), std::string::npos) << s.error();
}

TEST_F(tree_test, events_wake_waiters_before_and_after_a_restart) {
  start();
  // An event that arrives before anyone suspends on its key is kept for later suspenders.
  EXPECT_EQ(event("early", R"({"n":1})").code(), pb::Response::OK);
  auto early = submit("demo.wait_event", R"({"key":"early"})");
  auto s = wait(early);
  EXPECT_EQ(s.state(), pb::SUCCESS);
  EXPECT_EQ(s.result_json(), R"({"n":1})");
  // Two waiters on one key both wake, also when the event comes after a restart.
  auto a = submit("demo.wait_event", R"({"key":"late"})");
  auto b = submit("demo.wait_event", R"({"key":"late"})");
  ASSERT_TRUE(eventually(
    [&] { return status(a).state() == pb::WAITING && status(b).state() == pb::WAITING; }));
  restart();
  EXPECT_EQ(status(a).state(), pb::WAITING);
  auto r = event("late", R"({"n":2})");
  EXPECT_EQ(r.code(), pb::Response::OK);
  EXPECT_EQ(wait(a).result_json(), R"({"n":2})");
  EXPECT_EQ(wait(b).result_json(), R"({"n":2})");
}

TEST_F(tree_test, a_deadline_fails_the_waiter_and_rolls_it_back) {
  start();
  auto id = submit("demo.wait_event", R"({"key":"nobody","timeout_ms":50})");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("timed out"), std::string::npos) << s.error();
}

TEST_F(tree_test, a_deadline_is_rearmed_with_what_remains_after_a_restart) {
  start();
  auto id = submit("demo.wait_event", R"({"key":"nobody","timeout_ms":700})");
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::WAITING; }));
  restart();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(wait(id).state(), pb::ROLLEDBACK);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds{5});
}

// The times a procedure shows (submitted, in its state since, ended) are its journal's: a
// restart shows the same, for a running tree and for a finished one (its summary).
TEST_F(tree_test, times_are_the_journals_and_survive_a_restart) {
  start();
  auto root = submit("test.two_children", R"({"key":"times"})");
  pb::ProcStatus s;
  ASSERT_TRUE(eventually([&] {
    s = status(root);
    return s.state() == pb::WAITING && s.children_size() == 2
           && status(s.children(0)).state() == pb::SUCCESS
           && status(s.children(1)).state() == pb::WAITING;
  }));
  auto before = tree_times(root);
  ASSERT_EQ(before.size(), 3u);
  for (const auto& line : before) {
    EXPECT_EQ(line.find("started 0"), std::string::npos) << line;
    EXPECT_EQ(line.find("since 0"), std::string::npos) << line;
  }
  EXPECT_EQ(before[1].find("ended 0"), std::string::npos) << "the ended child: " << before[1];
  // Apart in time from everything before (a restart's own clock must not show).
  std::this_thread::sleep_for(std::chrono::milliseconds{30});
  restart();
  std::vector<std::string> after;
  EXPECT_TRUE(eventually([&] { return (after = tree_times(root)) == before; }))
    << "before:\n"
    << ::testing::PrintToString(before) << "\nafter:\n"
    << ::testing::PrintToString(after);
  // Once the tree ended, its summary holds what the procedures showed.
  ASSERT_EQ(event("times", "{}").code(), pb::Response::OK);
  ASSERT_EQ(wait(root).state(), pb::SUCCESS);
  auto ended = tree_times(root);
  for (const auto& line : ended)
    EXPECT_NE(line.find("SUCCESS"), std::string::npos) << line;
  std::this_thread::sleep_for(std::chrono::milliseconds{30});
  restart();
  EXPECT_EQ(tree_times(root), ended);
  // An ended child's duration (ended - started) is what it took, not the time to a restart.
  auto noop = status(s.children(0));
  EXPECT_GE(noop.ended_at_ms(), noop.started_at_ms());
  EXPECT_LT(noop.ended_at_ms() - noop.started_at_ms(), 10'000);
}

TEST_F(tree_test, yield_goes_to_the_back_of_the_queue_and_carries_on) {
  start();
  auto id = submit("test.yielder", R"({"steps":5})");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS);
  EXPECT_EQ(s.result_json(), R"({"attempts":6})");
}

TEST_F(tree_test, wide_trees_finish) {
  start();
  auto id = submit("demo.fanout", R"({"children":500,"child_steps":2})");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS);
  EXPECT_EQ(s.children_size(), 500);
  EXPECT_EQ(s.result_json(), R"({"children":500})");
}

// A child's actor costs its parent one message at its end (its subtree_done), not a down
// message after it too (watch_child): counted over a tree of 200 one-step children.
TEST_F(tree_test, a_child_that_ends_costs_its_parent_one_message) {
  start();
  auto before = actor_messages(actor_kind::procedure);
  auto id = submit("demo.fanout", R"({"children":200,"child_steps":1})");
  ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  auto taken = actor_messages(actor_kind::procedure) - before;
  // Each child: its first step's turn and its append's acknowledgement; its parent: its end.
  // The root's own few besides (its turn, its steps' acknowledgements). 804 with the down
  // message.
  EXPECT_GE(taken, 3u * 200);
  EXPECT_LE(taken, 3u * 200 + 10);
}

TEST_F(tree_test, a_journal_that_cannot_write_acknowledges_nothing_and_loses_nothing) {
  std::shared_ptr<fault_store> faults;
  std::atomic<int> fatal_calls{0};
  start([&](node_options& o) {
    std::string err;
    std::shared_ptr<journal_store> inner = open_rocksdb_store(o.data_dir, &err);
    ASSERT_TRUE(inner) << err;
    faults = std::make_shared<fault_store>(inner);
    o.store = faults;
    o.on_journal_fatal = [&](const std::string&) { ++fatal_calls; };
  });
  auto ok = submit("demo.ledger", R"({"steps":2,"ledger_dir":")" + dir_ + "/ledger\"}");
  EXPECT_EQ(wait(ok).state(), pb::SUCCESS);
  faults->fail_writes(true, "No space left on device");
  pb::Request req;
  req.mutable_submit()->set_type("demo.ledger");
  req.mutable_submit()->set_args_json(R"({"steps":2,"ledger_dir":")" + dir_ + "/ledger\"}");
  auto r = call(req, std::chrono::milliseconds{500});
  EXPECT_NE(r.code(), pb::Response::OK) << "a submit was acknowledged without a durable write";
  EXPECT_EQ(fatal_calls.load(), 1);
  faults.reset();
  restart();  // the fault is gone
  EXPECT_EQ(status(ok).state(), pb::SUCCESS);
  auto again = submit("demo.ledger", R"({"steps":2,"ledger_dir":")" + dir_ + "/ledger\"}");
  EXPECT_EQ(wait(again).state(), pb::SUCCESS);
}

}  // namespace
}  // namespace proctor::testing

namespace proctor::testing {
namespace {

class limits_test : public engine {};

TEST_F(limits_test, oversized_args_and_a_full_node_are_refused_and_the_node_serves_on) {
  start([](node_options& o) {
    o.executor.max_args_bytes = 200;
    o.executor.max_procedures = 3;
  });
  pb::Request req;
  req.mutable_submit()->set_type("demo.wait_event");
  req.mutable_submit()->set_args_json(R"({"key":")" + std::string(300, 'k') + "\"}");
  auto r = call(req);
  EXPECT_EQ(r.code(), pb::Response::BAD_REQUEST);
  EXPECT_NE(r.error().find("more than the limit of 200"), std::string::npos) << r.error();
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(submit("demo.wait_event", R"({"key":"full-)" + std::to_string(i) + "\"}"));
  req.mutable_submit()->set_args_json(R"({"key":"one-too-many"})");
  r = call(req);
  EXPECT_EQ(r.code(), pb::Response::REFUSED);
  EXPECT_NE(r.error().find("capacity"), std::string::npos) << r.error();
  // Releasing finished trees makes room again.
  event("full-0", "{}");
  EXPECT_EQ(wait(ids[0]).state(), pb::SUCCESS);
  pb::Request rel;
  rel.mutable_release()->set_id(ids[0]);
  EXPECT_EQ(call(rel).code(), pb::Response::OK);
  EXPECT_EQ(call(req).code(), pb::Response::OK);
}

}  // namespace
}  // namespace proctor::testing
