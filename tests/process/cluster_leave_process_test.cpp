// A peer stopped in order (SIGTERM) says so as it leaves: the others show it down as "left"
// and log it at info, not as a failure, and their outbox waits for its return without a
// warning at each try; a peer killed (SIGKILL) is still a failure.
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/process/cluster_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using proctor::test::cluster;
using proctor::test::eventually;

class two_nodes : public cluster {
protected:
  two_nodes() { count_ = 2; }

  std::string log_of(size_t i) const {
    std::ifstream in(nodes_[i]->log_file());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string reason_of_b() {
    auto seen = nodes_seen_by(0);
    auto i = seen.find("b");
    if (i == seen.end())
      return "(a did not answer)";
    auto f = i->second.fields().find("reason");
    return f == i->second.fields().end() ? std::string{} : f->second.string_value();
  }
};

TEST_F(two_nodes, a_peer_stopped_in_order_is_shown_as_left_and_a_killed_one_as_down) {
  EXPECT_EQ(nodes_[1]->stop(), 0) << nodes_[1]->log_tail();
  ASSERT_TRUE(sees(0, "b", false, 10s)) << nodes_[0]->log_tail();
  EXPECT_NE(reason_of_b().find("left: stopped in order"), std::string::npos) << reason_of_b();
  // Still "left" once a has tried to connect to it again (after a second) and failed.
  auto until = std::chrono::steady_clock::now() + 2500ms;
  while (std::chrono::steady_clock::now() < until) {
    auto r = reason_of_b();
    ASSERT_NE(r.find("left: stopped in order"), std::string::npos) << r;
    std::this_thread::sleep_for(200ms);
  }
  // A child for b while it is away: its spawn waits in a's outbox for b's return, said
  // once at info, not warned about at each try.
  auto id = submit(0, R"(,"steps":1,"children":1,"depth":1,"place_on":"b")");
  ASSERT_TRUE(eventually([&] {
    return log_of(0).find("for node b wait for its return (it stopped in order)")
           != std::string::npos;
  }))
    << nodes_[0]->log_tail();
  auto a_log = log_of(0);
  EXPECT_NE(a_log.find("node b left"), std::string::npos) << a_log;
  EXPECT_EQ(a_log.find("node b is down"), std::string::npos) << a_log;
  EXPECT_EQ(a_log.find("not delivered yet"), std::string::npos) << a_log;

  ASSERT_TRUE(nodes_[1]->start()) << nodes_[1]->log_tail();
  ASSERT_TRUE(sees(0, "b", true)) << nodes_[0]->log_tail();
  EXPECT_EQ(final_state(0, id), "SUCCESS");
  nodes_[1]->kill();
  ASSERT_TRUE(sees(0, "b", false, 10s)) << nodes_[0]->log_tail();
  EXPECT_TRUE(eventually([&] { return log_of(0).find("node b is down") != std::string::npos; }))
    << nodes_[0]->log_tail();
  EXPECT_EQ(reason_of_b().find("left"), std::string::npos) << reason_of_b();
}

}  // namespace
