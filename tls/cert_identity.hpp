// Who a certificate names (docs/security.md, "Identities"): a node, a replica of a node, or a
// client, read from its `proctor://` URI names (subject alternative names), as
// scripts/proctor-certs issues them:
//   URI:proctor://node/b                       node b
//   URI:proctor://node/b + proctor://node/b/replica/b2   replica b2 of node b
//   URI:proctor://client/billing-svc           client billing-svc
// A certificate that names nothing of these, or names two different identities, is anonymous:
// it may act as a client (no node's request), never as a node. No CAF here.
#pragma once

#include <string>
#include <string_view>

struct x509_st;  // OpenSSL's X509

namespace proctor {

struct cert_identity {
  enum class kind { anonymous, node, client };
  kind what = kind::anonymous;
  std::string name;     ///< the node's or the client's name
  std::string replica;  ///< a node's replica, if the certificate names one

  bool is_node() const noexcept { return what == kind::node; }
  bool is_client() const noexcept { return what == kind::client; }
  /// "node b", "node b (replica b2)", "client ops", "a certificate naming no proctor identity".
  std::string text() const;
  friend bool operator==(const cert_identity&, const cert_identity&) = default;
};

/// What a name of a node, a replica, a client or a token may be: 1-64 letters, digits, '-',
/// '_', '.' (`proctord --name`, the `proctor://` URIs, the policy's names).
bool valid_name(std::string_view name);
/// valid_name's rule, for the messages that refuse a name.
inline constexpr std::string_view valid_name_rule = "1-64 letters, digits, '-', '_', '.'";

/// `text` for a one-line message: at most `max` bytes of it, each byte outside printable
/// ASCII shown as "\xNN" (a certificate's or a file's text may hold anything).
std::string printable(std::string_view text, size_t max = 200);

/// The identity one `proctor://` URI names, or anonymous with `*why` set (a URI of another
/// scheme is anonymous with `*why` empty). Names are those of `proctord --name`: 1-64
/// letters, digits, '-', '_', '.'.
cert_identity parse_identity_uri(std::string_view uri, std::string* why);

/// The identity `cert` names (all its URI names together; see above); `*why` says why it is
/// anonymous when it names something that does not make one identity.
cert_identity identity_of(const x509_st* cert, std::string* why);

/// The identity of the first certificate in the PEM file at `path`; anonymous with `*why`
/// when the file cannot be read.
cert_identity identity_of_file(const std::string& path, std::string* why);

/// "" when the certificate at `cert_path` names node `node` (and replica `replica`, if not
/// empty); else one line for the node's refusal to start.
std::string check_own_identity(const std::string& cert_path, const std::string& node,
                               const std::string& replica);

}  // namespace proctor
