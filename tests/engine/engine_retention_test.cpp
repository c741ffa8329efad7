// Results of finished trees are kept for executor_config::result_ttl, then released: their
// journal range is deleted and the node forgets them. A restart keeps what remains of the TTL.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/engine/engine_fixture.hpp"

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

  /// The journal's count of range deletes written since the node started.
  uint64_t range_deletes() {
    auto n = metric("proctor_journal_range_deletes_total");
    return n < 0 ? 0 : static_cast<uint64_t>(n);
  }
};

TEST_F(retention_test, results_are_released_after_their_ttl_in_the_order_they_ended) {
  constexpr auto ttl = std::chrono::milliseconds{600};
  start_with_ttl(ttl);
  // A procedure ends after its submit was sent: times taken before the submits are lower
  // bounds of the ends, so the checks below hold however slowly the machine runs.
  auto t_first = std::chrono::steady_clock::now();
  auto first = submit("demo.noop", R"({"steps":1})");
  ASSERT_EQ(wait(first).state(), pb::SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds{300});  // the second ends later
  auto t_second = std::chrono::steady_clock::now();
  auto second = submit("demo.noop", R"({"steps":1})");
  ASSERT_EQ(wait(second).state(), pb::SUCCESS);
  ASSERT_TRUE(eventually([&] { return !known(first); }, std::chrono::seconds{5}));
  EXPECT_GE(std::chrono::steady_clock::now() - t_first, ttl);
  bool second_known = known(second);
  auto since_second = std::chrono::steady_clock::now() - t_second;
  EXPECT_TRUE(second_known || since_second >= ttl)
    << "released with the first, "
    << std::chrono::duration_cast<std::chrono::milliseconds>(since_second).count()
    << " ms after its submit, before its own TTL";
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

TEST_F(retention_test, neighbouring_trees_go_with_one_range_delete_and_a_live_tree_between_stays) {
  // Long enough for the waits below to see every procedure end before it is released,
  // however slow the machine.
  start_with_ttl(std::chrono::seconds{3});
  auto a = submit("demo.noop", R"({"steps":2})");
  ASSERT_EQ(wait(a).state(), pb::SUCCESS);
  auto w = submit("demo.wait_event", R"({"key":"stay"})");
  ASSERT_TRUE(
    eventually([&] { return status(w).state() == pb::WAITING; }, std::chrono::seconds{5}));
  std::vector<uint64_t> done;
  for (int i = 0; i < 20; ++i)
    done.push_back(submit("demo.noop", R"({"steps":2})"));
  for (auto id : done)
    ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  done.push_back(a);
  for (auto id : done)
    ASSERT_TRUE(eventually([&] { return !known(id); }, std::chrono::seconds{20})) << id;
  EXPECT_TRUE(known(w));
  // Each tree's records are collected soon after it ends, and its summary goes when it is
  // released: a range delete per tree would make 42. Grouped, a goes alone (w follows it),
  // and its 20 neighbours in a few groups (the collection's and the expiry timer's ticks).
  // How many groups there are depends on how many trees end within one tick (on a loaded
  // machine, ends spread out): the certain bound is "fewer than one per tree".
  ASSERT_TRUE(eventually([&] { return range_deletes() >= 2; }, std::chrono::seconds{5}));
  EXPECT_LT(range_deletes(), 42u) << "one range delete per tree?";
  // On disk: nothing of the released trees, all of the waiting one.
  stop();
  {
    std::string err;
    auto store = open_rocksdb_store(dir_ + "/data", &err);
    ASSERT_TRUE(store) << err;
    std::set<uint64_t> roots;
    ASSERT_TRUE(store
                  ->scan([&](const stored_record& r) {
                    roots.insert(r.root_id);
                    return true;
                  })
                  .ok());
    for (auto id : done)
      EXPECT_FALSE(roots.count(id)) << id;
    EXPECT_TRUE(roots.count(w));
  }
  start_with_ttl(std::chrono::milliseconds{300});
  EXPECT_EQ(status(w).state(), pb::WAITING);
  event("stay", "1");
  EXPECT_EQ(wait(w).state(), pb::SUCCESS);
}

/// Every record of the journal, by tree.
std::map<uint64_t, std::vector<pb::JournalRecord>> journal_by_tree(const std::string& dir) {
  std::string err;
  auto store = open_rocksdb_store(dir, &err);
  EXPECT_TRUE(store) << err;
  std::map<uint64_t, std::vector<pb::JournalRecord>> out;
  if (!store)
    return out;
  EXPECT_TRUE(store
                ->scan([&](const stored_record& r) {
                  pb::JournalRecord rec;
                  EXPECT_TRUE(rec.ParseFromArray(r.value.data(), static_cast<int>(r.value.size())));
                  out[r.root_id].push_back(std::move(rec));
                  return true;
                })
                .ok());
  return out;
}

TEST_F(retention_test, a_finished_tree_keeps_only_its_summary_once_collected_even_across_restart) {
  // Collection far off: the node stops with every finished tree's records still there.
  start([](node_options& o) {
    o.executor.result_ttl = std::chrono::seconds{60};
    o.executor.collect_after = std::chrono::seconds{60};
  });
  std::vector<uint64_t> done;
  for (int i = 0; i < 10; ++i)
    done.push_back(submit("demo.noop", R"({"steps":3})"));
  auto w = submit("demo.wait_event", R"({"key":"later"})");
  for (int i = 0; i < 10; ++i)
    done.push_back(submit("demo.noop", R"({"steps":3})"));
  for (auto id : done)
    ASSERT_EQ(wait(id).state(), pb::SUCCESS);
  ASSERT_TRUE(
    eventually([&] { return status(w).state() == pb::WAITING; }, std::chrono::seconds{5}));
  stop();
  auto before = journal_by_tree(dir_ + "/data");
  for (auto id : done) {
    ASSERT_GE(before[id].size(), 4u) << id;  // submitted, steps, summary
    EXPECT_TRUE(before[id].back().has_summary()) << id;
  }
  // Recovery finds them and collects them (soon, this time; no history kept).
  start([](node_options& o) {
    o.executor.result_ttl = std::chrono::seconds{60};
    o.executor.collect_after = std::chrono::milliseconds{10};
    o.executor.history_keep_records = 0;
  });
  for (auto id : done)
    EXPECT_EQ(status(id).state(), pb::SUCCESS) << id;
  ASSERT_TRUE(eventually([&] { return range_deletes() >= 1; }, std::chrono::seconds{5}));
  EXPECT_LE(range_deletes(), 2u) << "w splits them in two runs at most";
  stop();
  auto after = journal_by_tree(dir_ + "/data");
  for (auto id : done) {
    ASSERT_EQ(after[id].size(), 1u) << id;
    EXPECT_TRUE(after[id][0].has_summary()) << id;
  }
  EXPECT_EQ(after[w].size(), before[w].size()) << "the waiting tree lost records";
  // The summaries are what the node knows of them; the waiting tree still works.
  start([](node_options& o) { o.executor.result_ttl = std::chrono::seconds{60}; });
  for (auto id : done) {
    auto s = status(id);
    EXPECT_EQ(s.state(), pb::SUCCESS) << id;
  }
  event("later", "1");
  EXPECT_EQ(wait(w).state(), pb::SUCCESS);
}

// Issue 46.8: ended trees keep their whole history while the most recent ones fit in the
// budget; the older ones are collected to their summary, the oldest first, also when the
// budget is reached at recovery.
TEST_F(retention_test, the_most_recently_ended_trees_keep_their_history_within_the_budget) {
  auto opts = [](node_options& o) {
    o.executor.result_ttl = std::chrono::seconds{60};
    o.executor.collect_after = std::chrono::milliseconds{10};
    o.executor.history_keep_records = 12;  // two trees of a submit, 3 steps and an end
  };
  start(opts);
  std::vector<uint64_t> done;
  for (int i = 0; i < 6; ++i) {
    done.push_back(submit("demo.noop", R"({"steps":3})"));
    ASSERT_EQ(wait(done.back()).state(), pb::SUCCESS);
  }
  auto history_size = [&](uint64_t id) {
    pb::Request h;
    h.mutable_history()->set_id(id);
    return call(h).history().entries_size();
  };
  ASSERT_TRUE(eventually([&] { return history_size(done[0]) == 1; }, std::chrono::seconds{5}))
    << "the oldest tree was not collected";
  EXPECT_GT(history_size(done[5]), 3) << "the newest tree lost its history";
  EXPECT_GT(history_size(done[4]), 3);
  stop();
  auto records = journal_by_tree(dir_ + "/data");
  EXPECT_EQ(records[done[0]].size(), 1u);
  EXPECT_GT(records[done[5]].size(), 3u);
  // Recovery keeps the same budget: what it finds kept stays kept while it fits.
  start(opts);
  EXPECT_GT(history_size(done[5]), 3);
  EXPECT_EQ(history_size(done[0]), 1);
  for (auto id : done)
    EXPECT_EQ(status(id).state(), pb::SUCCESS) << id;
}

TEST_F(retention_test, a_tree_that_ended_without_a_summary_gets_one_at_recovery) {
  // A journal from before summaries were written atomically with a tree's end: the root's
  // Submitted and Finished records only.
  {
    std::string err;
    auto store = open_rocksdb_store(dir_ + "/data", &err);
    ASSERT_TRUE(store) << err;
    pb::JournalRecord sub;
    sub.set_format(1);
    sub.mutable_submitted()->set_proc_id(5);
    sub.mutable_submitted()->set_type("demo.noop");
    pb::JournalRecord fin;
    fin.set_format(1);
    fin.mutable_finished()->set_proc_id(5);
    fin.mutable_finished()->set_state(pb::SUCCESS);
    fin.mutable_finished()->set_result_json("42");
    ASSERT_TRUE(store
                  ->write({store_op{store_op::kind::put, 5, 1, sub.SerializeAsString()},
                           store_op{store_op::kind::put, 5, 2, fin.SerializeAsString()}})
                  .ok());
  }
  start([](node_options& o) {
    o.executor.result_ttl = std::chrono::seconds{60};
    o.executor.collect_after = std::chrono::milliseconds{10};
    o.executor.history_keep_records = 0;
  });
  EXPECT_EQ(status(5).state(), pb::SUCCESS);
  ASSERT_TRUE(eventually([&] { return range_deletes() >= 1; }, std::chrono::seconds{5}));
  stop();
  auto records = journal_by_tree(dir_ + "/data")[5];
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(records[0].has_summary());
  ASSERT_EQ(records[0].summary().procs_size(), 1);
  EXPECT_EQ(records[0].summary().procs(0).state(), pb::SUCCESS);
  EXPECT_EQ(records[0].summary().procs(0).result_json(), "42");
  start_with_ttl(std::chrono::seconds{60});
  auto s = status(5);
  EXPECT_EQ(s.state(), pb::SUCCESS);
  EXPECT_EQ(s.result_json(), "42");
}

}  // namespace
}  // namespace proctor::testing
