// The nodes' scheduler module: timeouts and delayed messages still work on its clock, and
// only actors that set a timeout have their exit passed on to the clock thread.
#include "actors/node/node_coordinator.hpp"

#include <chrono>
#include <thread>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "actors/node/node.hpp"

namespace proctor {
namespace {

using namespace std::chrono_literals;
using ping_atom = caf::atom_constant<caf::atom("ping")>;

struct tuned_config : caf::actor_system_config {
  tuned_config() { tune_actor_system(*this); }
};

class node_coordinator_test : public ::testing::Test {
protected:
  tuned_config cfg;
  caf::actor_system sys{cfg};

  timeout_tracking_clock& clock() {
    auto* c = dynamic_cast<timeout_tracking_clock*>(&sys.clock());
    EXPECT_NE(c, nullptr) << "the node's actor system does not run node_coordinator";
    return *c;
  }

  /// Waits (bounded) until no tracked actor is left.
  bool untracked_eventually() {
    for (int i = 0; i < 500; ++i) {
      if (clock().tracked() == 0)
        return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
};

TEST_F(node_coordinator_test, a_request_still_times_out_and_its_actor_is_tracked) {
  auto silent =
    sys.spawn([]() -> caf::behavior { return {[](ping_atom) { return caf::delegated<void>{}; }}; });
  caf::scoped_actor self{sys};
  bool timed_out = false;
  self->request(silent, 50ms, ping_atom::value)
    .receive([](caf::message&) {},
             [&](caf::error& e) { timed_out = e == caf::sec::request_timeout; });
  EXPECT_TRUE(timed_out);
  EXPECT_GE(clock().tracked(), 1u);  // the scoped actor set a timeout
  caf::anon_send_exit(silent, caf::exit_reason::kill);
}

TEST_F(node_coordinator_test, an_exit_with_a_timeout_pending_cancels_it) {
  caf::scoped_actor self{sys};
  {
    // An actor that sets a long request timeout and exits before it fires.
    auto silent = sys.spawn(
      []() -> caf::behavior { return {[](ping_atom) { return caf::delegated<void>{}; }}; });
    auto asker = sys.spawn([silent](caf::event_based_actor* a) {
      a->request(silent, 3600s, ping_atom::value).then([](caf::message&) {});
      a->quit();
    });
    self->wait_for(asker);
    caf::anon_send_exit(silent, caf::exit_reason::kill);
    self->wait_for(silent);
  }
  EXPECT_TRUE(untracked_eventually()) << clock().tracked() << " actors still tracked";
}

TEST_F(node_coordinator_test, delayed_messages_and_receive_timeouts_still_fire) {
  caf::scoped_actor self{sys};
  auto t0 = std::chrono::steady_clock::now();
  self->delayed_send(self, 30ms, ping_atom::value);
  bool got = false;
  self->receive([&](ping_atom) { got = true; }, caf::after(5s) >> [] {});
  EXPECT_TRUE(got);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  bool idle = false;
  auto idler = sys.spawn([&idle](caf::event_based_actor* a) -> caf::behavior {
    return {[](ping_atom) {}, caf::after(20ms) >>
                                [a, &idle] {
                                  idle = true;
                                  a->quit();
                                }};
  });
  self->wait_for(idler);
  EXPECT_TRUE(idle);
}

TEST_F(node_coordinator_test, actors_without_timeouts_are_never_tracked) {
  caf::scoped_actor self{sys};
  auto before = clock().tracked();
  for (int i = 0; i < 200; ++i) {
    auto a = sys.spawn(
      [](caf::event_based_actor* s) -> caf::behavior { return {[s](ping_atom) { s->quit(); }}; });
    self->send(a, ping_atom::value);
    self->wait_for(a);
  }
  EXPECT_EQ(clock().tracked(), before);
}

}  // namespace
}  // namespace proctor
