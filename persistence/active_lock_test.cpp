#include "persistence/active_lock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace proctor {
namespace {

namespace fs = std::filesystem;

class active_lock_test : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path()
           / ("proctor-active-lock-" + std::to_string(::getpid()) + "-"
              + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Writes `epoch` into the lock file behind the holder's back.
  void overwrite_epoch(uint64_t epoch) {
    int fd = ::open((dir_ / "ACTIVE.lock").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    unsigned char b[8];
    for (int i = 0; i < 8; ++i)
      b[i] = static_cast<unsigned char>(epoch >> (8 * i));
    ASSERT_EQ(::pwrite(fd, b, 8, 0), 8);
    ::close(fd);
  }

  fs::path dir_;
};

/// A store that counts writes.
class counting_store : public journal_store {
public:
  rocksdb::Status write(const std::vector<store_op>&) override {
    ++writes;
    return rocksdb::Status::OK();
  }
  rocksdb::Status scan(const std::function<bool(const stored_record&)>&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status read_tree(uint64_t, std::vector<stored_record>*) override {
    return rocksdb::Status::OK();
  }
  int writes = 0;
};

TEST_F(active_lock_test, one_holder_at_a_time_and_each_holder_raises_the_epoch) {
  std::string err;
  bool held = true;
  auto first = active_lock::try_take(dir_.string(), &err, &held);
  ASSERT_TRUE(first) << err;
  EXPECT_FALSE(held);
  EXPECT_EQ(first->epoch(), 1u);
  // flock belongs to an open file: a second open in this process is another holder.
  auto second = active_lock::try_take(dir_.string(), &err, &held);
  EXPECT_FALSE(second);
  EXPECT_TRUE(held);
  EXPECT_NE(err.find("in use by another proctord (lock held)"), std::string::npos) << err;
  first.reset();
  auto third = active_lock::try_take(dir_.string(), &err, &held);
  ASSERT_TRUE(third) << err;
  EXPECT_EQ(third->epoch(), 2u);
  std::string why;
  EXPECT_TRUE(third->still_ours(&why)) << why;
}

TEST_F(active_lock_test, a_holder_whose_epoch_was_taken_is_fenced_and_its_store_refuses_writes) {
  std::string err;
  std::shared_ptr<active_lock> lock = active_lock::try_take(dir_.string(), &err);
  ASSERT_TRUE(lock) << err;
  auto inner = std::make_shared<counting_store>();
  auto store = fenced_store(inner, lock);
  EXPECT_TRUE(store->write({}).ok());
  EXPECT_EQ(inner->writes, 1);
  overwrite_epoch(lock->epoch() + 1);
  std::string why;
  EXPECT_FALSE(lock->still_ours(&why));
  EXPECT_NE(why.find("another process took over"), std::string::npos) << why;
  auto st = store->write({});
  EXPECT_TRUE(st.IsAborted()) << st.ToString();
  EXPECT_NE(st.ToString().find("fenced off"), std::string::npos);
  EXPECT_EQ(inner->writes, 1);
}

TEST_F(active_lock_test, the_holder_is_published_for_standbys_and_operators) {
  std::string err;
  auto lock = active_lock::try_take(dir_.string(), &err);
  ASSERT_TRUE(lock) << err;
  EXPECT_FALSE(read_active_info(dir_.string()));
  active_info info;
  info.listen = "127.0.0.1:7001";
  info.takeover_ms = 42;
  ASSERT_TRUE(lock->publish(info, &err)) << err;
  auto got = read_active_info(dir_.string());
  ASSERT_TRUE(got);
  EXPECT_EQ(got->epoch, lock->epoch());
  EXPECT_EQ(got->pid, ::getpid());
  EXPECT_EQ(got->host, host_name());
  EXPECT_EQ(got->listen, "127.0.0.1:7001");
  EXPECT_EQ(got->takeover_ms, 42);
  EXPECT_GT(got->since_ms, 0);
}

TEST_F(active_lock_test, an_unusable_directory_is_an_error_not_a_held_lock) {
  std::string err;
  bool held = true;
  fs::create_directories(dir_);
  { std::ofstream(dir_ / "file") << "x"; }
  auto lock = active_lock::try_take((dir_ / "file" / "sub").string(), &err, &held);
  EXPECT_FALSE(lock);
  EXPECT_FALSE(held);
  EXPECT_NE(err.find("not writable"), std::string::npos) << err;
}

}  // namespace
}  // namespace proctor
