#include "tls/cert_identity.hpp"

#include <initializer_list>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace proctor {
namespace {

using kind = cert_identity::kind;

cert_identity parse(const std::string& uri, std::string* why) {
  return parse_identity_uri(uri, why);
}

TEST(cert_identity, parses_the_uris_proctor_certs_writes) {
  std::string why;
  EXPECT_EQ(parse("proctor://node/b", &why), (cert_identity{kind::node, "b", {}}));
  EXPECT_EQ(why, "");
  EXPECT_EQ(parse("proctor://node/b/replica/b2", &why), (cert_identity{kind::node, "b", "b2"}));
  EXPECT_EQ(parse("proctor://client/billing-svc", &why),
            (cert_identity{kind::client, "billing-svc", {}}));
  EXPECT_EQ(parse("https://example.com/x", &why), cert_identity{});
  EXPECT_EQ(why, "") << "another scheme is not an error";
}

TEST(cert_identity, refuses_what_is_not_an_identity) {
  for (const std::string& bad : std::initializer_list<std::string>{
         "proctor://", "proctor://node", "proctor://node/", "proctor://node/b/", "proctor://client",
         "proctor://client/a/b", "proctor://node/b/replica", "proctor://node/b/shard/b2",
         "proctor://admin/x", "proctor://node/a b", "proctor://node/..%2f", "proctor://node//b",
         "proctor://client/" + std::string(65, 'x')}) {
    std::string why;
    EXPECT_EQ(parse(bad, &why), cert_identity{}) << bad;
    EXPECT_NE(why, "") << bad;
  }
  std::string why;
  EXPECT_EQ(parse("proctor://client/" + std::string(64, 'x'), &why).name, std::string(64, 'x'));
}

using x509_ptr = std::unique_ptr<X509, decltype(&X509_free)>;

/// A certificate (unsigned: only its names matter here) with `san` as its
/// subjectAltName, in openssl's config syntax ("URI:proctor://node/b,DNS:localhost").
x509_ptr cert_with(const std::string& san) {
  x509_ptr c{X509_new(), &X509_free};
  if (!san.empty()) {
    X509_EXTENSION* ext =
      X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, const_cast<char*>(san.c_str()));
    EXPECT_NE(ext, nullptr) << san;
    X509_add_ext(c.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  return c;
}

TEST(cert_identity, reads_a_certificates_names_together) {
  std::string why;
  EXPECT_EQ(identity_of(cert_with("URI:proctor://node/b,DNS:localhost,IP:127.0.0.1").get(), &why),
            (cert_identity{kind::node, "b", {}}));
  EXPECT_EQ(
    identity_of(cert_with("URI:proctor://node/b,URI:proctor://node/b/replica/b2").get(), &why),
    (cert_identity{kind::node, "b", "b2"}));
  EXPECT_EQ(
    identity_of(cert_with("URI:proctor://node/b/replica/b2,URI:proctor://node/b").get(), &why),
    (cert_identity{kind::node, "b", "b2"}));
  EXPECT_EQ(identity_of(cert_with("URI:proctor://client/ops").get(), &why),
            (cert_identity{kind::client, "ops", {}}));
  EXPECT_EQ(identity_of(cert_with("DNS:localhost").get(), &why), cert_identity{});
  EXPECT_EQ(why, "");
  EXPECT_EQ(identity_of(cert_with("").get(), &why), cert_identity{});
  EXPECT_EQ(why, "");
}

TEST(cert_identity, a_certificate_naming_two_identities_names_none) {
  for (const char* san :
       {"URI:proctor://node/b,URI:proctor://node/c", "URI:proctor://node/b,URI:proctor://client/b",
        "URI:proctor://client/a,URI:proctor://client/a",
        "URI:proctor://node/b/replica/b1,URI:proctor://node/b/replica/b2",
        "URI:proctor://node/b,URI:proctor://node/b c"}) {
    std::string why;
    EXPECT_EQ(identity_of(cert_with(san).get(), &why), cert_identity{}) << san;
    EXPECT_NE(why, "") << san;
  }
}

TEST(cert_identity, names_itself_in_one_line) {
  EXPECT_EQ((cert_identity{kind::node, "b", {}}).text(), "node b");
  EXPECT_EQ((cert_identity{kind::node, "b", "b2"}).text(), "node b (replica b2)");
  EXPECT_EQ((cert_identity{kind::client, "ops", {}}).text(), "client ops");
}

TEST(cert_identity, a_missing_file_is_said) {
  std::string why;
  EXPECT_EQ(identity_of_file("/nonexistent/a.pem", &why), cert_identity{});
  EXPECT_EQ(why, "cannot read /nonexistent/a.pem");
  EXPECT_NE(check_own_identity("/nonexistent/a.pem", "a", "").find("does not name this node"),
            std::string::npos);
}

}  // namespace
}  // namespace proctor
