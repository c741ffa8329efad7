// Procedures waiting for a call's reply give up their actors: the executor has
// the call made by a caller of its own (executor_calls.cpp) and routes the reply as an event,
// so a tree whose procedures only wait for replies passivates, a call waiter in a running
// tree is held passivated by its parent, and a call outlives the actors that went meanwhile.
// The reply wakes the procedure once; a node restart sends the call again (same call id);
// a deadline that passes stops the call, and its late answer wakes nothing.
#include <memory>
#include <mutex>
#include <random>
#include <set>

#include "tests/engine/engine_passivation_fixture.hpp"

namespace proctor::testing {
namespace {

using open_atom = caf::atom_constant<caf::atom("open")>;
using release_atom = caf::atom_constant<caf::atom("release")>;

/// What a held service saw, shared across node restarts.
struct service_log {
  std::mutex m;
  std::vector<std::string> call_ids;  ///< every call received, in order
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> g(m);
    return call_ids;
  }
};

/// A service that holds every call until it is opened (open_atom), then answers each, and
/// every later one at once, with {"reply":<request>}; (release_atom, request) answers the
/// calls with that request only, now and later.
caf::behavior
held_service(caf::stateful_actor<
               std::vector<std::pair<std::string, caf::typed_response_promise<std::string>>>>* self,
             std::shared_ptr<service_log> log) {
  auto open = std::make_shared<bool>(false);
  auto released = std::make_shared<std::set<std::string>>();
  return {
    [self, log, open, released](service_call_atom, const std::string& id,
                                const std::string& request) -> caf::result<std::string> {
      {
        std::lock_guard<std::mutex> g(log->m);
        log->call_ids.push_back(id);
      }
      auto reply = R"({"reply":")" + request + R"("})";
      if (*open || released->count(request) > 0)
        return reply;
      auto rp = self->make_response_promise<std::string>();
      self->state.emplace_back(reply, rp);
      return rp;
    },
    [self, released](release_atom, const std::string& request) {
      released->insert(request);
      auto reply = R"({"reply":")" + request + R"("})";
      auto& held = self->state;
      for (auto i = held.begin(); i != held.end();) {
        if (i->first != reply) {
          ++i;
          continue;
        }
        i->second.deliver(reply);
        i = held.erase(i);
      }
    },
    [self, open](open_atom) {
      *open = true;
      for (auto& [reply, rp] : self->state)
        rp.deliver(reply);
      self->state.clear();
    },
  };
}

class call_passivation_test : public passivation_test {
protected:
  void start_held(std::chrono::milliseconds after = std::chrono::milliseconds{20}) {
    start([this, after](node_options& o) {
      o.executor.passivate_after = after;
      service_ = sys_->spawn(held_service, log_);
      o.services["held"] = service_;
    });
  }
  /// The node goes down and comes back, with a new held service sharing the log.
  void restart_held() {
    drop_service();
    stop();
    start_held();
  }
  void TearDown() override {
    drop_service();
    passivation_test::TearDown();
  }
  /// The promises it holds keep it alive (and its actor system from going): it quits.
  void drop_service() {
    if (service_)
      caf::anon_send_exit(service_, caf::exit_reason::user_shutdown);
    service_ = nullptr;
  }
  void open_service() { caf::anon_send(service_, open_atom::value); }
  long calls_in_flight() { return static_cast<long>(metric("proctor_calls_in_flight")); }
  static std::string reply_to(uint64_t id) {
    return R"({"reply":")" + std::to_string(id) + R"("})";
  }

  std::shared_ptr<service_log> log_ = std::make_shared<service_log>();
  caf::actor service_;
};

// A tree whose leaf at depth 3 waits for a call's reply only waits: it passivates, with the
// call still under way; the reply wakes it, the leaf resumes with it once, and the call was
// made once.
TEST_F(call_passivation_test, a_tree_waiting_for_a_reply_at_depth_three_passivates_until_it) {
  start_held();
  auto id = submit("test.probe", json(chain({act(ProbeAction::CALL, "held")})));
  std::vector<uint64_t> ids;
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 3; }));
  auto leaf = ids[2];
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }))
    << "a tree waiting for a reply kept its actors";
  EXPECT_EQ(status(leaf).state(), pb::WAITING);
  EXPECT_EQ(status(leaf).waiting_for(), "reply from held");
  EXPECT_EQ(calls_in_flight(), 1);
  EXPECT_EQ(starts(leaf), 1);
  open_service();
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(world().replies(leaf), std::vector<std::string>{reply_to(leaf)});
  EXPECT_EQ(log_->calls().size(), 1u) << "the call was made again when its tree woke";
  EXPECT_EQ(calls_in_flight(), 0);
  expect_clean_world();
}

// While a sibling's step runs (the tree cannot passivate), the procedure waiting for a reply
// gives up its actor to its parent; the reply brings it back.
TEST_F(call_passivation_test, a_call_waiter_gives_up_its_actor_while_its_tree_runs) {
  start_held();
  auto busy = probe({act(ProbeAction::NEXT)});
  busy.mutable_actions(0)->set_gate("busy");
  auto caller = probe({act(ProbeAction::CALL, "held"), act(ProbeAction::NEXT)});
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = busy;
  *r.mutable_actions(0)->add_children() = caller;
  auto id = submit("test.probe", json(r));
  std::vector<uint64_t> ids;
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 3; }));
  auto waiter = ids[2];
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 1; }))
    << "the call waiter kept its actor";
  EXPECT_EQ(passivated(), 0);
  open_service();
  ASSERT_TRUE(eventually([&] { return status(waiter).state() == pb::SUCCESS; }));
  EXPECT_EQ(starts(waiter), 2) << "spawned once, and once more by the reply";
  world().open("busy");
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(world().replies(waiter), std::vector<std::string>{reply_to(waiter)});
  EXPECT_EQ(log_->calls().size(), 1u);
  expect_clean_world();
}

// The same at depth 3: the waiter's parent, whose other child waits for a timer, goes with
// its subtree; the reply, routed through the grandparent, brings back the parent and then
// the waiter (not the timer's child), and the call was made once.
TEST_F(call_passivation_test, a_reply_brings_back_a_call_waiter_from_a_passivated_subtree) {
  start_held();
  auto busy = probe({act(ProbeAction::NEXT)});
  busy.mutable_actions(0)->set_gate("busy");
  auto mid = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *mid.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::CALL, "held"), act(ProbeAction::NEXT)});
  *mid.mutable_actions(0)->add_children() =
    probe({act(ProbeAction::SLEEP_FOR, {}, 3'000), act(ProbeAction::NEXT)});
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = busy;
  *r.mutable_actions(0)->add_children() = mid;
  auto id = submit("test.probe", json(r));
  std::vector<uint64_t> ids;  // root, busy, mid, the call's waiter, the timer's
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 5; }));
  ASSERT_TRUE(eventually([&] { return metric("proctor_passivated_procedures") == 3; }))
    << "the parent of the call waiter kept its actor";
  EXPECT_EQ(starts(ids[2]), 1);
  open_service();
  ASSERT_TRUE(eventually([&] { return status(ids[3]).state() == pb::SUCCESS; }));
  EXPECT_EQ(starts(ids[2]), 2) << "the reply brought the parent back once";
  EXPECT_EQ(starts(ids[3]), 2);
  EXPECT_EQ(starts(ids[4]), 1) << "the timer's child came back before its time";
  world().open("busy");
  auto s = wait(id, std::chrono::seconds{20});
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(world().replies(ids[3]), std::vector<std::string>{reply_to(ids[3])});
  EXPECT_EQ(log_->calls().size(), 1u) << "the call was made again";
  expect_clean_world();
}

// The node goes down while a passivated tree waits for a reply: recovered passivated, its
// call is made again (with the same call id, for the service to deduplicate), and the reply
// wakes it.
TEST_F(call_passivation_test, a_passivated_call_is_made_again_after_a_restart) {
  start_held();
  auto id = submit("test.probe", json(chain({act(ProbeAction::CALL, "held")})));
  std::vector<uint64_t> ids;
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 3; }));
  auto leaf = ids[2];
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }));
  ASSERT_EQ(log_->calls().size(), 1u);
  restart_held();
  ASSERT_TRUE(eventually([&] { return log_->calls().size() == 2; }))
    << "the call was not made again after the restart";
  EXPECT_EQ(log_->calls()[0], log_->calls()[1]) << "a call made again has its call id";
  EXPECT_EQ(passivated(), 1) << "recovered, the tree should stay passivated";
  EXPECT_EQ(starts(leaf), 1);
  open_service();
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(world().replies(leaf), std::vector<std::string>{reply_to(leaf)});
  expect_clean_world();
}

// The deadline of a passivated call waiter passes: its tree is read back, the call is
// stopped, and the answer the service gives later wakes nothing. (A passed deadline fails
// the resume state, which the probe's retry policy runs again: it runs without a reply.)
TEST_F(call_passivation_test, a_passed_deadline_stops_the_call_of_a_passivated_waiter) {
  start_held();
  auto id = submit("test.probe", json(chain({act(ProbeAction::CALL, "held", 1'800)})));
  std::vector<uint64_t> ids;
  ASSERT_TRUE(eventually([&] { return (ids = tree(id)).size() == 3; }));
  auto leaf = ids[2];
  ASSERT_TRUE(eventually([&] { return passivated() == 1; }));
  EXPECT_EQ(calls_in_flight(), 1);
  auto s = wait(id);
  EXPECT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(world().replies(leaf), std::vector<std::string>{""});
  EXPECT_EQ(calls_in_flight(), 0) << "the call outlived its waiter's deadline";
  // The service answers the held call, then a new one: once the new one is answered, the
  // late answer had its chance to wake the leaf.
  open_service();
  auto next = submit("test.probe", json(probe({act(ProbeAction::CALL, "held")})));
  EXPECT_EQ(wait(next).state(), pb::SUCCESS);
  EXPECT_EQ(world().replies(next), std::vector<std::string>{reply_to(next)});
  EXPECT_EQ(world().replies(leaf), std::vector<std::string>{""});
  EXPECT_EQ(log_->calls().size(), 2u);
  expect_clean_world();
}

// A passivated tree whose journal turns out damaged when an event wakes it is quarantined:
// its call stops with it instead of waiting on the service until the node stops.
TEST_F(call_passivation_test, a_quarantined_tree_stops_its_calls) {
  start_held();
  auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
  *r.mutable_actions(0)->add_children() = probe({act(ProbeAction::CALL, "held")});
  *r.mutable_actions(0)->add_children() = probe({act(ProbeAction::SUSPEND, "q")});
  auto id = submit("test.probe", json(r));
  ASSERT_TRUE(eventually([&] { return passivated() == 1 && calls_in_flight() == 1; }));
  {
    caf::scoped_actor self{*sys_};
    journal_batch b;
    b.entries.push_back({id, std::string("\x0a\xff\xff\xff\xff damaged")});
    self->request(node_->journal(), std::chrono::seconds{10}, append_atom::value, std::move(b))
      .receive([](uint64_t) {}, [](caf::error& e) { FAIL() << to_string(e); });
  }
  event("q", "{}");
  pb::Request req;
  req.mutable_quarantine();
  ASSERT_TRUE(eventually([&] { return call(req).quarantined_size() == 1; }));
  EXPECT_TRUE(eventually([&] { return calls_in_flight() == 0; }))
    << "the quarantined tree's call is still under way";
}

// Calls one after the other, each answered at once, many in the same millisecond: each has a
// call id of its own (a shared one would make the service take the second for the first sent
// twice, and answer it with the first reply).
TEST_F(call_passivation_test, calls_in_the_same_millisecond_have_call_ids_of_their_own) {
  start_held();
  open_service();
  std::vector<ProbeAction> calls(20, act(ProbeAction::CALL, "held"));
  auto id = submit("test.probe", json(probe(calls)));
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  auto ids = log_->calls();
  EXPECT_EQ(ids.size(), 20u);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size())
    << "calls shared a call id";
  EXPECT_EQ(world().replies(id).size(), 20u);
  expect_clean_world();
}

// Replies, aborts and passivation (of whole trees, and of call waiters beside a running step)
// at random moments: every tree ends as it must, each reply wakes its procedure once, no
// call is made twice, and none outlives its procedure. The seed is printed.
TEST_F(call_passivation_test, replies_and_aborts_racing_with_passivation_are_never_lost) {
  auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  start_held(std::chrono::milliseconds{0});
  world().open("busy");  // the busy siblings run at once, at random moments too
  struct tree_case {
    uint64_t id = 0;
    bool aborted = false;
  };
  std::vector<tree_case> cases;
  for (int i = 0; i < 40; ++i) {
    auto leaf = act(ProbeAction::CALL, "held");
    std::string tree_json;
    switch (rng() % 3) {
      case 0:
        tree_json = json(chain({leaf}));
        break;
      case 1: {  // beside a sibling that runs (slowly): the waiter may sleep on its own
        auto busy = probe({act(ProbeAction::NEXT)});
        busy.mutable_actions(0)->set_sleep_ms(static_cast<int>(rng() % 30));
        auto r = probe({act(ProbeAction::SPAWN), act(ProbeAction::NEXT)});
        *r.mutable_actions(0)->add_children() = busy;
        *r.mutable_actions(0)->add_children() = probe({leaf, act(ProbeAction::NEXT)});
        tree_json = json(r);
        break;
      }
      default:
        tree_json = json(probe({leaf}));
        break;
    }
    tree_case t;
    t.id = submit("test.probe", tree_json);
    std::this_thread::sleep_for(std::chrono::microseconds{rng() % 20'000});
    if (rng() % 3 == 0 && abort(t.id).code() == pb::Response::OK)
      t.aborted = true;
    cases.push_back(t);
  }
  ASSERT_TRUE(eventually([&] { return passivated() > 0; })) << "nothing passivated";
  // Every procedure's request is its id: release them all, in a random order, at random
  // moments (a reply for an aborted procedure's call wakes nothing).
  std::vector<uint64_t> all;
  for (auto& t : cases)
    for (auto id : tree(t.id))
      all.push_back(id);
  std::shuffle(all.begin(), all.end(), rng);
  for (auto id : all) {
    caf::anon_send(service_, release_atom::value, std::to_string(id));
    std::this_thread::sleep_for(std::chrono::microseconds{rng() % 5'000});
  }
  for (auto& t : cases) {
    auto s = wait(t.id, std::chrono::seconds{30});
    auto ids = tree(t.id);
    if (t.aborted) {
      EXPECT_EQ(s.state(), pb::ROLLEDBACK) << "tree " << t.id << ": " << s.ShortDebugString();
      EXPECT_EQ(world().check_rolled_back(ids), "");
      continue;
    }
    EXPECT_EQ(s.state(), pb::SUCCESS) << "tree " << t.id << ": " << s.ShortDebugString();
    auto leaf = ids.back();  // depth first: the caller is the last
    EXPECT_EQ(world().replies(leaf), std::vector<std::string>{reply_to(leaf)}) << "tree " << t.id;
  }
  auto calls = log_->calls();
  EXPECT_EQ(std::set<std::string>(calls.begin(), calls.end()).size(), calls.size())
    << "a call was made twice without a restart";
  EXPECT_TRUE(eventually([&] { return calls_in_flight() == 0; }));
  EXPECT_TRUE(eventually([&] { return passivated() == 0; }));
  expect_clean_world();
}

}  // namespace
}  // namespace proctor::testing
