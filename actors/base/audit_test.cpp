#include "actors/base/audit.hpp"

#include <gtest/gtest.h>

namespace proctor {
namespace {

caller client(const std::string& name, role r) {
  cert_identity id;
  id.what = cert_identity::kind::client;
  id.name = name;
  auto c = caller::with_certificate(id);
  c.granted = r;
  return c;
}

caller node_b() {
  cert_identity id;
  id.what = cert_identity::kind::node;
  id.name = "b";
  return caller::with_certificate(id);
}

TEST(audit, the_operators_and_admins_acts_and_events_are_audited_reads_and_node_acts_are_not) {
  pb::Request r;
  r.mutable_abort()->set_id(7);
  EXPECT_TRUE(audited(r, false));
  r.mutable_forget()->set_name("c");
  EXPECT_TRUE(audited(r, false));
  r.mutable_event()->set_key("k");
  EXPECT_TRUE(audited(r, false));
  r.mutable_limits()->set_type("t");
  EXPECT_FALSE(audited(r, false)) << "reading a type's limits is a read";
  r.mutable_limits()->set_max_running(2);
  EXPECT_TRUE(audited(r, false));
  r.mutable_status()->set_id(7);
  EXPECT_FALSE(audited(r, false));
  r.mutable_peer();
  EXPECT_FALSE(audited(r, false));
  r.mutable_task()->set_op(pb::TaskRequest::COMPLETE);
  EXPECT_FALSE(audited(r, false));
  r.mutable_submit()->set_type("t");
  EXPECT_FALSE(audited(r, false));
  EXPECT_TRUE(audited(r, true));
  r.mutable_audit();
  EXPECT_FALSE(audited(r, true)) << "reading the audit trail is a read";
}

TEST(audit, the_door_says_who_asked_whatever_the_client_wrote) {
  pb::Request r;
  r.mutable_abort()->set_id(7);
  r.mutable_actor()->set_who("client root");  // written by the client: not believed
  EXPECT_TRUE(set_actor(r, client("ops", role::operator_), "127.0.0.1:5000", false, false));
  EXPECT_EQ(r.actor().who(), "client ops");
  EXPECT_EQ(r.actor().address(), "127.0.0.1:5000");

  // Forwarded by node b for its client: what b's door said stays.
  EXPECT_FALSE(set_actor(r, node_b(), "127.0.0.1:6000", false, true));
  EXPECT_EQ(r.actor().who(), "client ops");
  // Not forwarded (an untagged request on b's certificate): b itself asked.
  EXPECT_TRUE(set_actor(r, node_b(), "127.0.0.1:6000", false, false));
  EXPECT_EQ(r.actor().who(), "node b");

  // A request not audited keeps no actor a client put in it.
  pb::Request s;
  s.mutable_status()->set_id(7);
  EXPECT_FALSE(set_actor(s, client("ops", role::reader), "a", false, false));
  s.mutable_actor()->set_who("client root");
  EXPECT_TRUE(set_actor(s, client("ops", role::reader), "a", false, false));
  EXPECT_FALSE(s.has_actor());
}

TEST(audit, a_record_names_the_act_its_procedure_and_its_arguments_without_payloads) {
  pb::Request r;
  r.mutable_abort()->set_id(42);
  r.mutable_actor()->set_who("token ci");
  r.mutable_actor()->set_address("http 10.0.0.7");
  auto e = audit_entry_of(r, 1234);
  EXPECT_EQ(e.at_ms(), 1234);
  EXPECT_EQ(e.act(), "abort");
  EXPECT_EQ(e.proc_id(), 42u);
  EXPECT_EQ(e.who(), "token ci");
  EXPECT_EQ(e.address(), "http 10.0.0.7");
  EXPECT_EQ(e.detail(), "");
  EXPECT_TRUE(e.outcome().empty());

  pb::Request forget;
  forget.mutable_forget()->set_name("c\nd");
  forget.mutable_forget()->set_confirm(true);
  auto g = audit_entry_of(forget, 1);
  EXPECT_EQ(g.act(), "forget");
  EXPECT_EQ(g.proc_id(), 0u);
  EXPECT_NE(g.detail().find("confirm: true"), std::string::npos) << g.detail();
  EXPECT_EQ(g.detail().find('\n'), std::string::npos) << g.detail();

  pb::Request ev;
  ev.mutable_event()->set_key("disk-ready");
  ev.mutable_event()->set_payload_json(std::string(5000, 'x'));
  auto f = audit_entry_of(ev, 1);
  EXPECT_EQ(f.act(), "event");
  EXPECT_NE(f.detail().find("disk-ready"), std::string::npos) << f.detail();
  EXPECT_NE(f.detail().find("payload_json: 5000 bytes"), std::string::npos) << f.detail();
  EXPECT_EQ(f.detail().find("xxx"), std::string::npos) << f.detail();
  EXPECT_EQ(f.who(), "unknown (no door said who)");

  pb::Request t;
  t.mutable_task()->set_op(pb::TaskRequest::QUEUES);
  EXPECT_EQ(audit_entry_of(t, 1).act(), "task queues") << "an op names the act";
}

TEST(audit, an_outcome_is_ok_or_the_code_and_error_in_one_line) {
  pb::Response r;
  EXPECT_EQ(audit_outcome(r), "ok");
  r.set_code(pb::Response::NOT_FOUND);
  r.set_error("no procedure\n7");
  EXPECT_EQ(audit_outcome(r), "NOT_FOUND: no procedure\\x0a7");
}

}  // namespace
}  // namespace proctor
