#include "actors/node/replica_group.hpp"

#include <gtest/gtest.h>

#include <proctor/wire.pb.h>

#include "actors/node/replica_front.hpp"

namespace proctor {
namespace {

TEST(replica_group, parses_names_client_addresses_and_raft_ports) {
  std::vector<replica_member> g;
  std::string err;
  ASSERT_TRUE(parse_replica_group("b1=127.0.0.1:7001/7101, b2=10.0.0.2:7001/7101", &g, &err))
    << err;
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].name, "b1");
  EXPECT_EQ(g[0].client.host, "127.0.0.1");
  EXPECT_EQ(g[0].client.port, 7001);
  EXPECT_EQ(g[0].raft_address, "127.0.0.1:7101");
  EXPECT_EQ(g[1].raft_address, "10.0.0.2:7101");
  EXPECT_EQ(g[0].raft_id, replica_raft_id("b1"));
  EXPECT_NE(g[0].raft_id, g[1].raft_id);
  EXPECT_EQ(find_replica(g, "b2"), &g[1]);
  EXPECT_EQ(find_replica(g, g[1].raft_id), &g[1]);
  EXPECT_EQ(find_replica(g, "b3"), nullptr);
}

TEST(replica_group, refuses_what_cannot_work_saying_why) {
  auto why = [](const char* spec) {
    std::vector<replica_member> g;
    std::string err;
    EXPECT_FALSE(parse_replica_group(spec, &g, &err)) << spec;
    return err;
  };
  EXPECT_NE(why("b1=127.0.0.1:7001").find("NAME=HOST:PORT/RAFT_PORT"), std::string::npos);
  EXPECT_NE(why("b1=localhost:7001/7101").find("not an IPv4 address"), std::string::npos);
  EXPECT_NE(why("b1=127.0.0.1:7001/x").find("not a Raft port"), std::string::npos);
  EXPECT_NE(why("b1=127.0.0.1:7001/7101,b1=127.0.0.1:7002/7102").find("listed twice"),
            std::string::npos);
  EXPECT_NE(why("b1=127.0.0.1:7001/7101,b2=127.0.0.1:7002/7101").find("same address"),
            std::string::npos);
  EXPECT_NE(why("b1=127.0.0.1:7001/7001").find("its Raft port is its client port"),
            std::string::npos);
  EXPECT_NE(why("b1=127.0.0.1:7001/7101,b2=127.0.0.1:7101/7201").find("share a port"),
            std::string::npos);
  EXPECT_EQ(why(" , "), "no replica listed");
}

TEST(replica_front, a_refusal_keeps_the_requests_tag_and_names_the_leader) {
  pb::Request req;
  req.set_tag(42);
  req.mutable_list();
  pb::Response r;
  ASSERT_TRUE(r.ParseFromString(
    not_leader_response(req.SerializeAsString(), {"replica b2 is a follower", "127.0.0.1:7001"})));
  EXPECT_EQ(r.code(), pb::Response::NOT_LEADER);
  EXPECT_EQ(r.tag(), 42u);
  EXPECT_EQ(r.error(), "replica b2 is a follower");
  EXPECT_EQ(r.leader(), "127.0.0.1:7001");
  ASSERT_TRUE(r.ParseFromString(not_leader_response("\xff garbage", {"x", ""})));
  EXPECT_EQ(r.code(), pb::Response::NOT_LEADER);
  EXPECT_EQ(r.tag(), 0u);
}

TEST(replica_group, a_member_round_trips_through_its_spec) {
  std::vector<replica_member> g;
  std::string err;
  ASSERT_TRUE(parse_replica_group("b1=127.0.0.1:7001/9001, b2=127.0.0.2:7002/9002", &g, &err))
    << err;
  EXPECT_EQ(replica_group_spec(g), "b1=127.0.0.1:7001/9001,b2=127.0.0.2:7002/9002");
  replica_member back;
  ASSERT_TRUE(parse_replica(replica_spec(g[1]), &back, &err)) << err;
  EXPECT_EQ(back.name, "b2");
  EXPECT_EQ(back.raft_id, g[1].raft_id);
  EXPECT_EQ(client_address(back), "127.0.0.2:7002");
  EXPECT_EQ(back.raft_address, "127.0.0.2:9002");
  // Order does not matter; a different address or a missing member does.
  std::vector<replica_member> h{g[1], g[0]};
  EXPECT_TRUE(same_members(g, h));
  h[0].client.port = 7003;
  EXPECT_FALSE(same_members(g, h));
  EXPECT_FALSE(same_members(g, {g[0]}));
  // A name cannot hold what the configuration's label or --replicas use as separators.
  EXPECT_FALSE(parse_replica("b#1=127.0.0.1:7001/9001", &back, &err));
  EXPECT_FALSE(parse_replica("b1=127.0.0.1:7001/7001", &back, &err));
  EXPECT_NE(err.find("Raft port is its client port"), std::string::npos) << err;
}

}  // namespace
}  // namespace proctor
