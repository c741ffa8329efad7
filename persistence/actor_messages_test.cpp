#include "persistence/actor_messages.hpp"

#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "persistence/counted_actor.hpp"
#include "persistence/thread_counters.hpp"

namespace proctor {
namespace {

struct test_tag {};
using counts = thread_counters<test_tag, 2>;

TEST(thread_counters, sums_what_every_thread_added_to_each_counter) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 10000; ++i)
        counts::add(t % 2);
    });
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(counts::sum(0), 40000u);
  EXPECT_EQ(counts::sum(1), 40000u);
}

struct echo_state {
  static inline const char* name = "test.counted";
};
using counted_echo = caf::stateful_actor<echo_state, counted_actor<actor_kind::timeout>>;

caf::behavior counted_echo_impl(counted_echo*) {
  return {[](int x) { return x; }};
}

TEST(actor_messages, a_counted_actor_counts_each_message_it_takes_under_its_kind) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  auto timeout_before = actor_messages(actor_kind::timeout);
  auto journal_before = actor_messages(actor_kind::journal);
  auto a = sys.spawn(counted_echo_impl);
  caf::scoped_actor self{sys};
  for (int i = 0; i < 5; ++i)
    self->request(a, caf::infinite, i)
      .receive([&](int y) { EXPECT_EQ(y, i); }, [](caf::error& e) { FAIL() << to_string(e); });
  EXPECT_EQ(actor_messages(actor_kind::timeout) - timeout_before, 5u);
  EXPECT_EQ(actor_messages(actor_kind::journal), journal_before);
  EXPECT_STREQ(actor_kind_name(actor_kind::timeout), "timeout");
  self->send_exit(a, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace proctor
