#include "actors/cluster/peer_transport.hpp"

#include <gtest/gtest.h>

namespace proctor {
namespace {

TEST(parse_peers, one_address_or_a_list_of_an_active_and_its_standbys) {
  std::map<std::string, peer_address> peers;
  std::string err;
  ASSERT_TRUE(
    parse_peers("b=127.0.0.1:7002|10.0.0.3:7002, c=[::1]:7003\n# comment\n", "a", &peers, &err))
    << err;
  ASSERT_EQ(peers.size(), 2u);
  ASSERT_EQ(peers["b"].endpoints.size(), 2u);
  EXPECT_EQ(peers["b"].endpoints[1].host, "10.0.0.3");
  EXPECT_EQ(peers["b"].endpoints[1].port, 7002);
  EXPECT_EQ(peers["b"].text(), "127.0.0.1:7002|10.0.0.3:7002");
  ASSERT_EQ(peers["c"].endpoints.size(), 1u);
  EXPECT_EQ(peers["c"].endpoints[0].host, "::1");
}

TEST(parse_peers, a_comment_ends_at_its_line_commas_and_all) {
  // What proctord writes beside the cluster group's member (DIR/cluster-group/peers): a
  // comma inside a comment was read as a list's separator and the rest as a peer.
  std::map<std::string, peer_address> peers;
  std::string err;
  ASSERT_TRUE(parse_peers("# written by proctord;\n# read at its next start, before the group "
                          "speaks).\nb=127.0.0.1:7002  # the second, c follows\nc=h:7003\n",
                          "a", &peers, &err))
    << err;
  ASSERT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers["b"].text(), "127.0.0.1:7002");
  EXPECT_EQ(peers["c"].text(), "h:7003");
}

TEST(parse_peers, refuses_what_is_not_a_list_of_addresses) {
  for (const char* bad :
       {"b=127.0.0.1:7002|", "b=127.0.0.1:7002|host", "b=|h:1", "b=h:0", "=h:1", "b", "a=h:1"}) {
    std::map<std::string, peer_address> peers;
    std::string err;
    EXPECT_FALSE(parse_peers(bad, "a", &peers, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
  std::map<std::string, peer_address> peers;
  std::string err;
  EXPECT_FALSE(parse_peers("b=h:1,b=h:2", "a", &peers, &err));
  EXPECT_NE(err.find("named twice"), std::string::npos) << err;
}

}  // namespace
}  // namespace proctor
