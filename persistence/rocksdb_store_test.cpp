#include "persistence/rocksdb_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "persistence/keys.hpp"

namespace proctor {
namespace {

namespace fs = std::filesystem;

/// A fresh directory under /tmp, removed with everything in it.
struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/proctor_store_test_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto& e : fs::recursive_directory_iterator(path, ec))
      fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
};

store_op put(uint64_t root, uint64_t lsn, std::string value) {
  return {store_op::kind::put, root, lsn, std::move(value)};
}

store_op del(uint64_t root, uint64_t before_lsn, uint64_t from_lsn = 0) {
  return {store_op::kind::delete_range, root, before_lsn, {}, from_lsn};
}

struct rec {
  uint64_t root;
  uint64_t lsn;
  std::string value;
  friend bool operator==(const rec&, const rec&) = default;
  friend std::ostream& operator<<(std::ostream& os, const rec& r) {
    return os << "(" << r.root << "," << r.lsn << ",\"" << r.value << "\")";
  }
};

class rocksdb_store_test : public ::testing::Test {
protected:
  void SetUp() override {
    store_ = open_store(dir_.path + "/db");
    ASSERT_NE(store_, nullptr);
  }

  static std::unique_ptr<journal_store> open_store(const std::string& dir) {
    std::string err;
    auto s = open_rocksdb_store(dir, &err);
    EXPECT_NE(s, nullptr) << err;
    return s;
  }

  std::vector<rec> scan_all() {
    std::vector<rec> out;
    auto st = store_->scan([&](const stored_record& r) {
      out.push_back({r.root_id, r.lsn, r.value});
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  std::vector<rec> tree(uint64_t root) {
    std::vector<stored_record> recs;
    auto st = store_->read_tree(root, &recs);
    EXPECT_TRUE(st.ok()) << st.ToString();
    std::vector<rec> out;
    for (auto& r : recs)
      out.push_back({r.root_id, r.lsn, r.value});
    return out;
  }

  void write(std::vector<store_op> ops) {
    auto st = store_->write(ops);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  temp_dir dir_;
  std::unique_ptr<journal_store> store_;
};

TEST(journal_keys_test, big_endian_and_ordered) {
  auto k = journal_keys::encode(0x0102030405060708ULL, 0x1112131415161718ULL);
  ASSERT_EQ(k.size(), journal_keys::key_size);
  EXPECT_EQ(k, std::string("\x01\x02\x03\x04\x05\x06\x07\x08"
                           "\x11\x12\x13\x14\x15\x16\x17\x18",
                           16));
  // Bytewise order is (root, lsn) order, also across byte boundaries.
  EXPECT_LT(journal_keys::encode(1, 255), journal_keys::encode(1, 256));
  EXPECT_LT(journal_keys::encode(1, 1), journal_keys::encode(1, uint64_t{1} << 40));
  EXPECT_LT(journal_keys::encode(1, UINT64_MAX), journal_keys::encode(2, 0));
  EXPECT_LT(journal_keys::encode(255, 7), journal_keys::encode(256, 0));
  uint64_t root = 0, lsn = 0;
  ASSERT_TRUE(journal_keys::decode(k, &root, &lsn));
  EXPECT_EQ(root, 0x0102030405060708ULL);
  EXPECT_EQ(lsn, 0x1112131415161718ULL);
  EXPECT_FALSE(journal_keys::decode("short", &root, &lsn));
  EXPECT_FALSE(journal_keys::decode(k + "x", &root, &lsn));
}

TEST_F(rocksdb_store_test, scan_and_read_tree_are_in_key_order) {
  write({put(2, 256, "b256"), put(1, 7, "a7"), put(2, 255, "b255"),
         put(2, uint64_t{1} << 40, "bbig"), put(300, 1, "c1"), put(1, 3, "a3")});
  std::vector<rec> all{
    {1, 3, "a3"},  {1, 7, "a7"}, {2, 255, "b255"}, {2, 256, "b256"}, {2, uint64_t{1} << 40, "bbig"},
    {300, 1, "c1"}};
  EXPECT_EQ(scan_all(), all);
  EXPECT_EQ(tree(2),
            (std::vector<rec>{{2, 255, "b255"}, {2, 256, "b256"}, {2, uint64_t{1} << 40, "bbig"}}));
  EXPECT_EQ(tree(1), (std::vector<rec>{{1, 3, "a3"}, {1, 7, "a7"}}));
  EXPECT_TRUE(tree(3).empty());
}

TEST_F(rocksdb_store_test, scan_stops_when_told) {
  write({put(1, 1, "x"), put(1, 2, "y"), put(2, 1, "z")});
  int seen = 0;
  auto st = store_->scan([&](const stored_record&) { return ++seen < 2; });
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(seen, 2);
}

TEST_F(rocksdb_store_test, binary_values_round_trip) {
  std::string v("\0\xff\n\x01", 4);
  write({put(9, 1, v)});
  EXPECT_EQ(tree(9), (std::vector<rec>{{9, 1, v}}));
}

TEST_F(rocksdb_store_test, delete_range_of_a_prefix_keeps_the_rest) {
  write({put(4, 1, "n"), put(5, 1, "a"), put(5, 9, "b"), put(5, 10, "c"), put(5, 300, "d"),
         put(6, 0, "m")});
  write({del(5, 10)});
  EXPECT_EQ(scan_all(), (std::vector<rec>{{4, 1, "n"}, {5, 10, "c"}, {5, 300, "d"}, {6, 0, "m"}}));
}

TEST_F(rocksdb_store_test, delete_trees_removes_a_run_of_whole_trees_and_keeps_neighbours) {
  write({put(journal_keys::meta_root, 1, "meta"), put(3, UINT64_MAX, "before"), put(4, 0, "a"),
         put(4, UINT64_MAX, "b"), put(6, 7, "c"), put(7, UINT64_MAX, "d"), put(8, 0, "after")});
  store_op op;
  op.what = store_op::kind::delete_trees;
  op.root_id = 4;
  op.last_root_id = 7;
  write({op});
  EXPECT_EQ(scan_all(),
            (std::vector<rec>{
              {journal_keys::meta_root, 1, "meta"}, {3, UINT64_MAX, "before"}, {8, 0, "after"}}));
  op.root_id = 9;
  op.last_root_id = 8;  // inverted: nothing
  write({op});
  EXPECT_EQ(scan_all().size(), 3u);
}

TEST_F(rocksdb_store_test, delete_range_of_a_whole_tree_keeps_neighbours) {
  write({put(4, UINT64_MAX, "n"), put(5, 0, "a"), put(5, UINT64_MAX - 1, "b"),
         put(5, UINT64_MAX, "c"), put(6, 0, "m")});
  write({del(5, UINT64_MAX)});
  EXPECT_EQ(scan_all(), (std::vector<rec>{{4, UINT64_MAX, "n"}, {6, 0, "m"}}));
}

TEST_F(rocksdb_store_test, delete_range_from_an_lsn) {
  write({put(5, 1, "a"), put(5, 2, "b"), put(5, 3, "c"), put(5, 4, "d"), put(6, 1, "m")});
  write({del(5, 3, 2)});                // just LSN 2
  write({del(5, 3, 3), del(5, 2, 3)});  // empty and inverted ranges: no-ops
  EXPECT_EQ(tree(5), (std::vector<rec>{{5, 1, "a"}, {5, 3, "c"}, {5, 4, "d"}}));
  write({del(5, UINT64_MAX, 4)});  // LSN 4 to the end of the tree
  EXPECT_EQ(scan_all(), (std::vector<rec>{{5, 1, "a"}, {5, 3, "c"}, {6, 1, "m"}}));
}

TEST_F(rocksdb_store_test, ops_apply_in_order_within_one_write) {
  write({put(5, 1, "old"), put(5, 2, "old2")});
  // A summary replacing the tree's history: delete, then put, atomically.
  write({del(5, UINT64_MAX), put(5, 3, "summary"), put(5, 4, "x"), del(5, 4)});
  EXPECT_EQ(tree(5), (std::vector<rec>{{5, 4, "x"}}));
}

TEST_F(rocksdb_store_test, puts_out_of_key_order_around_deletes_apply_as_written) {
  // The store reorders each run of puts by key; the result must be that of the given order.
  store_op trees;
  trees.what = store_op::kind::delete_trees;
  trees.root_id = 4;
  trees.last_root_id = 6;
  write({put(9, 2, "k"), put(5, 7, "gone"), put(4, 1, "gone"), put(9, 1, "j"), put(7, 1, "first"),
         put(7, 1, "second"), trees, put(6, 3, "kept"), put(2, 1, "a"), put(5, 1, "kept2")});
  EXPECT_EQ(
    scan_all(),
    (std::vector<rec>{
      {2, 1, "a"}, {5, 1, "kept2"}, {6, 3, "kept"}, {7, 1, "second"}, {9, 1, "j"}, {9, 2, "k"}}));
}

TEST_F(rocksdb_store_test, last_root_is_addressable) {
  write({put(UINT64_MAX - 1, 5, "p"), put(UINT64_MAX, 0, "a"), put(UINT64_MAX, UINT64_MAX, "z")});
  EXPECT_EQ(tree(UINT64_MAX),
            (std::vector<rec>{{UINT64_MAX, 0, "a"}, {UINT64_MAX, UINT64_MAX, "z"}}));
  write({del(UINT64_MAX, UINT64_MAX)});
  EXPECT_TRUE(tree(UINT64_MAX).empty());
  EXPECT_EQ(tree(UINT64_MAX - 1), (std::vector<rec>{{UINT64_MAX - 1, 5, "p"}}));
}

TEST_F(rocksdb_store_test, survives_reopen) {
  write({put(1, 1, "a"), put(2, 2, "b")});
  store_.reset();
  store_ = open_store(dir_.path + "/db");
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(scan_all(), (std::vector<rec>{{1, 1, "a"}, {2, 2, "b"}}));
}

TEST_F(rocksdb_store_test, malformed_keys_are_reported_after_the_scan) {
  write({put(1, 1, "a"), put(2, 2, "b")});
  store_.reset();
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options opts;
    ASSERT_TRUE(rocksdb::DB::Open(opts, dir_.path + "/db", &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    rocksdb::WriteOptions wo;
    ASSERT_TRUE(db->Put(wo, "bad", "x").ok());
    ASSERT_TRUE(db->Put(wo, std::string(20, '\x01'), "y").ok());
    ASSERT_TRUE(db->Close().ok());
  }
  store_ = open_store(dir_.path + "/db");
  ASSERT_NE(store_, nullptr);
  std::vector<rec> seen;
  auto st = store_->scan([&](const stored_record& r) {
    seen.push_back({r.root_id, r.lsn, r.value});
    return true;
  });
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  EXPECT_NE(st.ToString().find('2'), std::string::npos) << st.ToString();
  EXPECT_EQ(seen, (std::vector<rec>{{1, 1, "a"}, {2, 2, "b"}}));
  // The 20-byte key starts with root 0x0101..01, inside that tree's key range.
  std::vector<stored_record> recs;
  st = store_->read_tree(0x0101010101010101ULL, &recs);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
}

TEST_F(rocksdb_store_test, second_open_of_a_directory_reports_the_lock) {
  auto dir = dir_.path + "/db";
  std::string err;
  auto second = open_rocksdb_store(dir, &err);
  EXPECT_EQ(second, nullptr);
  EXPECT_EQ(err, "data directory " + dir + " is in use by another proctord (lock held)");
  // Released with the first store.
  store_.reset();
  err.clear();
  second = open_rocksdb_store(dir, &err);
  EXPECT_NE(second, nullptr) << err;
}

TEST_F(rocksdb_store_test, directory_locked_by_another_process_reports_the_lock) {
  auto dir = dir_.path + "/db";
  store_.reset();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  // The child only makes raw system calls: safe after fork() in a threaded process.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = ::open((dir + "/LOCK").c_str(), O_RDWR);
    struct flock lk {};
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    char ok = (fd >= 0 && ::fcntl(fd, F_SETLK, &lk) == 0) ? '1' : '0';
    if (::write(ready[1], &ok, 1) != 1)
      ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  char ok = '0';
  EXPECT_EQ(::read(ready[0], &ok, 1), 1);
  EXPECT_EQ(ok, '1');
  std::string err;
  auto s = open_rocksdb_store(dir, &err);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(err, "data directory " + dir + " is in use by another proctord (lock held)");
}

TEST_F(rocksdb_store_test, creates_missing_parent_directories) {
  std::string err;
  auto s = open_rocksdb_store(dir_.path + "/a/b/c", &err);
  EXPECT_NE(s, nullptr) << err;
}

TEST_F(rocksdb_store_test, directory_below_a_file_is_not_writable) {
  auto file = dir_.path + "/plainfile";
  std::ofstream(file) << "x";
  auto dir = file + "/sub";
  std::string err;
  auto s = open_rocksdb_store(dir, &err);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(err.rfind("data directory " + dir + " is not writable: ", 0), 0u) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST_F(rocksdb_store_test, read_only_directory_is_not_writable) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "running as root: permission bits do not stop writes "
                    "(directory_below_a_file_is_not_writable covers the error)";
  auto ro = dir_.path + "/ro";
  fs::create_directory(ro);
  ASSERT_EQ(::chmod(ro.c_str(), 0500), 0);
  for (auto dir : {ro, ro + "/db"}) {
    std::string err;
    auto s = open_rocksdb_store(dir, &err);
    EXPECT_EQ(s, nullptr);
    EXPECT_EQ(err.rfind("data directory " + dir + " is not writable: ", 0), 0u) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace proctor
