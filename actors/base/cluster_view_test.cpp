#include "actors/base/cluster_view.hpp"

#include <gtest/gtest.h>

namespace proctor {
namespace {

peer_status heard(const std::string& name, std::vector<std::string> members) {
  peer_status s;
  s.name = name;
  s.up = true;
  s.heard = true;
  s.members = std::move(members);
  return s;
}

TEST(cluster_view, a_member_that_left_holds_up_no_keyed_submit) {
  // d left the cluster group and still runs: it hears the group no more and still places on
  // {a, b, c}; a and b place on {a, b}. Asked, it held up every keyed submit until stopped.
  cluster_view v;
  v.set(heard("b", {"a", "b"}));
  v.set(heard("d", {"a", "b", "c"}));
  auto other = v.first_disagreeing({"a", "b"});
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->first, "d");
  v.set_gone({"d"});
  EXPECT_FALSE(v.first_disagreeing({"a", "b"}).has_value());
  // A member that is not gone and disagrees still holds them up.
  v.set(heard("c", {"a", "b", "c"}));
  other = v.first_disagreeing({"a", "b"});
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->first, "c");
}

}  // namespace
}  // namespace proctor
