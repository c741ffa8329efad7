#include "actors/base/auth_policy.hpp"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace proctor {
namespace {

// printf %s s3cret | sha256sum
constexpr const char* s3cret_sha256 =
  "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0";

std::optional<auth_policy> parse(const std::string& text, std::string* why) {
  return parse_auth_policy(text, "policy.toml", why);
}

TEST(auth_policy, reads_clients_nodes_tokens_and_the_unnamed) {
  std::string why;
  auto p = parse(R"(
unnamed = "reader"
[clients]
ops = "admin"
billing-svc = "submitter"
[nodes]
a = "operator"
"*" = "none"
[tokens.ci]
sha256 = ")" + std::string{s3cret_sha256}
                   + R"("
role = "operator"
)",
                 &why);
  ASSERT_TRUE(p) << why;
  using kind = cert_identity::kind;
  EXPECT_EQ(p->role_of({kind::client, "ops", {}}), role::admin);
  EXPECT_EQ(p->role_of({kind::client, "billing-svc", {}}), role::submitter);
  EXPECT_EQ(p->role_of({kind::client, "stranger", {}}), role::reader);
  EXPECT_EQ(p->role_of({}), role::reader);
  EXPECT_EQ(p->role_of({kind::node, "a", {}}), role::operator_);
  EXPECT_EQ(p->role_of({kind::node, "b", {}}), role::none);
  ASSERT_EQ(p->tokens.size(), 1u);
  const auto* t = p->token_of("s3cret");
  ASSERT_NE(t, nullptr) << "the SHA-256 above is of 's3cret'";
  EXPECT_EQ(t->name, "ci");
  EXPECT_EQ(t->granted, role::operator_);
  EXPECT_EQ(p->token_of("s3cre"), nullptr);
  EXPECT_EQ(p->token_of(""), nullptr);
}

TEST(auth_policy, an_empty_policy_gives_nobody_anything_but_nodes_reads) {
  std::string why;
  auto p = parse("", &why);
  ASSERT_TRUE(p) << why;
  EXPECT_EQ(p->role_of({cert_identity::kind::client, "ops", {}}), role::none);
  EXPECT_EQ(p->role_of({cert_identity::kind::node, "a", {}}), role::reader);
}

TEST(auth_policy, names_the_line_and_what_is_wrong) {
  struct bad_case {
    std::string text, want;
  };
  const bad_case cases[] = {
    {"[clients]\nops = \"root\"\n",
     "policy.toml:2: [clients] ops: 'root' is not a role (reader, submitter, operator, admin)"},
    {"[clients]\nops = 3\n", "policy.toml:2: [clients] ops: a role is a string"},
    {"[clients]\n\"a b\" = \"reader\"\n", "policy.toml:2: [clients] 'a b' is not a name"},
    {"[clients]\n\"*\" = \"reader\"\n", "policy.toml:2: [clients] '*' is not a name"},
    {"admins = [\"x\"]\n", "policy.toml:1: unknown key 'admins'"},
    {"clients = \"x\"\n", "policy.toml:1: clients must be a table"},
    {"[tokens.ci]\nrole = \"admin\"\n", "policy.toml:1: [tokens.ci]: sha256 must be"},
    {"[tokens.ci]\nsha256 = \"abc\"\nrole = \"admin\"\n", "[tokens.ci]: sha256 must be"},
    {"[tokens.ci]\nsha256 = \"" + std::string{s3cret_sha256} + "\"\n",
     "[tokens.ci]: role is missing"},
    {"[tokens.ci]\nsha256 = \"" + std::string{s3cret_sha256}
       + "\"\nrole = \"admin\"\ntoken = \"x\"\n",
     "[tokens.ci]: unknown field 'token'"},
    {"[tokens.ci]\nsha256 = \"" + std::string{s3cret_sha256}
       + "\"\nrole = \"admin\"\n[tokens.cd]\nsha256 = \"" + std::string{s3cret_sha256}
       + "\"\nrole = \"reader\"\n",
     "the same token as [tokens.cd]"},  // (tables are read in key order)
    {"[clients\n", "policy.toml:1: "},
    {"unnamed = \"god\"\n", "policy.toml:1: unnamed: 'god' is not a role"},
    {"[clients]\nops = \"admin\"\n[\x01x]\n",
     "policy.toml:3: byte \\x01: a policy file is printable ASCII"},
    {"[clients]\n\"a\\nb\" = \"reader\"\n", "policy.toml:2: [clients] 'a\\x0ab' is not a name"},
    {"[clients]\nops = { role = \"admin\", types = [\"b.\"] }\n",
     "policy.toml:2: [clients] ops: types limit the submitter and operator roles, not admin"},
    {"[clients]\nops = { role = \"operator\", types = [] }\n",
     "[clients] ops: types is a list of type prefixes"},
    {"[clients]\nops = { role = \"operator\", types = [\"\"] }\n",
     "[clients] ops: a type prefix is a string of 1-128 characters"},
    {"[clients]\nops = { role = \"operator\", types = \"b.\" }\n",
     "[clients] ops: types is a list of type prefixes"},
    {"[clients]\nops = { types = [\"b.\"] }\n", "[clients] ops: role is missing"},
    {"[clients]\nops = { role = \"operator\", type = [\"b.\"] }\n",
     "[clients] ops: unknown field 'type' (role, types)"},
    {"[tokens.ci]\nsha256 = \"" + std::string{s3cret_sha256}
       + "\"\nrole = \"reader\"\ntypes = [\"b.\"]\n",
     "[tokens.ci]: types limit the submitter and operator roles, not reader"},
  };
  for (const auto& c : cases) {
    std::string why;
    EXPECT_FALSE(parse(c.text, &why)) << c.text;
    EXPECT_NE(why.find(c.want), std::string::npos) << c.text << "\n" << why;
  }
}

TEST(auth_policy, a_missing_file_is_said) {
  std::string why;
  EXPECT_FALSE(load_auth_policy("/nonexistent/policy.toml", &why));
  EXPECT_EQ(why, "cannot read --auth-policy /nonexistent/policy.toml: No such file or directory");
}

TEST(auth_policy, a_policy_gives_certificates_their_roles_and_nodes_their_own_acts) {
  std::string why;
  auto p = parse("[clients]\nreporting = \"reader\"\n[nodes]\na = \"reader\"\n", &why);
  ASSERT_TRUE(p) << why;
  auto reporting = caller::with_certificate({cert_identity::kind::client, "reporting", {}}, &*p);
  auto stranger = caller::with_certificate({cert_identity::kind::client, "x", {}}, &*p);
  auto a = caller::with_certificate({cert_identity::kind::node, "a", {}}, &*p);
  pb::Request abort;
  abort.mutable_abort()->set_id(7);
  pb::Request list;
  list.mutable_list();
  EXPECT_EQ(authorise(reporting, list), "");
  EXPECT_EQ(authorise(reporting, abort),
            "abort needs the operator role; client reporting has reader");
  EXPECT_EQ(authorise(stranger, list), "list needs the reader role; client x has none");
  // Node a's certificate used as a client is a reader; its peer link's requests (tagged) and
  // its own acts are the node's.
  EXPECT_EQ(authorise(a, abort), "abort needs the operator role; node a has reader");
  abort.set_tag(3);
  EXPECT_EQ(authorise(a, abort), "");
  pb::Request call;
  call.mutable_call()->set_service("echo");
  EXPECT_EQ(authorise(a, call), "");
  EXPECT_NE(authorise(reporting, call), "");
  pb::Request forwarded;  // a cluster proposal handed on by a node whose member did not lead
  forwarded.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  forwarded.mutable_cluster()->mutable_command()->mutable_drain()->set_name("c");
  EXPECT_NE(authorise(a, forwarded), "");
  forwarded.mutable_cluster()->set_forwarded(true);
  EXPECT_EQ(authorise(a, forwarded), "");
  EXPECT_NE(authorise(reporting, forwarded), "");
}

TEST(auth_policy, type_prefixes_limit_a_submitter_or_operator_to_its_types) {
  std::string why;
  auto p = parse(R"(
[clients]
billing = { role = "operator", types = ["billing.", "invoice."] }
ops = "operator"
[nodes]
"*" = { role = "submitter", types = ["node."] }
[tokens.ci]
sha256 = ")" + std::string{s3cret_sha256}
                   + R"("
role = "submitter"
types = ["ci."]
)",
                 &why);
  ASSERT_TRUE(p) << why;
  using kind = cert_identity::kind;
  auto billing = caller::with_certificate({kind::client, "billing", {}}, &*p);
  auto ops = caller::with_certificate({kind::client, "ops", {}}, &*p);
  EXPECT_EQ(billing.granted, role::operator_);
  EXPECT_EQ(billing.types, (std::vector<std::string>{"billing.", "invoice."}));
  EXPECT_TRUE(ops.types.empty());
  EXPECT_EQ(p->types_of({kind::node, "z", {}}), std::vector<std::string>{"node."});
  ASSERT_EQ(p->tokens.size(), 1U);
  EXPECT_EQ(p->tokens[0].types, std::vector<std::string>{"ci."});

  auto submit = [](const std::string& type) {
    pb::Request r;
    r.mutable_submit()->set_type(type);
    return r;
  };
  EXPECT_EQ(authorise(billing, submit("billing.charge")), "");
  EXPECT_EQ(authorise(billing, submit("invoice.send")), "");
  EXPECT_EQ(authorise(billing, submit("orders.create")),
            "client billing may act on types billing.*, invoice.* only; submit concerns type "
            "'orders.create'");
  EXPECT_EQ(authorise(ops, submit("orders.create")), "");
  pb::Request event;
  event.mutable_event()->set_key("billing.paid/7");
  EXPECT_EQ(authorise(billing, event), "");
  event.mutable_event()->set_key("orders.paid/7");
  EXPECT_NE(authorise(billing, event).find("event concerns event key 'orders.paid/7'"),
            std::string::npos);
  pb::Request limits;
  limits.mutable_limits()->set_type("orders.create");
  EXPECT_EQ(authorise(billing, limits), "");  // a read
  limits.mutable_limits()->set_max_running(3);
  EXPECT_NE(authorise(billing, limits), "");
  limits.mutable_limits()->set_type("billing.charge");
  EXPECT_EQ(authorise(billing, limits), "");
  pb::Request add;
  add.mutable_schedule()->set_op(pb::ScheduleRequest::ADD);
  add.mutable_schedule()->mutable_spec()->set_type("orders.nightly");
  EXPECT_NE(authorise(billing, add), "");
  // By id or name: the executor checks (stamp_types); what concerns no type is refused.
  pb::Request abort;
  abort.mutable_abort()->set_id(7);
  EXPECT_EQ(authorise(billing, abort), "");
  pb::Request audit;
  audit.mutable_audit();
  EXPECT_EQ(authorise(billing, audit),
            "client billing may act on types billing.*, invoice.* only; audit concerns no "
            "procedure type");
  pb::Request list;
  list.mutable_list();
  EXPECT_EQ(authorise(billing, list), "");  // reads are not limited
}

TEST(auth_policy, a_door_says_the_types_for_what_the_executor_checks_and_nothing_else) {
  caller billing = caller::with_token("billing", role::operator_, {"billing."});
  pb::Request abort;
  abort.mutable_abort()->set_id(7);
  EXPECT_TRUE(stamp_types(abort, billing, false));
  ASSERT_EQ(abort.only_types_size(), 1);
  EXPECT_EQ(abort.only_types(0), "billing.");
  // What a client wrote there is replaced, or cleared.
  caller ops = caller::with_token("ops", role::operator_);
  abort.add_only_types("x.");
  EXPECT_TRUE(stamp_types(abort, ops, false));
  EXPECT_EQ(abort.only_types_size(), 0);
  pb::Request submit;
  submit.mutable_submit()->set_type("billing.charge");
  submit.add_only_types("x.");
  EXPECT_TRUE(stamp_types(submit, billing, false));
  EXPECT_EQ(submit.only_types_size(), 0);  // the door checked its type itself
  // A node forwarding its client's request keeps what the first door said.
  abort.add_only_types("billing.");
  EXPECT_FALSE(stamp_types(abort, ops, true));
  EXPECT_EQ(abort.only_types_size(), 1);
  pb::Request pause;
  pause.mutable_schedule()->set_op(pb::ScheduleRequest::PAUSE);
  EXPECT_TRUE(stamp_types(pause, billing, false));
  EXPECT_EQ(pause.only_types_size(), 1);
  EXPECT_TRUE(type_allowed({}, "anything"));
  EXPECT_TRUE(type_allowed({"a.", "b."}, "b.x"));
  EXPECT_FALSE(type_allowed({"a.", "b."}, "c.x"));
  EXPECT_FALSE(type_allowed({"a."}, "a"));
}

}  // namespace
}  // namespace proctor
