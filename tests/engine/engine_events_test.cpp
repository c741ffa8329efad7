// External events are consumed once (docs/concepts.md, "Events"): an event wakes every
// procedure waiting for its key when it is durable and is then gone; one that woke none is
// kept for the first procedure that suspends on its key later (oldest first), which consumes
// it. Checked live, for passivated trees and passivated children, across restarts and crashes
// cut at the delivery, and over random interleavings of events, suspends and restarts.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/engine/engine_events_fixture.hpp"

namespace proctor::testing {
namespace {

// -- live -------------------------------------------------------------------------------------

TEST_F(events_test, an_event_that_woke_a_waiter_does_not_wake_a_later_one) {
  start();
  auto first = waiter("payment:o8");
  auto r = event("payment:o8", R"({"charge":1})");
  EXPECT_EQ(r.text(), delivered("payment:o8", 1));
  expect_woken_by(first, R"({"charge":1})");
  auto second = waiter("payment:o8");
  expect_still_waiting(second);
  EXPECT_EQ(event("payment:o8", R"({"charge":2})").text(), delivered("payment:o8", 1));
  expect_woken_by(second, R"({"charge":2})");
}

TEST_F(events_test, an_event_that_woke_several_waiters_wakes_no_later_one) {
  start();
  auto a = waiter("k");
  auto b = waiter("k");
  EXPECT_EQ(event("k", R"("both")").text(), delivered("k", 2));
  expect_woken_by(a, R"("both")");
  expect_woken_by(b, R"("both")");
  auto c = waiter("k");
  expect_still_waiting(c);
}

TEST_F(events_test, an_event_nobody_waited_for_is_consumed_by_the_first_later_waiter_only) {
  start();
  EXPECT_EQ(event("early", R"("kept")").text(), kept("early"));
  auto first = waiter("early");
  expect_woken_by(first, R"("kept")");
  auto second = waiter("early");
  expect_still_waiting(second);
  EXPECT_EQ(event("early", R"("fresh")").text(), delivered("early", 1));
  expect_woken_by(second, R"("fresh")");
}

TEST_F(events_test, kept_events_are_consumed_oldest_first_one_per_later_waiter) {
  start();
  EXPECT_EQ(event("q", R"("one")").text(), kept("q"));
  EXPECT_EQ(event("q", R"("two")").text(), kept("q"));
  auto a = waiter("q");
  expect_woken_by(a, R"("one")");
  auto b = waiter("q");
  expect_woken_by(b, R"("two")");
  auto c = waiter("q");
  expect_still_waiting(c);
}

TEST_F(events_test, a_kept_event_expires_unconsumed_after_its_ttl) {
  start([](node_options& o) { o.executor.event_ttl = std::chrono::milliseconds{300}; });
  EXPECT_EQ(event("ttl", R"("late")").text(),
            "event 'ttl' kept for 300 ms for the first procedure that suspends on it (none "
            "waits now)");
  std::this_thread::sleep_for(std::chrono::milliseconds{800});
  auto w = waiter("ttl");
  expect_still_waiting(w);
}

// An event sent again with its id (a retry after a lost answer) is accepted once: the first
// answer, and nothing more delivered, before and after a restart, and even while the first is
// not durable yet; another key, or another id, is another event. Once the events' TTL ran
// out, the id is forgotten (and its record deleted).
TEST_F(events_test, an_event_sent_again_with_its_id_is_accepted_once) {
  start([](node_options& o) { o.executor.event_ttl = std::chrono::milliseconds{4000}; });
  auto a = waiter("pay");
  auto b = waiter("pay");
  EXPECT_EQ(event("pay", R"("one")", "tx-1").text(), delivered("pay", 2));
  expect_woken_by(a, R"("one")");
  expect_woken_by(b, R"("one")");
  auto c = waiter("pay");
  EXPECT_EQ(event("pay", R"("one")", "tx-1").text(), delivered("pay", 2)) << "the first answer";
  expect_still_waiting(c);
  // Kept (nobody waits) and sent again: one kept event, consumed by one waiter only.
  EXPECT_EQ(event("ship", R"("s")", "tx-2").text().rfind("event 'ship' kept for ", 0), 0u);
  restart([](node_options& o) { o.executor.event_ttl = std::chrono::milliseconds{4000}; });
  auto again = event("ship", R"("s")", "tx-2");
  EXPECT_EQ(again.code(), pb::Response::OK) << again.error();
  EXPECT_NE(again.text().find("with id 'tx-2' was accepted already"), std::string::npos)
    << again.text();
  auto d = waiter("ship");
  expect_woken_by(d, R"("s")");
  auto e = waiter("ship");
  expect_still_waiting(e);
  // Another id, another key: other events.
  EXPECT_EQ(event("pay", R"("two")", "tx-3").text(), delivered("pay", 1));
  expect_woken_by(c, R"("two")");
  EXPECT_EQ(event("ship", R"("t")", "tx-1").text(), delivered("ship", 1));
  expect_woken_by(e, R"("t")");
  // Past the TTL the id is forgotten: the same id is a new event.
  std::this_thread::sleep_for(std::chrono::milliseconds{4500});
  auto f = waiter("pay");
  EXPECT_EQ(event("pay", R"("late")", "tx-1").text(), delivered("pay", 1));
  expect_woken_by(f, R"("late")");
}

// Each procedure's history says what woke it: the event posted while it waited, or the one
// posted before it suspended and kept for it (the probes hold at a gate after the event, so
// their records are still there).
TEST_F(events_test, history_says_whether_an_event_woke_the_procedure_or_was_kept_for_it) {
  start();
  auto held_waiter = [&](const std::string& key) {
    auto d = probe({act(ProbeAction::SUSPEND, key), act(ProbeAction::NEXT)});
    d.mutable_actions(1)->set_gate("hold");
    return submit("test.probe", json(d));
  };
  auto event_entry = [&](uint64_t id) {
    pb::Request h;
    h.mutable_history()->set_id(id);
    auto r = call(h);
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    for (const auto& e : r.history().entries())
      if (e.kind() == "event")
        return e.detail();
    return std::string{};
  };
  auto woken = held_waiter("hk");
  ASSERT_TRUE(eventually([&] { return status(woken).waiting_for() == "event hk"; }));
  EXPECT_EQ(event("hk", R"("live")").text(), delivered("hk", 1));
  EXPECT_EQ(event("hk", R"("early")").text(), kept("hk"));
  auto later = held_waiter("hk");
  std::string woke_text, kept_text;
  ASSERT_TRUE(eventually([&] {
    woke_text = event_entry(woken);
    kept_text = event_entry(later);
    return !woke_text.empty() && !kept_text.empty();
  }));
  EXPECT_NE(woke_text.find(R"(event hk payload "live" (the event at lsn )"), std::string::npos)
    << woke_text;
  EXPECT_NE(woke_text.find("posted while it waited: it woke it"), std::string::npos) << woke_text;
  EXPECT_NE(kept_text.find(R"(event hk payload "early")"), std::string::npos) << kept_text;
  EXPECT_NE(kept_text.find("posted before it suspended: kept for it, consumed"), std::string::npos)
    << kept_text;
  world().open("hold");
  EXPECT_EQ(wait(woken).state(), pb::SUCCESS);
  EXPECT_EQ(wait(later).state(), pb::SUCCESS);
  expect_clean_world();
}

// -- passivated trees and passivated children ----------------------------------------------------

TEST_F(events_test, an_event_that_woke_a_passivated_root_wakes_no_later_waiter) {
  start_with(std::chrono::milliseconds{0});
  auto first = waiter("hib");
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }));
  EXPECT_EQ(event("hib", R"("h")").text(), delivered("hib", 1));
  expect_woken_by(first, R"("h")");
  auto second = waiter("hib");
  expect_still_waiting(second);
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{0}; });
  expect_still_waiting(second);
}

// Waiters that gave up their actors while their tree runs are woken through their parent
// (proc_passivate_waiter.cpp, proc_passivated_children.cpp): the event woke them both, and
// nothing later gets it, before or after a restart.
TEST_F(events_test,
       an_event_that_woke_passivated_children_through_their_parent_wakes_no_later_one) {
  start_with(std::chrono::milliseconds{20});
  auto busy = probe({act(ProbeAction::NEXT)});
  busy.mutable_actions(0)->set_gate("busy");
  auto root = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *root.mutable_actions(0)->add_children() = busy;
  for (int i = 0; i < 2; ++i)
    *root.mutable_actions(0)->add_children() =
      probe({act(ProbeAction::SUSPEND, "kids"), act(ProbeAction::NEXT)});
  auto id = submit("test.probe", json(root));
  std::vector<uint64_t> ids;  // root, busy, the two waiters
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 4; }));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 2; }))
    << "the event waiters kept their actors";
  EXPECT_EQ(event("kids", R"("k")").text(), delivered("kids", 2));
  for (size_t i = 2; i < 4; ++i) {
    ASSERT_TRUE(eventually([&] { return status(ids[i]).state() == pb::SUCCESS; }));
    EXPECT_EQ(starts(ids[i]), 2) << "procedure " << ids[i] << ": started, then woken once";
  }
  auto later = waiter("kids");
  expect_still_waiting(later);
  world().open("busy");
  ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  restart([](node_options& o) { o.executor.passivate_after = std::chrono::milliseconds{20}; });
  expect_still_waiting(later);
  expect_clean_world();
}

// A supervisor restarting all its children (one_for_all, after a sibling crashed) stops a
// waiter; an event that comes before the waiter's new actor is there is handed to the old
// one, which is gone, and is handed again to the new one when it waits (it was left in flight
// and the waiter waited for ever). A sibling busy at a gate holds the restart back meanwhile.
TEST_F(events_test, an_event_handed_to_a_waiter_stopped_for_a_restart_reaches_its_new_actor) {
  supervision_policy all;
  all.strategy = restart_strategy::one_for_all;
  all.backoff_min = std::chrono::milliseconds{5};
  all.backoff_max = std::chrono::milliseconds{20};
  types_.add<testing::probe>("test.probe_all", 1, all);
  start_with(std::chrono::milliseconds{-1});  // the waiter keeps its actor
  auto crasher = probe({act(ProbeAction::NEXT), act(ProbeAction::CRASH_ONCE)});
  crasher.mutable_actions(0)->set_gate("crash");
  auto busy = probe({act(ProbeAction::NEXT)});
  busy.mutable_actions(0)->set_gate("busy");
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = crasher;
  *r.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::SUSPEND, "sv"), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = busy;
  auto id = submit("test.probe_all", json(r));
  std::vector<uint64_t> ids;  // root, crasher, waiter, busy
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 4; }));
  ASSERT_TRUE(eventually([&] { return status(ids[2]).waiting_for() == "event sv"; }));
  ASSERT_TRUE(world().wait_started(probe_world::key(ids[3], 1)));
  world().open("crash");
  ASSERT_TRUE(world().wait_started(probe_world::key(ids[1], 2)));  // it crashes now
  // The waiter is stopped at once (nothing shows when its actor is gone); the restart waits
  // for the busy sibling's step.
  std::this_thread::sleep_for(std::chrono::milliseconds{300});
  EXPECT_EQ(event("sv", R"("sv")").text(), delivered("sv", 1));
  world().open("busy");
  auto s = wait(id, std::chrono::seconds{20});
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.ShortDebugString();
  EXPECT_EQ(status(ids[2]).state(), pb::SUCCESS) << "the waiter never got its event";
  EXPECT_EQ(world().starts()[probe_world::key(ids[2], 2)], 1);
  auto later = waiter("sv");
  expect_still_waiting(later);
  expect_clean_world();
}

// -- restarts and crashes ---------------------------------------------------------------------

TEST_F(events_test, a_consumed_kept_event_is_not_delivered_again_after_a_restart) {
  start();
  EXPECT_EQ(event("once", R"("once")").text(), kept("once"));
  auto first = waiter("once");
  expect_woken_by(first, R"("once")");
  restart();
  auto second = waiter("once");
  expect_still_waiting(second);
  EXPECT_EQ(event("once", R"("again")").text(), delivered("once", 1));
  expect_woken_by(second, R"("again")");
}

TEST_F(events_test, an_event_that_woke_a_waiter_is_not_kept_across_a_restart) {
  start();
  auto first = waiter("w");
  EXPECT_EQ(event("w", R"("w")").text(), delivered("w", 1));
  expect_woken_by(first, R"("w")");
  restart();
  auto second = waiter("w");
  expect_still_waiting(second);
}

TEST_F(events_test, a_kept_event_survives_a_restart_and_is_consumed_once) {
  start();
  EXPECT_EQ(event("ks", R"("ks")").text(), kept("ks"));
  restart();
  auto first = waiter("ks");
  expect_woken_by(first, R"("ks")");
  auto second = waiter("ks");
  expect_still_waiting(second);
}

// The crash comes as the waiter journals its delivery of a kept event (in the same write as
// the deletion of the event's record): the restarted node hands the event to that waiter
// again, and to no other.
TEST_F(events_test, a_crash_before_a_kept_event_is_consumed_leaves_it_to_the_same_waiter) {
  start_crashable();
  EXPECT_EQ(event("c", R"("c")").text(), kept("c"));
  store_->arm(1);
  auto id = submit("demo.wait_event", R"({"key":"c"})");
  ASSERT_TRUE(store_->faults().wait_frozen(std::chrono::seconds{10}));
  start_crashable();
  expect_woken_by(id, R"("c")");
  auto later = waiter("c");
  expect_still_waiting(later);
}

// The crash comes as the one waiter the event woke journals its delivery.
TEST_F(events_test, a_crash_before_a_woken_waiter_journaled_its_event_wakes_it_after_restart) {
  start_crashable();
  auto id = waiter("b1");
  store_->arm(1);
  EXPECT_EQ(event("b1", R"("b1")").text(), delivered("b1", 1));
  ASSERT_TRUE(store_->faults().wait_frozen(std::chrono::seconds{10}));
  start_crashable();
  expect_woken_by(id, R"("b1")");
  auto later = waiter("b1");
  expect_still_waiting(later);
}

// The event woke two waiters; the crash comes as the second journals its delivery (or both,
// when they share the write): the one that had not journaled it gets it after the restart,
// and a later waiter does not.
TEST_F(events_test, a_crash_between_the_deliveries_of_an_event_that_woke_two_completes_them) {
  start_crashable();
  auto a = waiter("b2");
  auto b = waiter("b2");
  store_->arm(2);
  EXPECT_EQ(event("b2", R"("b2")").text(), delivered("b2", 2));
  ASSERT_TRUE(store_->faults().wait_frozen(std::chrono::seconds{10}));
  start_crashable();
  expect_woken_by(a, R"("b2")");
  expect_woken_by(b, R"("b2")");
  auto later = waiter("b2");
  expect_still_waiting(later);
  start_crashable();  // and once more: the event's record is gone
  auto after = waiter("b2");
  expect_still_waiting(after);
}

}  // namespace
}  // namespace proctor::testing
