#include "actors/base/auth_policy.hpp"

#include <string>

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

}  // namespace
}  // namespace proctor
