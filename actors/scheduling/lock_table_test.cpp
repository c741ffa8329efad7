#include "actors/scheduling/lock_table.hpp"

#include <gtest/gtest.h>

namespace proctor {
namespace {

lock_set x(std::string n) {
  return {resource_lock::exclusive_on(std::move(n))};
}
lock_set s(std::string n) {
  return {resource_lock::shared(std::move(n))};
}

TEST(lock_table_test, exclusive_excludes_everything_on_the_same_name) {
  lock_table t;
  std::string why;
  EXPECT_TRUE(t.try_acquire(1, {}, x("a")));
  EXPECT_FALSE(t.try_acquire(2, {}, x("a"), &why));
  EXPECT_EQ(why, "a");
  EXPECT_FALSE(t.try_acquire(2, {}, s("a")));
  t.release(1);
  EXPECT_TRUE(t.try_acquire(2, {}, s("a")));
  EXPECT_TRUE(t.try_acquire(3, {}, s("a")));
  EXPECT_FALSE(t.try_acquire(4, {}, x("a")));
}

TEST(lock_table_test, hierarchy_exclusive_parent_excludes_children_and_back) {
  lock_table t;
  std::string why;
  EXPECT_TRUE(t.try_acquire(1, {}, x("ns")));
  EXPECT_FALSE(t.try_acquire(2, {}, x("ns/t1"), &why));
  EXPECT_EQ(why, "ns");
  EXPECT_FALSE(t.try_acquire(2, {}, s("ns/t1/r1")));
  EXPECT_TRUE(t.try_acquire(2, {}, x("other/t1")));
  t.release(1);
  EXPECT_TRUE(t.try_acquire(3, {}, x("ns/t1")));
  EXPECT_TRUE(t.try_acquire(4, {}, x("ns/t2")));      // siblings do not conflict
  EXPECT_TRUE(t.try_acquire(5, {}, s("ns")));         // shared parent + exclusive child: fine
  EXPECT_FALSE(t.try_acquire(6, {}, x("ns"), &why));  // children held below
  EXPECT_EQ(why, "ns");
  t.release(3);
  t.release(4);
  t.release(5);
  EXPECT_TRUE(t.try_acquire(6, {}, x("ns")));
}

TEST(lock_table_test, acquisition_is_all_or_nothing) {
  lock_table t;
  EXPECT_TRUE(t.try_acquire(1, {}, x("b")));
  lock_set both{resource_lock::exclusive_on("a"), resource_lock::exclusive_on("b")};
  EXPECT_FALSE(t.try_acquire(2, {}, both));
  EXPECT_FALSE(t.holds(2));
  EXPECT_TRUE(t.try_acquire(3, {}, x("a")));  // "a" was not taken by the failed attempt
}

TEST(lock_table_test, descendants_use_their_ancestors_locks) {
  lock_table t;
  EXPECT_TRUE(t.try_acquire(1, {}, x("ns")));
  EXPECT_TRUE(t.try_acquire(2, {1}, x("ns/t")));     // child of 1
  EXPECT_TRUE(t.try_acquire(3, {2, 1}, x("ns/t")));  // grandchild
  EXPECT_FALSE(t.try_acquire(4, {}, s("ns/t")));     // a stranger
  t.release(1);
  EXPECT_FALSE(t.try_acquire(4, {}, s("ns/t")));  // 2 and 3 still hold ns/t
  t.release(2);
  t.release(3);
  EXPECT_TRUE(t.try_acquire(4, {}, s("ns/t")));
  EXPECT_EQ(t.held(), 1u);
}

TEST(lock_table_test, forced_locks_block_others) {
  lock_table t;
  t.force_acquire(7, x("ns/t"));
  EXPECT_TRUE(t.holds(7));
  EXPECT_FALSE(t.try_acquire(8, {}, x("ns")));
  t.release(7);
  EXPECT_FALSE(t.holds(7));
  EXPECT_TRUE(t.try_acquire(8, {}, x("ns")));
}

}  // namespace
}  // namespace proctor
