#include "actors/base/incremental_map.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace proctor {
namespace {

TEST(incremental_map, behaves_like_a_map_under_random_operations) {
  incremental_map<uint64_t, int> m;
  std::map<uint64_t, int> ref;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200000; ++i) {
    uint64_t k = rng() % 5000;
    switch (rng() % 4) {
      case 0: {
        auto [it, fresh] = m.try_emplace(k, i);
        auto [rit, rfresh] = ref.try_emplace(k, i);
        ASSERT_EQ(fresh, rfresh);
        ASSERT_EQ(it->first, k);
        ASSERT_EQ(it->second, rit->second);
        break;
      }
      case 1:
        ASSERT_EQ(m.erase(k), ref.erase(k));
        break;
      case 2: {
        auto it = m.find(k);
        auto rit = ref.find(k);
        ASSERT_EQ(it == m.end(), rit == ref.end());
        if (rit != ref.end()) {
          ASSERT_EQ(it->second, rit->second);
          it->second += 1;
          rit->second += 1;
        }
        break;
      }
      default:
        m[k] = i;
        ref[k] = i;
    }
    ASSERT_EQ(m.size(), ref.size());
  }
  // Iteration visits every entry exactly once.
  std::map<uint64_t, int> seen;
  for (const auto& [k, v] : m)
    ASSERT_TRUE(seen.emplace(k, v).second);
  EXPECT_EQ(seen, ref);
}

TEST(incremental_map, erase_by_iterator_while_iterating) {
  incremental_map<uint64_t, int> m;
  for (uint64_t k = 0; k < 1000; ++k)
    m.try_emplace(k, static_cast<int>(k));
  for (auto it = m.begin(); it != m.end();) {
    if (it->first % 3 == 0)
      it = m.erase(it);
    else
      ++it;
  }
  EXPECT_EQ(m.size(), 666u);
  size_t n = 0;
  for (const auto& [k, v] : m) {
    EXPECT_NE(k % 3, 0u);
    EXPECT_EQ(static_cast<uint64_t>(v), k);
    ++n;
  }
  EXPECT_EQ(n, 666u);
}

TEST(incremental_map, empty_and_small_maps_iterate_correctly) {
  incremental_map<std::string, int> m;
  EXPECT_TRUE(m.empty());
  EXPECT_TRUE(m.begin() == m.end());
  m["only"] = 7;
  const auto& cm = m;
  auto it = cm.begin();
  ASSERT_TRUE(it != cm.end());
  EXPECT_EQ(it->first, "only");
  EXPECT_TRUE(++it == cm.end());
  EXPECT_TRUE(cm.contains("only"));
  EXPECT_EQ(cm.count("none"), 0u);
  m.clear();
  EXPECT_TRUE(m.empty());
  EXPECT_TRUE(m.find("only") == m.end());
}

TEST(incremental_map, growth_moves_entries_a_few_at_a_time) {
  incremental_map<uint64_t, std::string> m;
  for (uint64_t k = 1; k <= 100000; ++k) {
    m.try_emplace(k, std::to_string(k));
    // Every entry stays reachable while a growth is under way.
    if (k % 997 == 0) {
      for (uint64_t j = k - 50; j <= k; ++j) {
        auto it = m.find(j);
        ASSERT_TRUE(it != m.end()) << j;
        ASSERT_EQ(it->second, std::to_string(j));
      }
    }
  }
  EXPECT_EQ(m.size(), 100000u);
  size_t n = 0;
  for (const auto& [k, v] : m) {
    EXPECT_EQ(v, std::to_string(k));
    ++n;
  }
  EXPECT_EQ(n, 100000u);
  m.reserve(300000);  // finishes any growth under way
  EXPECT_EQ(m.size(), 100000u);
  EXPECT_TRUE(m.contains(1) && m.contains(100000));
}

}  // namespace
}  // namespace proctor
