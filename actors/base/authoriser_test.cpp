// The authoriser's table, as Temporal's default_authorizer_test: every request kind (and
// operation) against every role, from a table written here, not derived from the code; and a
// check that fails when wire.proto's Request gains a kind this table has no row for.
#include "actors/base/authoriser.hpp"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/cluster.pb.h>

namespace proctor {
namespace {

struct row {
  std::string label;
  std::function<void(pb::Request&)> make;
  role needs;
};

std::vector<row> table() {
  using pb::Request;
  return {
    {"submit", [](Request& r) { r.mutable_submit()->set_type("t"); }, role::submitter},
    {"status", [](Request& r) { r.mutable_status()->set_id(1); }, role::reader},
    {"list", [](Request& r) { r.mutable_list(); }, role::reader},
    {"wait", [](Request& r) { r.mutable_wait()->set_id(1); }, role::reader},
    {"abort", [](Request& r) { r.mutable_abort()->set_id(1); }, role::operator_},
    {"event", [](Request& r) { r.mutable_event()->set_key("k"); }, role::submitter},
    {"release", [](Request& r) { r.mutable_release()->set_id(1); }, role::operator_},
    {"metrics", [](Request& r) { r.mutable_metrics(); }, role::reader},
    {"quarantine", [](Request& r) { r.mutable_quarantine(); }, role::reader},
    {"call", [](Request& r) { r.mutable_call()->set_service("s"); }, role::submitter},
    {"peer", [](Request& r) { r.mutable_peer(); }, role::node},
    {"ping", [](Request& r) { r.mutable_ping(); }, role::reader},
    {"nodes", [](Request& r) { r.mutable_nodes(); }, role::reader},
    {"tree", [](Request& r) { r.mutable_tree()->set_id(1); }, role::reader},
    {"history", [](Request& r) { r.mutable_history()->set_id(1); }, role::reader},
    {"locks", [](Request& r) { r.mutable_locks(); }, role::reader},
    {"bypass", [](Request& r) { r.mutable_bypass()->set_id(1); }, role::operator_},
    {"audit", [](Request& r) { r.mutable_audit(); }, role::operator_},
    {"tls reload", [](Request& r) { r.mutable_tls_reload(); }, role::admin},
    {"replicas", [](Request& r) { r.mutable_replicas(); }, role::reader},
    {"replicas add", [](Request& r) { r.mutable_replicas()->set_add("r=h:1/2"); }, role::admin},
    {"replicas remove", [](Request& r) { r.mutable_replicas()->set_remove("r"); }, role::admin},
    {"limits", [](Request& r) { r.mutable_limits(); }, role::reader},
    {"limits of a type", [](Request& r) { r.mutable_limits()->set_type("t"); }, role::reader},
    {"limits set",
     [](Request& r) {
       r.mutable_limits()->set_type("t");
       r.mutable_limits()->set_max_running(3);
     },
     role::operator_},
    {"limits rate",
     [](Request& r) {
       r.mutable_limits()->set_type("t");
       r.mutable_limits()->set_rate(0);
     },
     role::operator_},
    {"limits clear",
     [](Request& r) {
       r.mutable_limits()->set_type("t");
       r.mutable_limits()->set_clear(true);
     },
     role::operator_},
    {"forget", [](Request& r) { r.mutable_forget()->set_name("b"); }, role::admin},
    {"retry", [](Request& r) { r.mutable_retry()->set_id(1); }, role::operator_},
    {"resubmit", [](Request& r) { r.mutable_resubmit()->set_id(1); }, role::operator_},
    {"schedule list", [](Request& r) { r.mutable_schedule(); }, role::reader},
    {"schedule show", [](Request& r) { r.mutable_schedule()->set_op(pb::ScheduleRequest::SHOW); },
     role::reader},
    {"schedule add", [](Request& r) { r.mutable_schedule()->set_op(pb::ScheduleRequest::ADD); },
     role::operator_},
    {"schedule pause", [](Request& r) { r.mutable_schedule()->set_op(pb::ScheduleRequest::PAUSE); },
     role::operator_},
    {"schedule resume",
     [](Request& r) { r.mutable_schedule()->set_op(pb::ScheduleRequest::RESUME); },
     role::operator_},
    {"schedule delete",
     [](Request& r) { r.mutable_schedule()->set_op(pb::ScheduleRequest::DELETE); },
     role::operator_},
    {"schedule trigger",
     [](Request& r) { r.mutable_schedule()->set_op(pb::ScheduleRequest::TRIGGER); },
     role::operator_},
    {"backup", [](Request& r) { r.mutable_backup()->set_dir("/tmp/b"); }, role::admin},
    {"cluster", [](Request& r) { r.mutable_cluster(); }, role::reader},
    {"cluster init", [](Request& r) { r.mutable_cluster()->set_op(pb::ClusterRequest::INIT); },
     role::admin},
    {"cluster drain",
     [](Request& r) {
       r.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
       r.mutable_cluster()->mutable_command()->mutable_drain()->set_name("b");
     },
     role::admin},
    {"cluster activate",
     [](Request& r) {
       r.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
       r.mutable_cluster()->mutable_command()->mutable_activate()->set_name("b");
     },
     role::admin},
    {"cluster remove",
     [](Request& r) {
       r.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
       r.mutable_cluster()->mutable_command()->mutable_remove()->set_name("b");
     },
     role::admin},
    {"cluster forget",
     [](Request& r) {
       r.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
       r.mutable_cluster()->mutable_command()->mutable_forget();
     },
     role::admin},
    {"cluster set_limit",
     [](Request& r) {
       r.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
       r.mutable_cluster()->mutable_command()->mutable_set_limit();
     },
     role::operator_},
    {"cluster set_schedule",
     [](Request& r) {
       r.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
       r.mutable_cluster()->mutable_command()->mutable_set_schedule();
     },
     role::operator_},
    {"cluster found",
     [](Request& r) {
       r.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
       r.mutable_cluster()->mutable_command()->mutable_found();
     },
     role::node},
    {"cluster schedule_progress",
     [](Request& r) {
       r.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
       r.mutable_cluster()->mutable_command()->mutable_schedule_progress();
     },
     role::node},
    {"nonces", [](Request& r) { r.mutable_nonces(); }, role::node},
    {"task poll", [](Request& r) { r.mutable_task()->set_op(pb::TaskRequest::POLL); },
     role::submitter},
    {"task heartbeat", [](Request& r) { r.mutable_task()->set_op(pb::TaskRequest::HEARTBEAT); },
     role::submitter},
    {"task complete", [](Request& r) { r.mutable_task()->set_op(pb::TaskRequest::COMPLETE); },
     role::submitter},
    {"task fail", [](Request& r) { r.mutable_task()->set_op(pb::TaskRequest::FAIL); },
     role::submitter},
    {"task queues", [](Request& r) { r.mutable_task()->set_op(pb::TaskRequest::QUEUES); },
     role::reader},
  };
}

caller with_role(role r) {
  caller c = caller::with_certificate({cert_identity::kind::client, "svc", {}});
  c.granted = r;
  return c;
}

TEST(authoriser, every_request_kind_has_a_row) {
  std::set<int> covered;
  for (const auto& r : table()) {
    pb::Request req;
    r.make(req);
    covered.insert(static_cast<int>(req.body_case()));
  }
  const auto* body = pb::Request::descriptor()->FindOneofByName("body");
  ASSERT_NE(body, nullptr);
  for (int i = 0; i < body->field_count(); ++i)
    EXPECT_TRUE(covered.count(body->field(i)->number()) == 1)
      << "wire.proto's Request." << body->field(i)->name()
      << " has no row in this table: give it one, and a role in required_role";
}

TEST(authoriser, every_request_against_every_role) {
  const role roles[] = {role::none,      role::reader, role::submitter,
                        role::operator_, role::admin,  role::node};
  for (const auto& r : table()) {
    pb::Request req;
    r.make(req);
    EXPECT_EQ(required_role(req), r.needs) << r.label;
    for (auto have : roles) {
      auto why = authorise(with_role(have), req);
      if (have >= r.needs) {
        EXPECT_EQ(why, "") << r.label << " as " << role_name(have);
      } else {
        EXPECT_NE(why.find(std::string{"needs the "} + role_name(r.needs) + " role"),
                  std::string::npos)
          << r.label << " as " << role_name(have) << ": " << why;
        EXPECT_NE(why.find(std::string{"has "} + role_name(have)), std::string::npos) << why;
      }
    }
  }
}

TEST(authoriser, without_tls_anyone_may_do_everything) {
  for (const auto& r : table()) {
    pb::Request req;
    r.make(req);
    EXPECT_EQ(authorise(caller::anyone(), req), "") << r.label;
  }
}

TEST(authoriser, a_client_certificate_may_never_act_as_a_node) {
  auto client = caller::with_certificate({cert_identity::kind::client, "ops", {}});
  auto anonymous = caller::with_certificate({});
  pb::Request deliver;
  deliver.mutable_peer()->set_from("b");
  for (const auto& c : {client, anonymous}) {
    EXPECT_EQ(c.granted, role::admin);  // without a policy: today's clients
    EXPECT_NE(authorise(c, deliver).find("peer needs the node role"), std::string::npos)
      << authorise(c, deliver);
  }
  pb::Request ping;
  ping.mutable_ping()->set_from("b");  // a heartbeat claiming to be node b's
  EXPECT_NE(authorise(client, ping).find("says it comes from node b"), std::string::npos);
  ping.mutable_ping()->clear_from();  // the CLI's own ping
  EXPECT_EQ(authorise(client, ping), "");
}

TEST(authoriser, a_node_may_only_speak_for_itself) {
  auto b = caller::with_certificate({cert_identity::kind::node, "b", {}});
  auto b2 = caller::with_certificate({cert_identity::kind::node, "b", "b2"});  // a replica of b
  auto c = caller::with_certificate({cert_identity::kind::node, "c", {}});
  pb::Request deliver;
  deliver.mutable_peer()->set_from("b");
  EXPECT_EQ(authorise(b, deliver), "");
  EXPECT_EQ(authorise(b2, deliver), "");
  EXPECT_EQ(authorise(c, deliver),
            "peer says it comes from node b but the certificate is node c's");
  pb::Request handoff;
  handoff.mutable_nonces()->set_node("b");
  EXPECT_EQ(authorise(b, handoff), "");
  EXPECT_NE(authorise(c, handoff), "");
  pb::Request join;
  join.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  join.mutable_cluster()->mutable_command()->mutable_join()->mutable_member()->set_name("b");
  EXPECT_EQ(authorise(b, join), "");
  EXPECT_NE(authorise(c, join), "");
  pb::Request floor;
  floor.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  floor.mutable_cluster()->mutable_command()->mutable_raise_floor()->set_name("b");
  EXPECT_EQ(authorise(b, floor), "");
  EXPECT_NE(authorise(c, floor), "");
  pb::Request abort;  // a client's request a node forwards
  abort.mutable_abort()->set_id(7);
  EXPECT_EQ(authorise(c, abort), "");
}

TEST(authoriser, an_empty_request_goes_on_to_be_refused_as_malformed) {
  EXPECT_EQ(authorise(with_role(role::none), pb::Request{}), "");
}

}  // namespace
}  // namespace proctor
