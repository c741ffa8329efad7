// libFuzzer target for what decides who may do what (docs/security.md): the --auth-policy
// TOML parser (actors/base/auth_policy.hpp) and the certificate identity parser
// (tls/cert_identity.hpp). Any text is parsed; a refusal must be one line naming where
// ("policy.toml:LINE: ..."); a policy taken must give every role it names to what it names
// and nothing to an identity it does not name (its `unnamed`); a URI taken must render back
// to itself.
//   input: the first byte chooses the parser (even: policy, odd: URI); the rest is the text.
//
// Built with -DPROCTOR_FUZZ_SEEDS_MAIN instead, this file is a tool that writes the seed
// corpus into a directory.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "actors/base/auth_policy.hpp"
#include "tls/cert_identity.hpp"

using namespace proctor;

namespace {

[[noreturn]] void fail(const char* what, std::string_view text, const std::string& detail) {
  std::fprintf(stderr, "auth_policy_fuzzer: %s: \"%.*s\": %s\n", what,
               static_cast<int>(text.size()), text.data(), detail.c_str());
  std::abort();
}

void check_policy(std::string_view text) {
  std::string why;
  auto p = parse_auth_policy(text, "policy.toml", &why);
  if (!p) {
    if (why.rfind("policy.toml:", 0) != 0 || why.find('\n') != std::string::npos)
      fail("a refusal that is not one line naming the file", text, why);
    return;
  }
  if (!why.empty())
    fail("a policy taken with an error", text, why);
  for (const auto& [name, r] : p->clients)
    if (p->role_of({cert_identity::kind::client, name, {}}) != r)
      fail("a listed client without its role", text, name);
  for (const auto& [name, r] : p->nodes)
    if (name != "*" && p->role_of({cert_identity::kind::node, name, {}}) != r)
      fail("a listed node without its role", text, name);
  // A client no policy can list ("a b" is not a name) has the unnamed role.
  if (p->role_of({cert_identity::kind::client, "a b", {}}) != p->unnamed
      || p->role_of({}) != p->unnamed)
    fail("an unlisted client not unnamed", text, role_name(p->unnamed));
  // Type prefixes: only on a submitter or an operator, each 1-128 characters, and given to
  // what the policy lists.
  auto check_types = [&](const std::vector<std::string>& types, role r, const std::string& who) {
    if (types.empty())
      return;
    if (r != role::submitter && r != role::operator_)
      fail("types on a role that is not submitter or operator", text, who);
    for (const auto& prefix : types)
      if (prefix.empty() || prefix.size() > 128)
        fail("a type prefix of a bad length", text, who);
  };
  auto check_listed = [&](cert_identity::kind kind, const auto& types_by_name, const auto& roles) {
    for (const auto& [name, types] : types_by_name) {
      auto i = roles.find(name);
      if (i == roles.end())
        fail("types for a certificate not listed", text, name);
      check_types(types, i->second, name);
      if (p->types_of({kind, name, {}}) != types)
        fail("a listed certificate without its types", text, name);
    }
  };
  check_listed(cert_identity::kind::client, p->client_types, p->clients);
  check_listed(cert_identity::kind::node, p->node_types, p->nodes);
  for (const auto& t : p->tokens) {
    if (t.name.empty())
      fail("a token without a name", text, "");
    check_types(t.types, t.granted, t.name);
  }
}

void check_uri(std::string_view text) {
  std::string why;
  auto id = parse_identity_uri(text, &why);
  if (id.what == cert_identity::kind::anonymous) {
    if (why.find('\n') != std::string::npos)
      fail("a refusal of more than one line", text, why);
    return;
  }
  std::string back = "proctor://" + std::string{id.is_node() ? "node/" : "client/"} + id.name
                     + (id.replica.empty() ? "" : "/replica/" + id.replica);
  if (back != text)
    fail("an identity that does not render back to its URI", text, back);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0)
    check_policy(text);
  else
    check_uri(text);
  return 0;
}

#ifdef PROCTOR_FUZZ_SEEDS_MAIN
#include "tests/fuzz/seed_main.hpp"

namespace {
std::string policy(const std::string& text) {
  return std::string(1, '\0') + text;
}
std::string uri(const std::string& text) {
  return std::string(1, '\1') + text;
}
}  // namespace

int main(int argc, char** argv) {
  return proctor::fuzz::write_seeds(
    argc, argv, "auth_policy_fuzzer",
    {{"policy-full",
      policy("unnamed = \"reader\"\n[clients]\nops = \"admin\"\nbilling-svc = \"submitter\"\n"
             "[nodes]\na = \"operator\"\n\"*\" = \"none\"\n[tokens.ci]\nsha256 = "
             "\"1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0\"\n"
             "role = \"operator\"\n")},
     {"policy-types",
      policy("[clients]\nbilling = { role = \"operator\", types = [\"billing.\", \"inv.\"] }\n"
             "[nodes]\n\"*\" = { role = \"submitter\", types = [\"n.\"] }\n[tokens.ci]\nsha256 = "
             "\"1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0\"\n"
             "role = \"submitter\"\ntypes = [\"ci.\"]\n")},
     {"policy-empty", policy("")},
     {"policy-bad-role", policy("[clients]\nops = \"root\"\n")},
     {"policy-inline", policy("clients = { ops = \"admin\", x = \"reader\" }\n")},
     {"policy-array", policy("[[clients]]\nname = \"x\"\n")},
     {"uri-node", uri("proctor://node/b")},
     {"uri-replica", uri("proctor://node/b/replica/b2")},
     {"uri-client", uri("proctor://client/billing-svc")},
     {"uri-bad", uri("proctor://node/b/")},
     {"uri-other", uri("spiffe://example.org/ns/x")}});
}
#endif
