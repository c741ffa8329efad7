// Who has which role (docs/security.md, "The policy file"): the TOML file of
// `proctord --auth-policy FILE`, read at start and again on SIGHUP. Without one, a node
// behaves as it always did (authoriser.hpp).
//
//   unnamed = "none"            # certificates that name no client the policy lists
//   [clients]                   # by the name in proctor://client/NAME
//   ops = "admin"
//   billing-svc = "submitter"
//   billing-ops = { role = "operator", types = ["billing."] }   # billing.* procedures only
//   [nodes]                     # node certificates used as a client (the CLI on a node)
//   a = "operator"
//   "*" = "reader"              # any other node's (the default: reader)
//   [tokens.ci]                 # HTTP bearer tokens, by name: only the SHA-256 is kept
//   sha256 = "5f4dcc3b..."      # `printf %s "$TOKEN" | sha256sum`
//   role = "operator"
//   types = ["ci."]             # optional, as for clients
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/base/authoriser.hpp"

namespace proctor {

struct auth_policy {
  std::map<std::string, role> clients;
  std::map<std::string, role> nodes;  ///< "*": any node's not listed
  /// The type prefixes a client or node (as `clients`/`nodes`) is limited to; absent: every
  /// type (docs/security.md, "Type prefixes").
  std::map<std::string, std::vector<std::string>> client_types, node_types;
  role unnamed = role::none;
  struct token {
    std::string name;
    std::array<uint8_t, 32> sha256{};
    role granted = role::none;
    std::vector<std::string> types;  ///< empty: every type
  };
  std::vector<token> tokens;

  /// What a certificate naming `id` may do as a client (a node's own acts apart).
  role role_of(const cert_identity& id) const;
  /// The type prefixes a certificate naming `id` is limited to as a client (empty: none).
  const std::vector<std::string>& types_of(const cert_identity& id) const;
  /// The token whose hash is SHA-256(`bearer`), compared in constant time; nullptr if none.
  const token* token_of(std::string_view bearer) const;
};

/// The policy in force, shared by a node's doors and replaced whole on a reload (SIGHUP):
/// a door reads it for each request. Empty: no policy (authoriser.hpp's defaults).
struct auth_policy_slot {
  std::atomic<std::shared_ptr<const auth_policy>> current;
};

/// The role named `text` ("reader", "submitter", "operator", "admin"), or nullopt.
std::optional<role> parse_role(std::string_view text);

/// The policy in `toml` (a file's text; `source` names it in errors), or nullopt and one line
/// in `*why` naming the place and what is wrong ("policy.toml:4: [clients] ops: 'root' is
/// not a role (reader, submitter, operator, admin)").
std::optional<auth_policy> parse_auth_policy(std::string_view toml, const std::string& source,
                                             std::string* why);

/// parse_auth_policy of the file at `path`; a file that cannot be read is an error too.
std::optional<auth_policy> load_auth_policy(const std::string& path, std::string* why);

}  // namespace proctor
