// An operator's retry (`proctor retry`) and resubmit (`proctor resubmit`), docs/flow-control.md:
// a procedure FAILED past its point of no return, or backing off, runs its failed step again
// from attempt 1; a ROLLEDBACK tree runs again under a new id linked to the old one. Both are
// journaled before they are answered (a crash before and after the Retried record), both in
// history; refusals name the state. A seeded random run races retries with aborts, bypasses,
// restarts and second retries; PROCTOR_SEED=<n> replays it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <thread>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

namespace fs = std::filesystem;

/// demo.forward (procedures/demo.cpp) whose failing FINISH backs off for an hour, forever:
/// only an operator's retry runs it again soon.
class slow_forward : public state_machine<pb::ForwardData, pb::ForwardState> {
public:
  slow_forward() {
    on(pb::FORWARD_PREPARE, &slow_forward::prepare, &slow_forward::nothing);
    on_no_rollback(pb::FORWARD_COMMIT, &slow_forward::commit);
    on(pb::FORWARD_FINISH, &slow_forward::finish, &slow_forward::nothing);
  }

private:
  /// The same ledger files as demo.forward's.
  static void touch(const pb::ForwardData& d, const context& ctx, const char* what) {
    std::ofstream{fs::path(d.ledger_dir())
                  / (std::to_string(ctx.root_id()) + "." + std::to_string(ctx.id()) + "." + what)};
  }
  outcome prepare(pb::ForwardData& d, context& ctx) {
    touch(d, ctx, "prepared");
    return next(pb::FORWARD_COMMIT);
  }
  outcome commit(pb::ForwardData& d, context& ctx) {
    touch(d, ctx, "committed");
    return next(pb::FORWARD_FINISH);
  }
  outcome finish(pb::ForwardData& d, context& ctx) {
    if (!fs::exists(d.fix_file()))
      return fail("not fixed yet");
    touch(d, ctx, "finished");
    return done();
  }
  void nothing(pb::ForwardData&, context&) {}
};

class retry_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    types_.add<slow_forward>("test.slow_forward")
      .retry({.kind = retry_policy::backoff::fixed,
              .delay = std::chrono::hours{1},
              .max_attempts = 1,
              .max_attempts_past_no_return = 0});
    fix_ = dir_ + "/fix";
  }

  std::string args() const {
    return R"({"ledger_dir":")" + dir_ + R"(/ledger","fix_file":")" + fix_ + R"("})";
  }
  void fix() { std::ofstream{fix_} << "fixed"; }

  pb::Response retry(uint64_t id, std::chrono::milliseconds timeout = std::chrono::seconds{30}) {
    pb::Request req;
    req.mutable_retry()->set_id(id);
    return call(req, timeout);
  }
  pb::Response resubmit(uint64_t id) {
    pb::Request req;
    req.mutable_resubmit()->set_id(id);
    return call(req);
  }
  pb::Response abort(uint64_t id) {
    pb::Request req;
    req.mutable_abort()->set_id(id);
    return call(req);
  }
  pb::History history(uint64_t id) {
    pb::Request req;
    req.mutable_history()->set_id(id);
    return call(req).history();
  }
  std::vector<std::string> kinds(uint64_t id) {
    std::vector<std::string> out;
    auto h = history(id);
    for (const auto& e : h.entries())
      out.push_back(e.kind());
    return out;
  }
  /// A node whose ended trees keep their records (history shows every entry) and whose
  /// trees are never passivated; `more` adjusts it further.
  void start_node(const std::function<void(node_options&)>& more = {}) {
    start([more](node_options& o) {
      o.executor.collect_after = std::chrono::hours{1};
      o.executor.passivate_after = std::chrono::milliseconds{-1};
      if (more)
        more(o);
    });
  }
  void restart_node(const std::function<void(node_options&)>& more = {}) {
    stop();
    start_node(more);
  }
  static int count(const std::vector<std::string>& xs, const std::string& x) {
    return static_cast<int>(std::count(xs.begin(), xs.end(), x));
  }
  /// The ledger files of procedure `id` (a root), by what they are: prepared, committed,
  /// finished.
  std::set<std::string> effects(uint64_t id) {
    std::set<std::string> out;
    auto prefix = std::to_string(id) + "." + std::to_string(id) + ".";
    for (const auto& e : fs::directory_iterator(dir_ + "/ledger")) {
      auto name = e.path().filename().string();
      if (name.rfind(prefix, 0) == 0)
        out.insert(name.substr(prefix.size()));
    }
    return out;
  }
  bool failed_for_good(uint64_t id) {
    return eventually([&] {
      auto s = status(id);
      return s.state() == pb::FAILED && s.error().find("is missing") != std::string::npos;
    });
  }

  std::string fix_;
};

TEST_F(retry_test, a_procedure_failed_past_its_point_of_no_return_runs_again_from_attempt_one) {
  start_node();
  auto id = submit("demo.forward", args());
  ASSERT_TRUE(failed_for_good(id)) << status(id).ShortDebugString();
  // Retried while still broken: three attempts again (not one: they count from 1), then
  // FAILED again.
  auto r = retry(id);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_NE(r.status().state(), pb::FAILED) << r.ShortDebugString();
  ASSERT_TRUE(failed_for_good(id));
  auto h = history(id);
  int retried = 0;
  for (const auto& e : h.entries())
    if (e.kind() == "retried") {
      ++retried;
      EXPECT_EQ(e.state_name(), "FORWARD_FINISH");
      EXPECT_EQ(e.attempt(), 3);
      EXPECT_GT(e.at_ms(), 0);
      EXPECT_NE(e.detail().find("FAILED (out of attempts) after 3 attempt(s)"), std::string::npos)
        << e.detail();
      EXPECT_NE(e.detail().find("is missing"), std::string::npos) << e.detail();
    }
  EXPECT_EQ(retried, 1) << h.ShortDebugString();
  // The three steps of the second round failed: no commit came of them.
  EXPECT_EQ(count(kinds(id), "step"), 2);
  fix();
  r = retry(id);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_EQ(effects(id), (std::set<std::string>{"prepared", "committed", "finished"}));
  EXPECT_EQ(metric("proctor_retries_total"), 2);
  // Issue 46.10: the procedure ended once (FAILED); what its retries came to is counted apart,
  // not as a second and third end.
  const std::string t = R"({type="demo.forward"})";
  EXPECT_EQ(metric("proctor_procedures_failed_total" + t), 1);
  EXPECT_EQ(metric("proctor_procedures_succeeded_total" + t), 0);
  EXPECT_EQ(
    metric(R"(proctor_procedures_retry_outcomes_total{state="FAILED",type="demo.forward"})"), 1);
  EXPECT_EQ(
    metric(R"(proctor_procedures_retry_outcomes_total{state="SUCCESS",type="demo.forward"})"), 1);
}

TEST_F(retry_test, a_step_backing_off_runs_now) {
  start_node();
  auto id = submit("test.slow_forward", args());
  ASSERT_TRUE(eventually([&] { return status(id).waiting_for() == "retry"; }))
    << status(id).ShortDebugString();
  fix();
  auto r = retry(id);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  EXPECT_EQ(wait(id, std::chrono::seconds{20}).state(), pb::SUCCESS);  // not in an hour
  auto k = kinds(id);
  ASSERT_EQ(count(k, "retried"), 1);
  auto h = history(id);
  for (const auto& e : h.entries()) {
    if (e.kind() == "retried") {
      EXPECT_NE(e.detail().find("backing off after 1 attempt(s)"), std::string::npos) << e.detail();
    }
  }
}

TEST_F(retry_test, refusals_name_the_state) {
  start_node();
  auto refused = [&](const pb::Response& r, pb::Response::Code code, const std::string& part) {
    EXPECT_EQ(r.code(), code) << r.ShortDebugString();
    EXPECT_NE(r.error().find(part), std::string::npos) << r.error();
  };
  refused(retry(999'999), pb::Response::NOT_FOUND, "no procedure 999999");
  refused(resubmit(999'999), pb::Response::NOT_FOUND, "nothing is kept to resubmit");
  auto ok = submit("demo.ledger", R"({"ledger_dir":")" + dir_ + R"(/ledger","steps":1})");
  ASSERT_EQ(wait(ok).state(), pb::SUCCESS);
  refused(retry(ok), pb::Response::REFUSED, "already ended SUCCESS");
  refused(resubmit(ok), pb::Response::REFUSED,
          "is SUCCESS: only a tree that ended ROLLEDBACK can be resubmitted");
  // A procedure waiting for an event is neither failed nor backing off.
  auto waiting = submit("demo.wait_event", R"({"key":"never"})");
  ASSERT_TRUE(eventually([&] { return status(waiting).state() == pb::WAITING; }));
  refused(retry(waiting), pb::Response::REFUSED, "is WAITING (waiting for event never)");
  refused(resubmit(waiting), pb::Response::REFUSED, "(its tree has not ended)");
  // A ROLLEDBACK tree is resubmitted, not retried; its child is neither.
  auto rolled =
    submit("demo.ledger", R"({"ledger_dir":")" + dir_
                            + R"(/ledger","steps":3,"fail_at":2,"children":1,"depth":1})");
  ASSERT_EQ(wait(rolled).state(), pb::ROLLEDBACK);
  refused(retry(rolled), pb::Response::REFUSED, "proctor resubmit " + std::to_string(rolled));
  auto child = status(rolled).children(0);
  refused(resubmit(child), pb::Response::BAD_REQUEST, "is not a root");
  // FAILED for good: retried, not resubmitted.
  auto failed = submit("demo.forward", args());
  ASSERT_TRUE(failed_for_good(failed));
  refused(resubmit(failed), pb::Response::REFUSED, "proctor retry " + std::to_string(failed));
  // Nor released: that would delete the records its retry needs (it was accepted once).
  pb::Request rel;
  rel.mutable_release()->set_id(failed);
  refused(call(rel), pb::Response::REFUSED,
          "is FAILED past its point of no return and its tree waits for an operator");
  EXPECT_EQ(status(failed).state(), pb::FAILED);
  // Nor aborted: its tree has not ended (before, "already ended FAILED"); status says what
  // it waits for.
  pb::Request ab;
  ab.mutable_abort()->set_id(failed);
  refused(call(ab), pb::Response::REFUSED,
          "its tree has not ended, it waits for an operator: `proctor retry "
            + std::to_string(failed) + "` runs it forward again, `proctor bypass "
            + std::to_string(failed) + "`");
  EXPECT_EQ(status(failed).waiting_for(),
            "operator (failed past its point of no return: retry or bypass)");
  EXPECT_GE(count(kinds(failed), "step"), 2);
  EXPECT_EQ(metric("proctor_retries_total"), 0);
  EXPECT_EQ(metric("proctor_resubmits_total"), 0);
}

TEST_F(retry_test, a_rolledback_tree_is_resubmitted_once_with_its_args_and_linked_both_ways) {
  start_node();
  auto old = submit("demo.ledger",
                    R"({"ledger_dir":")" + dir_ + R"(/ledger","steps":3,"fail_at":1})", "", 7);
  ASSERT_EQ(wait(old).state(), pb::ROLLEDBACK);
  auto r = resubmit(old);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  auto fresh = r.id();
  ASSERT_NE(fresh, old);
  // The same args: it fails at step 1 as the first did, and rolls back.
  EXPECT_EQ(wait(fresh).state(), pb::ROLLEDBACK);
  auto again = resubmit(old);
  ASSERT_EQ(again.code(), pb::Response::OK) << again.error();
  EXPECT_EQ(again.id(), fresh);  // resubmitted already: the same tree
  EXPECT_NE(again.text().find("resubmitted already as " + std::to_string(fresh)),
            std::string::npos);
  EXPECT_EQ(metric("proctor_resubmits_total"), 1);
  auto check_links = [&] {
    EXPECT_EQ(status(fresh).resubmitted_from(), old);
    EXPECT_EQ(status(old).resubmitted_as(), fresh);
    auto h = history(fresh);
    ASSERT_GT(h.entries_size(), 0);
    EXPECT_NE(h.entries(0).detail().find("resubmitted by an operator from ROLLEDBACK procedure "
                                         + std::to_string(old)),
              std::string::npos)
      << h.ShortDebugString();
    auto k = kinds(old);
    ASSERT_FALSE(k.empty());
    EXPECT_EQ(k.back(), "resubmitted");
    auto ho = history(old);
    EXPECT_EQ(ho.entries().rbegin()->detail(),
              "by an operator as procedure " + std::to_string(fresh));
  };
  check_links();
  // The "resubmitted" row of the old root names the new root's Submitted record (it showed
  // LSN 0 before).
  EXPECT_EQ(history(old).entries().rbegin()->lsn(), history(fresh).entries(0).lsn());
  EXPECT_GT(history(fresh).entries(0).lsn(), 0u);
  // After a restart the links come back from the journal (the trees are summaries by then,
  // or soon: the args of the old one are in its summary).
  restart_node();
  check_links();
  auto third = resubmit(fresh);
  ASSERT_EQ(third.code(), pb::Response::OK) << third.error();
  EXPECT_EQ(wait(third.id()).state(), pb::ROLLEDBACK);
  EXPECT_EQ(status(third.id()).resubmitted_from(), fresh);
}

// Nothing is acknowledged before it is durable: a retry whose Retried record never became
// durable was never answered and is not in the journal; one answered is, whatever comes after.
TEST_F(retry_test, a_crash_before_and_after_the_retried_record) {
  std::shared_ptr<fault_store> store;
  auto with_store = [&](node_options& o) {
    std::string err;
    store.reset();  // the previous incarnation's database must be closed first
    auto inner = open_rocksdb_store(o.data_dir, &err);
    ASSERT_TRUE(inner) << err;
    store = std::make_shared<fault_store>(std::move(inner));
    o.store = store;
    o.on_journal_fatal = [](const std::string&) {};
  };
  start_node(with_store);
  auto id = submit("demo.forward", args());
  ASSERT_TRUE(failed_for_good(id));

  // Before: the write is held, the retry gets no answer, the node dies.
  store->hold_writes(true);
  auto held = retry(id, std::chrono::milliseconds{500});
  EXPECT_NE(held.code(), pb::Response::OK) << "retry acknowledged while its record was not durable";
  store->crash_now();
  restart_node(with_store);
  EXPECT_EQ(count(kinds(id), "retried"), 0) << "a retry never acknowledged is in the journal";
  // A restart runs the step again from attempt 1 (its FAILED is not journaled): still broken.
  ASSERT_TRUE(failed_for_good(id));

  // After: acknowledged, then the node dies at once; the fix came meanwhile.
  fix();
  auto r = retry(id);
  ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
  store->crash_now();
  restart_node([&](node_options&) { store.reset(); });
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  EXPECT_EQ(count(kinds(id), "retried"), 1);
  EXPECT_EQ(effects(id), (std::set<std::string>{"prepared", "committed", "finished"}));
}

/// A seeded random run: procedures failing forward, retried by an operator at random moments,
/// racing aborts, bypasses, restarts and second retries; the fix comes at a random moment. Every
/// procedure ends (SUCCESS, or ROLLEDBACK when an abort came before its point of no return),
/// with exactly its effects.
TEST_F(retry_test, random_retries_aborts_bypasses_and_restarts) {
  const uint64_t seed = seed_from_env();
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  start_node();
  std::vector<uint64_t> ids;
  std::set<uint64_t> bypassed;
  for (int i = 0; i < 6; ++i)
    ids.push_back(submit(pick(0, 2) == 0 ? "test.slow_forward" : "demo.forward", args()));
  bool fixed = false;
  for (int k = 0; k < 24; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds{pick(0, 40)});
    auto id = ids[static_cast<size_t>(pick(0, static_cast<int>(ids.size()) - 1))];
    switch (pick(0, 9)) {
      case 0:
      case 1:
      case 2: {
        auto r = retry(id);
        // Refused is fine (running, ended, retried already); an answer always comes.
        EXPECT_TRUE(r.code() == pb::Response::OK || r.code() == pb::Response::REFUSED)
          << r.ShortDebugString();
        break;
      }
      case 3: {  // two retries at once: one goes, the other is refused or goes after it
        pb::Request req;
        req.mutable_retry()->set_id(id);
        auto a = std::async(std::launch::async, [&] { return call(req); });
        auto b = call(req);
        for (const auto& r : {a.get(), b})
          EXPECT_TRUE(r.code() == pb::Response::OK || r.code() == pb::Response::REFUSED)
            << r.ShortDebugString();
        break;
      }
      case 4:
        abort(id);
        break;
      case 5: {
        pb::Request req;
        req.mutable_bypass()->set_id(id);
        req.mutable_bypass()->set_force(true);
        if (call(req).code() == pb::Response::OK)
          bypassed.insert(id);
        break;
      }
      case 6:
        restart_node();
        break;
      case 7:
        if (!fixed && pick(0, 2) == 0) {
          fix();
          fixed = true;
        }
        break;
      default:
        break;
    }
  }
  if (!fixed)
    fix();
  // The fix is in: whatever still waits for an operator is retried once more.
  for (auto id : ids) {
    ASSERT_TRUE(eventually(
      [&] {
        auto s = status(id);
        if (s.state() == pb::SUCCESS || s.state() == pb::ROLLEDBACK)
          return true;
        if (s.state() == pb::FAILED || s.waiting_for() == "retry")
          retry(id);
        return false;
      },
      std::chrono::seconds{60}))
      << id << ": " << status(id).ShortDebugString();
    auto s = status(id);
    auto e = effects(id);
    if (s.state() == pb::ROLLEDBACK) {
      EXPECT_EQ(e.count("finished"), 0u) << id;
    } else if (bypassed.count(id) == 0) {
      EXPECT_EQ(e.count("committed") + e.count("finished"), 2u)
        << id << ": " << s.ShortDebugString();
    }
  }
}

}  // namespace
}  // namespace proctor::testing
