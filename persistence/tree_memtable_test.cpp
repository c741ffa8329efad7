// tree_memtable under the journal's RocksDB options: what is read back, in which order, from
// a memtable still being written, from one being flushed, and from SST files, must be what
// RocksDB's own skiplist memtable gives.
#include "persistence/tree_memtable.hpp"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "persistence/keys.hpp"
#include "persistence/rocksdb_store.hpp"

namespace proctor {
namespace {

namespace fs = std::filesystem;
using kv = std::pair<std::string, std::string>;

class tree_memtable_test : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/proctor_memtable_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    db_ = open(journal_db_options());
  }
  void TearDown() override {
    db_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<rocksdb::DB> open(rocksdb::Options opts) {
    rocksdb::DB* raw = nullptr;
    auto st = rocksdb::DB::Open(opts, dir_ + "/db", &raw);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return std::unique_ptr<rocksdb::DB>(raw);
  }

  void write(const std::vector<kv>& puts, const std::vector<kv>& range_deletes = {}) {
    rocksdb::WriteBatch b;
    for (const auto& [from, to] : range_deletes)
      ASSERT_TRUE(b.DeleteRange(from, to).ok());
    for (const auto& [k, v] : puts)
      ASSERT_TRUE(b.Put(k, v).ok());
    ASSERT_TRUE(db_->Write(rocksdb::WriteOptions{}, &b).ok());
  }

  /// Every key in total order, as the journal's start-up scan reads them.
  std::vector<kv> all(bool backwards = false) {
    rocksdb::ReadOptions ro;
    ro.total_order_seek = true;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    std::vector<kv> out;
    if (backwards) {
      for (it->SeekToLast(); it->Valid(); it->Prev())
        out.emplace_back(it->key().ToString(), it->value().ToString());
    } else {
      for (it->SeekToFirst(); it->Valid(); it->Next())
        out.emplace_back(it->key().ToString(), it->value().ToString());
    }
    EXPECT_TRUE(it->status().ok());
    return out;
  }

  /// One tree, as read_tree reads it: a prefix-mode seek bounded by the next root.
  std::vector<kv> tree(uint64_t root) {
    auto end = journal_keys::encode(root + 1, 0);
    rocksdb::Slice upper(end);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    std::vector<kv> out;
    for (it->Seek(journal_keys::encode(root, 0)); it->Valid(); it->Next())
      out.emplace_back(it->key().ToString(), it->value().ToString());
    EXPECT_TRUE(it->status().ok());
    return out;
  }

  /// Writes batches to many trees at once, each tree's records in LSN order, as the journal
  /// does; `model` gets the same writes. Returns the batches written.
  std::vector<std::vector<kv>> write_interleaved(std::map<std::string, std::string>* model,
                                                 uint64_t first_lsn) {
    std::vector<std::vector<kv>> batches;
    std::mt19937_64 rng(first_lsn);
    uint64_t lsn = first_lsn;
    for (int b = 0; b < 20; ++b) {
      std::vector<kv> puts;
      for (int i = 0; i < 50; ++i) {
        auto root = 1 + rng() % 40;
        auto k = journal_keys::encode(root, lsn++);
        auto v = "v" + std::to_string(lsn);
        puts.emplace_back(k, v);
        (*model)[k] = v;
      }
      write(puts);
      batches.push_back(std::move(puts));
    }
    return batches;
  }

  void flush() { ASSERT_TRUE(db_->Flush(rocksdb::FlushOptions{}).ok()); }

  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

std::string key(uint64_t root, uint64_t lsn) {
  return journal_keys::encode(root, lsn);
}

std::vector<kv> of_tree(const std::map<std::string, std::string>& model, uint64_t root) {
  std::vector<kv> out;
  for (auto it = model.lower_bound(key(root, 0)); it != model.end() && it->first < key(root + 1, 0);
       ++it)
    out.emplace_back(*it);
  return out;
}

TEST_F(tree_memtable_test, many_trees_at_once_read_back_in_key_order_before_and_after_flush) {
  std::map<std::string, std::string> model;
  write_interleaved(&model, 1);
  std::vector<kv> expected(model.begin(), model.end());
  EXPECT_EQ(all(), expected);
  auto backwards = expected;
  std::reverse(backwards.begin(), backwards.end());
  EXPECT_EQ(all(true), backwards);
  for (uint64_t root : {1, 17, 40, 41})
    EXPECT_EQ(tree(root), of_tree(model, root)) << "tree " << root;

  // Half of it flushed to an SST file, the rest in a new memtable: the same answers.
  flush();
  auto batches = write_interleaved(&model, 10000);
  expected.assign(model.begin(), model.end());
  EXPECT_EQ(all(), expected);
  for (uint64_t root : {1, 17, 40})
    EXPECT_EQ(tree(root), of_tree(model, root)) << "tree " << root;
  std::string v;
  ASSERT_TRUE(db_->Get(rocksdb::ReadOptions{}, batches[3][7].first, &v).ok());
  EXPECT_EQ(v, batches[3][7].second);
}

TEST_F(tree_memtable_test, a_key_written_again_reads_as_its_newest_value) {
  // The journal rewrites its id floor under one key; in the memtable the newer entry of
  // the same key sorts first although it arrives last.
  for (int i = 0; i < 5; ++i)
    write({{key(0, 1), "floor " + std::to_string(i)}, {key(3, 10 + i), "x"}});
  std::string v;
  ASSERT_TRUE(db_->Get(rocksdb::ReadOptions{}, key(0, 1), &v).ok());
  EXPECT_EQ(v, "floor 4");
  auto t = tree(0);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].second, "floor 4");
  EXPECT_EQ(all().size(), 6u);
  flush();
  ASSERT_TRUE(db_->Get(rocksdb::ReadOptions{}, key(0, 1), &v).ok());
  EXPECT_EQ(v, "floor 4");
}

TEST_F(tree_memtable_test, range_deletes_hide_a_tree_in_the_memtable) {
  write({{key(5, 1), "a"}, {key(6, 2), "b"}, {key(5, 3), "c"}, {key(7, 4), "d"}});
  write({{key(6, 5), "e"}}, {{key(5, 0), key(6, 0)}});
  EXPECT_TRUE(tree(5).empty());
  EXPECT_EQ(tree(6), (std::vector<kv>{{key(6, 2), "b"}, {key(6, 5), "e"}}));
  EXPECT_EQ(all(), (std::vector<kv>{{key(6, 2), "b"}, {key(6, 5), "e"}, {key(7, 4), "d"}}));
}

TEST_F(tree_memtable_test, keys_shorter_than_a_root_id_keep_their_place_in_key_order) {
  // Never written by the journal; a damaged store may hold them, and a scan must still see
  // them, in order, to report them.
  std::string k1 = key(2, 1), k2 = key(2, 2);
  std::string shorter = k1.substr(0, 5), twelve = k2.substr(0, 12);
  write({{k1, "a"}, {shorter, "s"}, {k2, "b"}, {twelve, "t"}, {"\xff", "z"}});
  std::vector<kv> expected{{shorter, "s"}, {k1, "a"}, {twelve, "t"}, {k2, "b"}, {"\xff", "z"}};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all(), expected);
  std::string v;
  ASSERT_TRUE(db_->Get(rocksdb::ReadOptions{}, shorter, &v).ok());
  EXPECT_EQ(v, "s");
}

TEST_F(tree_memtable_test, reopening_replays_the_log_into_it) {
  std::map<std::string, std::string> model;
  write_interleaved(&model, 1);
  db_.reset();
  db_ = open(journal_db_options());
  EXPECT_EQ(all(), (std::vector<kv>(model.begin(), model.end())));
  EXPECT_EQ(tree(9), of_tree(model, 9));
}

}  // namespace
}  // namespace proctor
