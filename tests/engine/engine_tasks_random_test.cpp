// Task queues under racing reports (docs/workers.md): polls, completes (of current, earlier and
// ended attempts), fails, heartbeats, leases running out, aborts and node restarts, in a
// seeded random order. Whatever the order: every procedure ends; one that ends SUCCESS ends
// with exactly the results whose completes were accepted, in order (nothing accepted is lost,
// nothing is accepted twice); a refused report changes nothing.
//
// The seed is printed with every failure; PROCTOR_SEED=<n> replays one.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

uint64_t seed_from_env() {
  const char* v = std::getenv("PROCTOR_SEED");
  return v != nullptr ? std::strtoull(v, nullptr, 10) : std::random_device{}();
}

class tasks_random_test : public engine {
protected:
  pb::Response task_call(pb::TaskRequest t) {
    pb::Request r;
    *r.mutable_task() = std::move(t);
    return call(r);
  }
};

TEST_F(tasks_random_test, racing_reports_restarts_and_aborts_accept_each_result_once) {
  const auto seed = seed_from_env();
  SCOPED_TRACE("PROCTOR_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&rng](uint64_t n) { return rng() % n; };
  start();
  constexpr int procs = 16;
  std::vector<uint64_t> ids;
  for (int i = 0; i < procs; ++i) {
    auto args = R"({"queue":"rq","steps":)" + std::to_string(1 + pick(3))
                + R"(,"start_to_close_ms":)" + std::to_string(150 + pick(300))
                + R"(,"max_attempts":)" + std::to_string(4 + pick(4)) + "}";
    ids.push_back(submit("demo.dispatch", args));
  }
  struct held {
    pb::TaskInfo task;
    std::string sent;  ///< the result its complete carried ("" not sent)
  };
  std::vector<held> tokens;                           // every task handed out
  std::map<uint64_t, std::vector<std::string>> took;  // each procedure's accepted results
  std::set<uint64_t> aborted;
  int counter = 0;
  auto ended = [&] {
    for (auto id : ids) {
      auto s = status(id).state();
      if (s != pb::SUCCESS && s != pb::ROLLEDBACK && s != pb::FAILED)
        return false;
    }
    return true;
  };
  auto complete = [&](held& h) {
    if (h.sent.empty())
      h.sent = R"({"r":)" + std::to_string(++counter) + "}";
    pb::TaskRequest t;
    t.set_op(pb::TaskRequest::COMPLETE);
    t.set_token(h.task.token());
    t.set_json(h.sent);
    auto r = task_call(t);
    if (r.code() == pb::Response::OK && r.text() == "completed")
      took[h.task.proc_id()].push_back(h.sent);
    else
      ASSERT_TRUE(r.code() == pb::Response::REFUSED || r.code() == pb::Response::OK)
        << r.code() << " " << r.error();
  };
  // A bound on the whole run, not a pace (ASan builds run it several times slower).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{120};
  for (int round = 0; (round % 16 != 0 || !ended()) && !HasFailure(); ++round) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the procedures did not all end";
    const bool draining = round > 300;  // then only poll and complete, so that all end
    auto what = draining ? pick(2) : pick(100);
    if (what < 35) {  // poll
      pb::TaskRequest t;
      t.set_op(pb::TaskRequest::POLL);
      t.add_queues("rq");
      t.set_worker("w" + std::to_string(pick(4)));
      t.set_max(static_cast<uint32_t>(1 + pick(3)));
      t.set_wait_ms(static_cast<uint32_t>(pick(40)));
      auto r = task_call(t);
      ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
      for (const auto& task : r.task().tasks())
        tokens.push_back({task, {}});
    } else if (what < 70 && !tokens.empty()) {  // complete: current, stale or sent again
      auto& h = tokens[draining ? tokens.size() - 1 : pick(tokens.size())];
      complete(h);
    } else if (what < 78 && !tokens.empty()) {  // fail
      pb::TaskRequest t;
      t.set_op(pb::TaskRequest::FAIL);
      t.set_token(tokens[pick(tokens.size())].task.token());
      t.set_error("random");
      t.set_retryable(pick(5) != 0);
      auto r = task_call(t);
      ASSERT_TRUE(r.code() == pb::Response::OK || r.code() == pb::Response::REFUSED) << r.error();
    } else if (what < 90 && !tokens.empty()) {  // heartbeat
      pb::TaskRequest t;
      t.set_op(pb::TaskRequest::HEARTBEAT);
      t.set_token(tokens[pick(tokens.size())].task.token());
      t.set_json(R"({"n":)" + std::to_string(round) + "}");
      auto r = task_call(t);
      ASSERT_TRUE(r.code() == pb::Response::OK || r.code() == pb::Response::REFUSED) << r.error();
    } else if (what < 93) {  // abort
      auto id = ids[pick(ids.size())];
      pb::Request a;
      a.mutable_abort()->set_id(id);
      if (call(a).code() == pb::Response::OK)
        aborted.insert(id);
    } else if (what < 95) {  // restart
      restart();
    } else {  // leases run out meanwhile
      std::this_thread::sleep_for(std::chrono::milliseconds{pick(60)});
    }
  }
  size_t succeeded = 0;
  for (auto id : ids) {
    auto s = status(id);
    succeeded += s.state() == pb::SUCCESS ? 1 : 0;
    if (s.state() != pb::SUCCESS) {
      // Aborted, or its task failed for good (a fail, or its attempts' leases ran out).
      EXPECT_TRUE(aborted.count(id) > 0 || s.error().find("failed on attempt") != std::string::npos)
        << "procedure " << id << " ended " << pb::ProcState_Name(s.state()) << ": " << s.error();
      continue;
    }
    std::string want = R"({"results":[)";
    for (size_t i = 0; i < took[id].size(); ++i)
      want += (i == 0 ? "" : ",") + took[id][i];
    EXPECT_EQ(s.result_json(), want + "]}") << "procedure " << id;
  }
  // Not vacuous: some ended with their results (the check above), not all were cut short.
  EXPECT_GT(succeeded, 0U);
  std::printf("tasks random (seed %llu): %zu of %d procedures SUCCESS, %zu aborted\n",
              static_cast<unsigned long long>(seed), succeeded, procs, aborted.size());
}

}  // namespace
}  // namespace proctor::testing
