#include "actors/base/auth_policy.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#include <openssl/evp.h>

#include "tls/cert_identity.hpp"

// toml++ 3.3.0 asserts things of its input that malformed files break (`[` then a line end:
// tests/fuzz/auth_policy_fuzzer.cpp found it), and with NDEBUG turns those asserts into
// assumptions (__builtin_assume, where the compiler has it): undefined behaviour on a bad
// file. Its asserts are made no-ops here, whatever NDEBUG says, so that a bad file is a parse
// error (the fuzzer runs this configuration under ASan and UBSan). Included last.
#pragma push_macro("NDEBUG")
#undef NDEBUG
#define TOML_ASSERT(expr) static_assert(true)
#include <toml++/toml.h>
#pragma pop_macro("NDEBUG")

namespace proctor {

namespace {

const char* const role_list = "reader, submitter, operator, admin";

std::string where(const std::string& source, const toml::node& n) {
  return source + ":" + std::to_string(n.source().begin.line);
}

/// The role a TOML value names, or nullopt and `*why`.
std::optional<role> role_value(const toml::node& n, const std::string& source,
                               const std::string& what, std::string* why) {
  const auto* s = n.as_string();
  if (s == nullptr) {
    *why = where(source, n) + ": " + what + ": a role is a string (" + role_list + ")";
    return std::nullopt;
  }
  auto r = parse_role(s->get());
  if (!r)
    *why =
      where(source, n) + ": " + what + ": '" + s->get() + "' is not a role (" + role_list + ")";
  return r;
}

/// `types = ["billing.", ...]` of a grant (`what` names it): each a prefix of procedure
/// types, 1-128 printable characters; nullopt and `*why` otherwise. They limit the submitter
/// and operator roles only (docs/security.md, "Type prefixes").
std::optional<std::vector<std::string>> types_value(const toml::node& n, role granted,
                                                    const std::string& source,
                                                    const std::string& what, std::string* why) {
  const auto* a = n.as_array();
  if (a == nullptr || a->empty()) {
    *why = where(source, n) + ": " + what
           + ": types is a list of type prefixes, e.g. types = [\"billing.\"]";
    return std::nullopt;
  }
  if (granted != role::submitter && granted != role::operator_) {
    *why = where(source, n) + ": " + what + ": types limit the submitter and operator roles, not "
           + role_name(granted);
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& e : *a) {
    const auto* s = e.as_string();
    if (s == nullptr || s->get().empty() || s->get().size() > 128) {
      *why = where(source, e) + ": " + what + ": a type prefix is a string of 1-128 characters";
      return std::nullopt;
    }
    out.push_back(s->get());
  }
  return out;
}

std::optional<std::array<uint8_t, 32>> hex_sha256(std::string_view hex) {
  if (hex.size() != 64)
    return std::nullopt;
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 64; ++i) {
    char c = hex[i];
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0)
      return std::nullopt;
    out[i / 2] = static_cast<uint8_t>(out[i / 2] << 4 | v);
  }
  return out;
}

/// [clients] or [nodes]: NAME = "role", or NAME = { role = "role", types = ["prefix", ...] }.
bool read_roles(const toml::table& t, const std::string& section, const std::string& source,
                bool star, std::map<std::string, role>* out,
                std::map<std::string, std::vector<std::string>>* types, std::string* why) {
  for (const auto& [k, v] : t) {
    std::string name{k.str()};
    const std::string what = "[" + section + "] " + name;
    if (!valid_name(name) && !(star && name == "*")) {
      *why = where(source, v) + ": [" + section + "] '" + name + "' is not a name ("
             + std::string{valid_name_rule} + ")";
      return false;
    }
    const auto* grant = v.as_table();
    if (grant == nullptr) {
      auto r = role_value(v, source, what, why);
      if (!r)
        return false;
      (*out)[name] = *r;
      continue;
    }
    for (const auto& [field, _] : *grant)
      if (field.str() != "role" && field.str() != "types") {
        *why = where(source, v) + ": " + what + ": unknown field '" + std::string{field.str()}
               + "' (role, types)";
        return false;
      }
    const auto* rn = grant->get("role");
    if (rn == nullptr) {
      *why = where(source, v) + ": " + what + ": role is missing (" + role_list + ")";
      return false;
    }
    auto r = role_value(*rn, source, what + " role", why);
    if (!r)
      return false;
    (*out)[name] = *r;
    if (const auto* tn = grant->get("types"); tn != nullptr) {
      auto prefixes = types_value(*tn, *r, source, what, why);
      if (!prefixes)
        return false;
      (*types)[name] = std::move(*prefixes);
    }
  }
  return true;
}

bool read_tokens(const toml::table& t, const std::string& source, auth_policy* p,
                 std::string* why) {
  for (const auto& [k, v] : t) {
    std::string name{k.str()};
    std::string what = "[tokens." + name + "]";
    const auto* tt = v.as_table();
    if (!valid_name(name) || tt == nullptr) {
      *why = where(source, v) + ": " + what + ": a token is a table named by a name ("
             + std::string{valid_name_rule}
             + ") with "
               "sha256 and role";
      return false;
    }
    for (const auto& [field, _] : *tt)
      if (field.str() != "sha256" && field.str() != "role" && field.str() != "types") {
        *why = where(source, v) + ": " + what + ": unknown field '" + std::string{field.str()}
               + "' (sha256, role, types)";
        return false;
      }
    auth_policy::token tok;
    tok.name = name;
    const auto* hash = tt->get("sha256");
    const auto* hs = hash != nullptr ? hash->as_string() : nullptr;
    auto digest = hs != nullptr ? hex_sha256(hs->get()) : std::nullopt;
    if (!digest) {
      *why = where(source, v) + ": " + what
             + ": sha256 must be the token's SHA-256 in 64 hex digits (printf %s \"$TOKEN\" | "
               "sha256sum); the token itself is never written here";
      return false;
    }
    tok.sha256 = *digest;
    const auto* r = tt->get("role");
    if (r == nullptr) {
      *why = where(source, v) + ": " + what + ": role is missing (" + role_list + ")";
      return false;
    }
    auto granted = role_value(*r, source, what + " role", why);
    if (!granted)
      return false;
    tok.granted = *granted;
    if (const auto* tn = tt->get("types"); tn != nullptr) {
      auto prefixes = types_value(*tn, tok.granted, source, what, why);
      if (!prefixes)
        return false;
      tok.types = std::move(*prefixes);
    }
    for (const auto& other : p->tokens)
      if (other.sha256 == tok.sha256) {
        *why = where(source, v) + ": " + what + ": the same token as [tokens." + other.name + "]";
        return false;
      }
    p->tokens.push_back(std::move(tok));
  }
  return true;
}

}  // namespace

std::optional<role> parse_role(std::string_view text) {
  for (auto r : {role::reader, role::submitter, role::operator_, role::admin, role::none})
    if (text == role_name(r))
      return r;
  return std::nullopt;
}

role auth_policy::role_of(const cert_identity& id) const {
  if (id.is_client()) {
    auto i = clients.find(id.name);
    return i != clients.end() ? i->second : unnamed;
  }
  if (id.is_node()) {
    if (auto i = nodes.find(id.name); i != nodes.end())
      return i->second;
    auto any = nodes.find("*");
    return any != nodes.end() ? any->second : role::reader;
  }
  return unnamed;
}

const std::vector<std::string>& auth_policy::types_of(const cert_identity& id) const {
  static const std::vector<std::string> every;
  const auto& m = id.is_client() ? client_types : node_types;
  if (!id.is_client() && !id.is_node())
    return every;  // an unnamed certificate: `unnamed` has no types
  // A node's certificate not listed by name has the role of "*", and so its types.
  const auto& roles = id.is_client() ? clients : nodes;
  const std::string& key = id.is_node() && roles.count(id.name) == 0 ? std::string{"*"} : id.name;
  auto i = m.find(key);
  return i != m.end() ? i->second : every;
}

const auth_policy::token* auth_policy::token_of(std::string_view bearer) const {
  std::array<uint8_t, 32> digest{};
  unsigned int len = 0;
  if (EVP_Digest(bearer.data(), bearer.size(), digest.data(), &len, EVP_sha256(), nullptr) != 1
      || len != digest.size())
    return nullptr;
  const token* found = nullptr;
  for (const auto& t : tokens) {
    // Every token compared whole: how long this takes says nothing of which one matched.
    uint8_t diff = 0;
    for (size_t i = 0; i < digest.size(); ++i)
      diff = static_cast<uint8_t>(diff | (digest[i] ^ t.sha256[i]));
    if (diff == 0)
      found = &t;
  }
  return found;
}

namespace {

std::optional<auth_policy> parse_policy(std::string_view toml_text, const std::string& source,
                                        std::string* why) {
  // Printable ASCII, tabs and line ends only. TOML allows no other control character, and
  // a policy's names, roles and hashes are ASCII; and toml++ 3.3.0 reaches
  // __builtin_unreachable() on some non-ASCII white space (U+FEFB after a key: found by
  // tests/fuzz/auth_policy_fuzzer.cpp), undefined behaviour that no input may reach.
  size_t line = 1;
  for (char ch : toml_text) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      ++line;
    } else if ((c < 0x20 && c != '\t' && c != '\r') || c >= 0x7f) {
      *why = source + ":" + std::to_string(line) + ": byte " + printable(std::string_view{&ch, 1})
             + ": a policy file is printable ASCII (tabs and line ends apart)";
      return std::nullopt;
    }
  }
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    *why =
      source + ":" + std::to_string(e.source().begin.line) + ": " + std::string{e.description()};
    return std::nullopt;
  }
  auth_policy p;
  for (const auto& [k, v] : root) {
    auto key = std::string{k.str()};
    if (key == "unnamed") {
      auto r = role_value(v, source, "unnamed", why);
      if (!r)
        return std::nullopt;
      p.unnamed = *r;
    } else if (key == "clients" || key == "nodes" || key == "tokens") {
      const auto* t = v.as_table();
      if (t == nullptr) {
        *why = where(source, v) + ": " + key + " must be a table ([" + key + "])";
        return std::nullopt;
      }
      bool ok = key == "tokens" ? read_tokens(*t, source, &p, why)
                                : read_roles(*t, key, source, key == "nodes",
                                             key == "nodes" ? &p.nodes : &p.clients,
                                             key == "nodes" ? &p.node_types : &p.client_types, why);
      if (!ok)
        return std::nullopt;
    } else {
      *why = where(source, v) + ": unknown key '" + key
             + "' (unnamed, [clients], [nodes], [tokens.NAME])";
      return std::nullopt;
    }
  }
  return p;
}

}  // namespace

std::optional<auth_policy> parse_auth_policy(std::string_view toml_text, const std::string& source,
                                             std::string* why) {
  auto p = parse_policy(toml_text, source, why);
  if (!p)
    *why = printable(*why, 1000);  // the file's own text in it may hold anything
  return p;
}

std::optional<auth_policy> load_auth_policy(const std::string& path, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *why = "cannot read --auth-policy " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto text = ss.str();
  if (text.size() > (size_t{1} << 20)) {
    *why = "--auth-policy " + path + " is larger than 1 MiB";
    return std::nullopt;
  }
  return parse_auth_policy(text, path, why);
}

}  // namespace proctor
