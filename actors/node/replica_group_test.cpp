#include "actors/node/replica_group.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <proctor/wire.pb.h>

#include "actors/base/rpc.hpp"
#include "actors/node/node.hpp"
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
  ASSERT_TRUE(r.ParseFromString(not_leader_response(
    req.SerializeAsString(), {"replica b2 is a follower", "127.0.0.1:7001", "127.0.0.1:8001"})));
  EXPECT_EQ(r.code(), pb::Response::NOT_LEADER);
  EXPECT_EQ(r.tag(), 42u);
  EXPECT_EQ(r.error(), "replica b2 is a follower");
  EXPECT_EQ(r.leader(), "127.0.0.1:7001");
  EXPECT_EQ(r.leader_http(), "127.0.0.1:8001");
  ASSERT_TRUE(r.ParseFromString(not_leader_response("\xff garbage", {"x", "", ""})));
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

// A leading front adds the group to this node's `nodes` entry, to heartbeat answers and to
// `metrics`; until it leads it refuses them, but `metrics`, which it answers with the group's
// gauges alone (a follower is scraped too: issue 47.7).
TEST(replica_front, a_leaders_answers_carry_its_group) {
  caf::actor_system_config cfg;
  tune_actor_system(cfg);
  caf::actor_system sys{cfg};
  front_answers answers;
  answers.why_not = [] {
    return not_leader_answer{"replica b2 is a follower", "127.0.0.1:7001", "127.0.0.1:8001"};
  };
  answers.replicas = [] {
    pb::ReplicasInfo info;
    info.set_node("b");
    info.set_term(7);
    info.set_leader("b1");
    return info;
  };
  answers.metrics = [] { return std::string("proctor_raft_term 7\n"); };
  // What the node (its executor) answers, without the group.
  auto executor = sys.spawn([]() -> caf::behavior {
    return {[](rpc_atom, std::string& bytes) {
      pb::Request req;
      req.ParseFromString(bytes);
      pb::Response r;
      r.set_tag(req.tag());
      if (req.has_nodes()) {
        auto* me = r.add_nodes();
        me->set_name("b");
        me->set_self(true);
        r.add_nodes()->set_name("a");
      } else if (req.has_ping()) {
        r.mutable_pong()->set_name("b");
      } else {
        r.set_text("proctor_steps_total 3\n");
      }
      return r.SerializeAsString();
    }};
  });
  auto front = spawn_replica_front(sys, answers);
  caf::scoped_actor self{sys};
  auto ask = [&](const pb::Request& req) {
    pb::Response r;
    self->request(front, std::chrono::seconds{10}, rpc_atom::value, req.SerializeAsString())
      .receive([&](std::string& bytes) { EXPECT_TRUE(r.ParseFromString(bytes)); },
               [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
    return r;
  };
  pb::Request nodes, ping, metrics;
  nodes.set_tag(1);
  nodes.mutable_nodes();
  ping.mutable_ping()->set_from("a");
  metrics.mutable_metrics();
  EXPECT_EQ(ask(nodes).code(), pb::Response::NOT_LEADER);
  EXPECT_EQ(ask(ping).code(), pb::Response::NOT_LEADER);
  auto follower_metrics = ask(metrics);
  EXPECT_EQ(follower_metrics.code(), pb::Response::OK);
  EXPECT_EQ(follower_metrics.text(), "proctor_raft_term 7\n");
  self->send(front, front_lead_atom::value, executor);
  auto n = ask(nodes);
  ASSERT_EQ(n.code(), pb::Response::OK);
  EXPECT_EQ(n.tag(), 1u);
  ASSERT_EQ(n.nodes_size(), 2);
  EXPECT_EQ(n.nodes(0).group().term(), 7u);
  EXPECT_EQ(n.nodes(0).group().leader(), "b1");
  EXPECT_FALSE(n.nodes(1).has_group());  // a peer's entry is as the node said
  EXPECT_EQ(ask(ping).pong().group().term(), 7u);
  EXPECT_EQ(ask(metrics).text(), "proctor_steps_total 3\nproctor_raft_term 7\n");
  caf::anon_send_exit(front, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(executor, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace proctor
