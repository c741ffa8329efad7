#include "persistence/journal.hpp"

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/keys.hpp"
#include "persistence/rocksdb_store.hpp"

namespace proctor {
namespace {

using namespace std::chrono_literals;

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/proctor_journal_test_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::shared_ptr<journal_store> open_store(const std::string& dir) {
  std::string err;
  auto s = open_rocksdb_store(dir, &err);
  if (!s)
    throw std::runtime_error(err);
  return s;
}

journal_batch entries(std::initializer_list<std::pair<uint64_t, std::string>> xs) {
  journal_batch b;
  for (auto& [root, rec] : xs)
    b.entries.push_back({root, rec});
  return b;
}

/// A store whose writes always fail, as a full or broken disk would.
class failing_store : public journal_store {
public:
  std::atomic<int> writes{0};
  rocksdb::Status write(const std::vector<store_op>&) override {
    ++writes;
    return rocksdb::Status::IOError("injected write failure");
  }
  rocksdb::Status scan(const std::function<bool(const stored_record&)>&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status read_tree(uint64_t, std::vector<stored_record>*) override {
    return rocksdb::Status::OK();
  }
};

/// A store whose next write takes `delay` longer, as a disk's occasional stall would.
class stalling_store : public forwarding_store {
public:
  explicit stalling_store(std::shared_ptr<journal_store> inner)
      : forwarding_store(std::move(inner)) {}
  std::atomic<int> stall_ms{0};
  rocksdb::Status write(const std::vector<store_op>& ops) override {
    if (auto ms = stall_ms.exchange(0); ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds{ms});
    return forwarding_store::write(ops);
  }
};

class journal_test : public ::testing::Test {
protected:
  ~journal_test() override {
    for (auto& j : journals_)
      self->send_exit(j, caf::exit_reason::user_shutdown);
  }

  caf::actor spawn(journal_config jc) {
    if (!jc.fatal)
      jc.fatal = [](const std::string& msg) { ADD_FAILURE() << "unexpected fatal: " << msg; };
    auto j = spawn_journal(sys, std::move(jc));
    journals_.push_back(j);
    return j;
  }

  caf::actor spawn_on_disk(std::shared_ptr<std::atomic<uint64_t>> next_id = nullptr) {
    journal_config jc;
    jc.store = store;
    jc.next_id = std::move(next_id);
    return spawn(std::move(jc));
  }

  uint64_t append(const caf::actor& j, journal_batch b) {
    uint64_t result = 0;
    self->request(j, 10s, append_atom::value, std::move(b))
      .receive([&](uint64_t lsn) { result = lsn; },
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return result;
  }

  journal_records read_tree(const caf::actor& j, uint64_t root) {
    journal_records out;
    self->request(j, 10s, read_tree_atom::value, root)
      .receive([&](journal_records& recs) { out = std::move(recs); },
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }

  journal_stats stats(const caf::actor& j) {
    journal_stats out;
    self->request(j, 10s, journal_stats_atom::value)
      .receive([&](journal_stats& s) { out = s; },
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }

  temp_dir dir;
  std::shared_ptr<journal_store> store = open_store(dir.path + "/db");
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::vector<caf::actor> journals_;
};

// -- concurrency and group commit ---------------------------------------------------------

struct appender_state {
  std::vector<uint64_t> lsns;
};

using appender_actor = caf::stateful_actor<appender_state>;

void append_next(appender_actor* self, caf::actor j, caf::actor report_to, uint64_t root,
                 size_t n) {
  if (self->state.lsns.size() == n) {
    self->send(report_to, root, self->state.lsns);
    self->quit();
    return;
  }
  auto b = entries({{root, std::to_string(self->state.lsns.size())}});
  self->request(j, 10s, append_atom::value, std::move(b))
    .then(
      [=](uint64_t lsn) {
        self->state.lsns.push_back(lsn);
        append_next(self, j, report_to, root, n);
      },
      [=](caf::error&) {
        self->send(report_to, root, std::vector<uint64_t>{});
        self->quit();
      });
}

caf::behavior appender(appender_actor* self, caf::actor j, caf::actor report_to, uint64_t root,
                       size_t n) {
  append_next(self, j, report_to, root, n);
  return {[](caf::ok_atom) {}};
}

TEST_F(journal_test, concurrent_appends_get_unique_increasing_lsns_and_are_readable) {
  constexpr size_t actors = 50;
  constexpr size_t per_actor = 200;
  auto j = spawn_on_disk();
  for (uint64_t root = 1; root <= actors; ++root)
    sys.spawn(appender, j, caf::actor_cast<caf::actor>(self), root, per_actor);
  std::set<uint64_t> all;
  std::map<uint64_t, std::vector<uint64_t>> by_root;
  for (size_t i = 0; i < actors; ++i) {
    self->receive(
      [&](uint64_t root, std::vector<uint64_t>& lsns) { by_root[root] = std::move(lsns); },
      caf::after(30s) >> [&] { FAIL() << "appenders did not finish"; });
  }
  ASSERT_EQ(by_root.size(), actors);
  for (auto& [root, lsns] : by_root) {
    ASSERT_EQ(lsns.size(), per_actor) << "root " << root;
    for (size_t k = 1; k < lsns.size(); ++k)
      ASSERT_LT(lsns[k - 1], lsns[k]);
    all.insert(lsns.begin(), lsns.end());
    auto recs = read_tree(j, root);
    ASSERT_EQ(recs.size(), per_actor);
    for (size_t k = 0; k < per_actor; ++k) {
      EXPECT_EQ(recs[k].root_id, root);
      EXPECT_EQ(recs[k].lsn, lsns[k]);
      EXPECT_EQ(recs[k].value, std::to_string(k));
    }
  }
  EXPECT_EQ(all.size(), actors * per_actor);
  EXPECT_EQ(*all.begin(), 1u);
  EXPECT_EQ(*all.rbegin(), actors * per_actor);
  auto s = stats(j);
  EXPECT_EQ(s.records, actors * per_actor);
  EXPECT_EQ(s.next_lsn, actors * per_actor + 1);
  EXPECT_LT(s.batches, s.records);
}

TEST_F(journal_test, group_commit_batches_appends_issued_without_waiting) {
  constexpr size_t n = 2000;
  auto j = spawn_on_disk();
  using handle_t = decltype(self->request(j, 10s, append_atom::value, journal_batch{}));
  std::vector<handle_t> handles;
  handles.reserve(n);
  for (size_t i = 0; i < n; ++i)
    handles.push_back(
      self->request(j, 10s, append_atom::value, entries({{7, "r" + std::to_string(i)}})));
  // Issued before any acknowledgement is consumed: must see every append above.
  auto read = self->request(j, 10s, read_tree_atom::value, uint64_t{7});
  std::vector<uint64_t> lsns;
  for (auto& h : handles)
    h.receive([&](uint64_t lsn) { lsns.push_back(lsn); },
              [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  ASSERT_EQ(lsns.size(), n);
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(lsns[i], i + 1);  // one sender: mailbox order is LSN order
  read.receive(
    [&](journal_records& recs) {
      ASSERT_EQ(recs.size(), n);
      EXPECT_EQ(recs.back().lsn, n);
      EXPECT_EQ(recs.back().value, "r" + std::to_string(n - 1));
    },
    [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  auto s = stats(j);
  EXPECT_EQ(s.records, n);
  EXPECT_EQ(s.next_lsn, n + 1);
  EXPECT_LT(s.batches, s.records / 4) << "appends were not grouped";
  EXPECT_GE(s.fsync_us_total, s.fsync_us_last);
}

TEST_F(journal_test, starts_at_the_configured_lsn_and_multi_entry_batches_ack_their_last) {
  journal_config jc;
  jc.store = store;
  jc.next_lsn = 1000;
  auto j = spawn(std::move(jc));
  EXPECT_EQ(append(j, entries({{3, "a"}, {4, "b"}, {3, "c"}})), 1002u);
  EXPECT_EQ(append(j, entries({{3, "d"}})), 1003u);
  // An append without entries acknowledges the last LSN assigned before it.
  EXPECT_EQ(append(j, journal_batch{}), 1003u);
  auto recs = read_tree(j, 3);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].lsn, 1000u);
  EXPECT_EQ(recs[1].lsn, 1002u);
  EXPECT_EQ(recs[2].lsn, 1003u);
  EXPECT_EQ(stats(j).next_lsn, 1004u);
}

// -- deletes ------------------------------------------------------------------------------

TEST_F(journal_test, delete_before_zero_removes_earlier_records_but_keeps_its_batch) {
  auto j = spawn_on_disk();
  append(j, entries({{7, "s1"}, {7, "s2"}, {8, "other"}}));
  auto b = entries({{7, "summary"}});
  b.deletes.push_back({.root_id = 7, .before_lsn = 0});
  auto lsn = append(j, std::move(b));
  auto recs = read_tree(j, 7);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].lsn, lsn);
  EXPECT_EQ(recs[0].value, "summary");
  EXPECT_EQ(read_tree(j, 8).size(), 1u);
}

TEST_F(journal_test, delete_before_zero_covers_appends_in_the_same_group_commit) {
  auto j = spawn_on_disk();
  // Pipelined: the three appends may share one WriteBatch; the delete must still see the
  // first two as "written so far" and keep its own entry and the later append.
  auto h1 = self->request(j, 10s, append_atom::value, entries({{7, "s1"}, {7, "s2"}}));
  auto b = entries({{7, "summary"}});
  b.deletes.push_back({.root_id = 7, .before_lsn = 0});
  auto h2 = self->request(j, 10s, append_atom::value, std::move(b));
  auto h3 = self->request(j, 10s, append_atom::value, entries({{7, "after"}}));
  std::vector<uint64_t> acks;
  for (auto* h : {&h1, &h2, &h3})
    h->receive([&](uint64_t lsn) { acks.push_back(lsn); },
               [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
  EXPECT_EQ(acks, (std::vector<uint64_t>{2, 3, 4}));
  auto recs = read_tree(j, 7);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].value, "summary");
  EXPECT_EQ(recs[1].value, "after");
}

TEST_F(journal_test, delete_only_batch_and_explicit_bounds) {
  auto j = spawn_on_disk();
  append(j, entries({{5, "a"}, {5, "b"}, {5, "c"}, {6, "x"}}));  // LSNs 1..4
  journal_batch partial;
  partial.deletes.push_back({.root_id = 5, .before_lsn = 3});  // removes LSNs 1, 2
  EXPECT_EQ(append(j, std::move(partial)), 4u);
  auto recs = read_tree(j, 5);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].value, "c");
  journal_batch all;
  all.deletes.push_back({.root_id = 6, .before_lsn = 0});
  append(j, std::move(all));
  EXPECT_TRUE(read_tree(j, 6).empty());
  EXPECT_EQ(read_tree(j, 5).size(), 1u);
}

TEST_F(journal_test, delete_from_an_lsn_removes_only_that_slice) {
  auto j = spawn_on_disk();
  append(j, entries({{5, "a"}, {5, "b"}, {5, "c"}, {5, "d"}}));  // LSNs 1..4
  journal_batch one;
  one.deletes.push_back({.root_id = 5, .from_lsn = 2, .before_lsn = 3});
  append(j, std::move(one));
  journal_batch tail;
  tail.deletes.push_back({.root_id = 5, .from_lsn = 4, .before_lsn = UINT64_MAX});
  append(j, std::move(tail));
  journal_batch empty_range;
  empty_range.deletes.push_back({.root_id = 5, .from_lsn = 3, .before_lsn = 3});
  append(j, std::move(empty_range));
  auto recs = read_tree(j, 5);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].value, "a");
  EXPECT_EQ(recs[1].value, "c");
  // from_lsn with before_lsn = 0: from there up to everything written so far.
  append(j, entries({{5, "e"}, {5, "f"}}));  // LSNs 5, 6
  auto b = entries({{5, "g"}});
  b.deletes.push_back({.root_id = 5, .from_lsn = 3, .before_lsn = 0});
  append(j, std::move(b));
  recs = read_tree(j, 5);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].value, "a");
  EXPECT_EQ(recs[1].value, "g");
}

TEST_F(journal_test, id_floor_is_written_with_deletes) {
  auto next_id = std::make_shared<std::atomic<uint64_t>>(42);
  auto j = spawn_on_disk(next_id);
  append(j, entries({{9, "a"}}));
  EXPECT_TRUE(read_tree(j, journal_keys::meta_root).empty());
  auto floor_of = [&]() -> uint64_t {
    auto recs = read_tree(j, journal_keys::meta_root);
    if (recs.size() != 1 || recs[0].lsn != journal_keys::id_floor_lsn)
      return 0;
    pb::JournalRecord rec;
    if (!rec.ParseFromString(recs[0].value) || rec.format() != 1 || !rec.has_id_floor())
      return 0;
    return rec.id_floor().next_id();
  };
  journal_batch b;
  b.deletes.push_back({.root_id = 9, .before_lsn = 0});
  append(j, std::move(b));
  EXPECT_EQ(floor_of(), 42u);
  EXPECT_TRUE(read_tree(j, 9).empty());
  next_id->store(100);
  append(j, entries({{10, "x"}}));
  EXPECT_EQ(floor_of(), 42u);  // no delete, no new floor
  journal_batch b2;
  b2.deletes.push_back({.root_id = 10, .before_lsn = UINT64_MAX});
  append(j, std::move(b2));
  EXPECT_EQ(floor_of(), 100u);
}

// -- failure ------------------------------------------------------------------------------

TEST_F(journal_test, stats_keep_the_slowest_synced_write_and_count_slow_ones) {
  auto slow = std::make_shared<stalling_store>(store);
  journal_config jc;
  jc.store = slow;
  auto j = spawn(std::move(jc));
  append(j, entries({{5, "a"}}));
  auto quick = stats(j);
  EXPECT_EQ(quick.fsync_us_max, quick.fsync_us_last);
  slow->stall_ms = static_cast<int>(slow_write_us / 1000) + 5;
  append(j, entries({{5, "b"}}));
  append(j, entries({{5, "c"}}));  // after the slow one: the maximum stays
  auto after = stats(j);
  EXPECT_EQ(after.batches, 3u);
  EXPECT_GE(after.slow_writes, quick.slow_writes + 1);
  EXPECT_GE(after.fsync_us_max, slow_write_us + 5'000);
  // Every write is in the total: the first, and at least the stall of the slow one. (Not
  // "max + the first's": on a loaded machine the first write, which creates RocksDB's files,
  // can itself be the slowest, and then max + first counts it twice: the flake it was.)
  EXPECT_GE(after.fsync_us_total, quick.fsync_us_total + slow_write_us + 5'000);
}

TEST_F(journal_test, write_error_fail_stops_and_never_acknowledges) {
  auto bad = std::make_shared<failing_store>();
  auto fatal_calls = std::make_shared<std::atomic<int>>(0);
  auto fatal_msg = std::make_shared<std::string>();
  auto mtx = std::make_shared<std::mutex>();
  journal_config jc;
  jc.store = bad;
  jc.fatal = [=](const std::string& msg) {
    ++*fatal_calls;
    std::lock_guard<std::mutex> guard{*mtx};
    *fatal_msg = msg;
  };
  auto j = spawn(std::move(jc));
  auto expect_timeout = [&](journal_batch b) {
    self->request(j, 200ms, append_atom::value, std::move(b))
      .receive([&](uint64_t lsn) { ADD_FAILURE() << "acknowledged a failed write: " << lsn; },
               [&](caf::error& e) { EXPECT_EQ(e, caf::sec::request_timeout) << sys.render(e); });
  };
  // Two appends in flight when the write fails, one after it.
  auto h = self->request(j, 200ms, append_atom::value, entries({{1, "b"}}));
  expect_timeout(entries({{1, "a"}}));
  h.receive([&](uint64_t) { ADD_FAILURE() << "acknowledged a failed write"; },
            [&](caf::error& e) { EXPECT_EQ(e, caf::sec::request_timeout) << sys.render(e); });
  expect_timeout(entries({{1, "c"}}));
  EXPECT_EQ(fatal_calls->load(), 1);
  EXPECT_EQ(bad->writes.load(), 1);
  {
    std::lock_guard<std::mutex> guard{*mtx};
    EXPECT_NE(fatal_msg->find("injected write failure"), std::string::npos) << *fatal_msg;
  }
  self->request(j, 10s, read_tree_atom::value, uint64_t{1})
    .receive([&](journal_records&) { ADD_FAILURE() << "read from a failed journal"; },
             [&](caf::error&) {});
}

TEST_F(journal_test, clean_exit_flushes_what_it_accepted) {
  auto j = spawn_on_disk();
  for (int i = 0; i < 100; ++i)
    self->send(j, append_atom::value, entries({{3, std::to_string(i)}}));
  self->send_exit(j, caf::exit_reason::user_shutdown);
  self->wait_for(j);
  std::vector<stored_record> recs;
  ASSERT_TRUE(store->read_tree(3, &recs).ok());
  EXPECT_EQ(recs.size(), 100u);
  // The journal answered each asynchronous append with its LSN, as CAF does for results
  // of non-request messages.
  size_t acks = 0;
  self->receive_while([&] { return acks < 100; })([&](uint64_t) { ++acks; }, caf::after(5s) >>
                                                                               [&] {
                                                                                 ADD_FAILURE()
                                                                                   << acks;
                                                                                 acks = 100;
                                                                               });
}

}  // namespace
}  // namespace proctor
