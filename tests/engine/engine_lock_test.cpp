// Resource locks and step retries, end to end.
#include <map>
#include <mutex>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

/// Who runs steps under each resource right now, and every violation seen.
std::mutex owners_mtx;
std::map<std::string, uint64_t> owners;
int violations = 0;

/// Locks `key` exclusively (or, with a timeout_ms of 1, shared) and runs three slow-ish
/// steps, checking that no other holder of the same exclusive lock runs in between.
class locker : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  locker() {
    on(pb::WAIT_EVENT_SUSPEND, &locker::step, &locker::nothing);
    on(pb::WAIT_EVENT_RESUME, &locker::last, &locker::nothing);
  }

  lock_set locks() const override {
    return {resource_lock{typed_data().key(), typed_data().timeout_ms() != 1}};
  }

private:
  void check(const pb::WaitEventData& d, const context& ctx) {
    std::lock_guard<std::mutex> g(owners_mtx);
    for (const auto& [name, owner] : owners) {
      bool related =
        name == d.key() || name.rfind(d.key() + "/", 0) == 0 || d.key().rfind(name + "/", 0) == 0;
      if (related && owner != ctx.id())
        ++violations;
    }
    owners[d.key()] = ctx.id();
  }
  outcome step(pb::WaitEventData& d, context& ctx) {
    check(d, ctx);
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
    auto n = d.payload_json().size();
    d.set_payload_json(d.payload_json() + "x");
    return n < 2 ? next(pb::WAIT_EVENT_SUSPEND) : next(pb::WAIT_EVENT_RESUME);
  }
  outcome last(pb::WaitEventData& d, context& ctx) {
    check(d, ctx);
    std::lock_guard<std::mutex> g(owners_mtx);
    owners.erase(d.key());
    return done();
  }
  void nothing(pb::WaitEventData&, context&) {}
};

/// Locks `key` exclusively and holds it while it waits for the event "ev-<key>".
class lock_waiter : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  lock_waiter() {
    on(pb::WAIT_EVENT_SUSPEND, &lock_waiter::wait, &lock_waiter::nothing);
    on(pb::WAIT_EVENT_RESUME, &lock_waiter::resume, &lock_waiter::nothing);
  }
  lock_set locks() const override { return {resource_lock::exclusive_on(typed_data().key())}; }

private:
  outcome wait(pb::WaitEventData& d, context&) {
    return suspend("ev-" + d.key(), pb::WAIT_EVENT_RESUME);
  }
  outcome resume(pb::WaitEventData&, context&) { return done(); }
  void nothing(pb::WaitEventData&, context&) {}
};

/// Fails (business failure) its first `crash_times` attempts.
class stubborn : public state_machine<pb::FlakyData, pb::FlakyState> {
public:
  stubborn() { on(pb::FLAKY_PREPARE, &stubborn::step, &stubborn::nothing); }

private:
  outcome step(pb::FlakyData& d, context& ctx) {
    if (ctx.attempt() <= d.crash_times())
      return fail("attempt " + std::to_string(ctx.attempt()) + " fails");
    return done(R"({"attempt":)" + std::to_string(ctx.attempt()) + "}");
  }
  void nothing(pb::FlakyData&, context&) {}
};

class lock_test : public engine {
protected:
  void SetUp() override {
    engine::SetUp();
    {
      std::lock_guard<std::mutex> g(owners_mtx);
      owners.clear();
      violations = 0;
    }
    types_.add<locker>("test.locker");
    types_.add<lock_waiter>("test.lock_waiter");
    retry_policy three;
    three.kind = retry_policy::backoff::exponential;
    three.delay = std::chrono::milliseconds{2};
    three.max_attempts = 3;
    types_.add<stubborn>("test.stubborn", 1, {}, three);
  }
};

TEST_F(lock_test, no_two_holders_of_an_exclusive_lock_ever) {
  start([](node_options& o) { o.workers = 8; });
  std::vector<uint64_t> ids;
  const char* keys[] = {"ns", "ns/t1", "ns/t2", "ns/t1/r1", "other"};
  for (int i = 0; i < 40; ++i)
    ids.push_back(submit("test.locker", R"({"key":")" + std::string(keys[i % 5]) + "\"}"));
  for (auto id : ids)
    EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  std::lock_guard<std::mutex> g(owners_mtx);
  EXPECT_EQ(violations, 0);
}

TEST_F(lock_test, waiting_for_a_lock_shows_in_status) {
  start();
  auto first = submit("test.locker", R"({"key":"db"})");
  auto second = submit("test.locker", R"({"key":"db"})");
  bool saw_wait = false;
  eventually([&] {
    auto s = status(second);
    saw_wait = saw_wait || s.waiting_for() == "lock db";
    return s.state() == pb::SUCCESS;
  });
  EXPECT_EQ(wait(first).state(), pb::SUCCESS);
  EXPECT_EQ(wait(second).state(), pb::SUCCESS);
  EXPECT_TRUE(saw_wait) << "the second locker never showed it waits for lock db";
}

TEST_F(lock_test, shared_holders_both_get_the_lock) {
  start([](node_options& o) { o.workers = 4; });
  auto a = submit("test.locker", R"({"key":"s","timeout_ms":1})");
  auto b = submit("test.locker", R"({"key":"s","timeout_ms":1})");
  EXPECT_EQ(wait(a).state(), pb::SUCCESS);
  EXPECT_EQ(wait(b).state(), pb::SUCCESS);
}

TEST_F(lock_test, locks_are_held_across_steps_and_restored_after_a_restart) {
  start();
  auto holder = submit("test.lock_waiter", R"({"key":"r"})");
  ASSERT_TRUE(eventually([&] { return status(holder).state() == pb::WAITING; }));
  restart();
  auto other = submit("test.locker", R"({"key":"r/t"})");
  ASSERT_TRUE(eventually([&] { return status(other).waiting_for() == "lock r"; }));
  EXPECT_EQ(status(other).state(), pb::RUNNABLE);
  event("ev-r", "{}");
  EXPECT_EQ(wait(holder).state(), pb::SUCCESS);
  EXPECT_EQ(wait(other).state(), pb::SUCCESS);
}

TEST_F(lock_test, a_passivated_root_keeps_its_locks) {
  start([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{0}; });
  auto holder = submit("test.lock_waiter", R"({"key":"h"})");
  ASSERT_TRUE(eventually([&] { return status(holder).state() == pb::WAITING; }));
  ASSERT_TRUE(eventually(
    [&] { return starts(holder) == 1 && status(holder).waiting_for() == "event ev-h"; }));
  auto other = submit("test.locker", R"({"key":"h"})");
  ASSERT_TRUE(eventually([&] { return status(other).waiting_for() == "lock h"; }));
  event("ev-h", "{}");
  EXPECT_EQ(wait(holder).state(), pb::SUCCESS);
  EXPECT_EQ(wait(other).state(), pb::SUCCESS);
  EXPECT_EQ(starts(holder), 2);  // it had passivated: woken from the journal
}

TEST_F(lock_test, a_failing_step_is_retried_up_to_max_attempts_then_rolls_back) {
  start();
  auto ok = submit("test.stubborn", R"({"crash_times":2})");
  auto s = wait(ok);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.result_json(), R"({"attempt":3})");
  auto bad = submit("test.stubborn", R"({"crash_times":3})");
  s = wait(bad);
  EXPECT_EQ(s.state(), pb::ROLLEDBACK);
  EXPECT_NE(s.error().find("attempt 3 fails"), std::string::npos) << s.error();
}

}  // namespace
}  // namespace proctor::testing
