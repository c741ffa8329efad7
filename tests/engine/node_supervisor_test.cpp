// The node supervisor: a system actor that dies makes the node fail-stop; a shutdown does not.
#include <atomic>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

class node_supervisor_test : public engine {
protected:
  std::atomic<int> failures{0};
  std::string why;
  std::mutex mtx;

  void start_watched() {
    start([this](node_options& o) {
      o.on_system_failure = [this](const std::string& w) {
        std::lock_guard<std::mutex> g(mtx);
        why = w;
        ++failures;
      };
    });
  }
};

TEST_F(node_supervisor_test, a_dying_system_actor_makes_the_node_fail_stop) {
  start_watched();
  caf::anon_send_exit(node_->scheduler(), caf::exit_reason::unhandled_exception);
  ASSERT_TRUE(eventually([&] { return failures.load() == 1; }));
  std::lock_guard<std::mutex> g(mtx);
  EXPECT_NE(why.find("fail-stops"), std::string::npos) << why;
}

TEST_F(node_supervisor_test, a_shutdown_is_not_a_failure) {
  start_watched();
  auto id = submit("demo.noop", R"({"steps":2})");
  EXPECT_EQ(wait(id).state(), pb::SUCCESS);
  stop();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace proctor::testing
