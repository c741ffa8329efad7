// Results of finished trees are kept for executor_config::result_ttl, then released: their
// journal range is deleted and the node forgets them. A restart keeps what remains of the TTL.
#include <vector>

#include "actors/engine_fixture.hpp"

namespace proctor::testing {
namespace {

class retention_test : public engine {
protected:
  void start_with_ttl(std::chrono::milliseconds ttl) {
    start([ttl](node_options& o) { o.executor.result_ttl = ttl; });
  }

  bool known(uint64_t id) {
    pb::Request req;
    req.mutable_status()->set_id(id);
    return call(req).code() != pb::Response::NOT_FOUND;
  }
};

TEST_F(retention_test, results_are_released_after_their_ttl_in_the_order_they_ended) {
  start_with_ttl(std::chrono::milliseconds{600});
  auto first = submit("demo.noop", R"({"steps":1})");
  ASSERT_EQ(wait(first).state(), pb::SUCCESS);
  auto t_first = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds{300});  // the second ends later
  auto second = submit("demo.noop", R"({"steps":1})");
  ASSERT_EQ(wait(second).state(), pb::SUCCESS);
  ASSERT_TRUE(eventually([&] { return !known(first); }, std::chrono::seconds{5}));
  EXPECT_GE(std::chrono::steady_clock::now() - t_first, std::chrono::milliseconds{600});
  EXPECT_TRUE(known(second)) << "released with the first, before its own TTL";
  ASSERT_TRUE(eventually([&] { return !known(second); }, std::chrono::seconds{5}));
  // Released means deleted from the journal too: a restart does not bring them back.
  restart();
  EXPECT_FALSE(known(first));
  EXPECT_FALSE(known(second));
}

TEST_F(retention_test, a_restart_keeps_what_remains_of_the_ttl) {
  start_with_ttl(std::chrono::seconds{30});
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(submit("demo.noop", R"({"steps":1})"));
  for (auto id : ids)
    ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  restart([](node_options& o) { o.executor.result_ttl = std::chrono::seconds{30}; });
  for (auto id : ids)
    EXPECT_EQ(status(id).state(), pb::SUCCESS);  // 30 s are not over
  std::this_thread::sleep_for(std::chrono::milliseconds{200});
  restart([](node_options& o) { o.executor.result_ttl = std::chrono::milliseconds{100}; });
  for (auto id : ids)
    EXPECT_TRUE(eventually([&] { return !known(id); }, std::chrono::seconds{5})) << id;
}

} // namespace
} // namespace proctor::testing
