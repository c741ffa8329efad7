// Who may do what (docs/security.md): one authoriser for every door of a node — the client
// protocol (actors/cluster/client_server.cpp) and the HTTP API and console, which speak
// that protocol to the executor — so that no door forgets it.
//
// Roles, each a superset of the one before: reader < submitter < operator < admin, and
// `node`, which a node's certificate gives its node alone for a node's own acts: what only
// nodes send (deliveries, nonce handoffs, the cluster group's member acts, heartbeats), a
// procedure's call to a service, and whatever it forwards for its clients (a peer link's
// tagged requests, a cluster proposal handed on). A request that names the node sending it
// (a delivery's `from`, a heartbeat's `from`, a handoff's `node`, a join) is refused unless
// that is the caller's own node. A node's certificate used as a client (the CLI on a node)
// has the role the policy gives it (auth_policy.hpp; without a policy: every role).
// Without TLS nothing is known of a caller: `anyone` may do everything, as before.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <proctor/wire.pb.h>

#include "tls/cert_identity.hpp"

namespace proctor {

enum class role : uint8_t { none, reader, submitter, operator_, admin, node };

/// "reader", "submitter", "operator", "admin", "node", "none".
const char* role_name(role r);

/// Who sends a request, as its door knows it.
struct auth_policy;

struct caller {
  bool authenticated = false;  ///< a certificate or a token said who it is
  cert_identity id;            ///< what its certificate names (authenticated by one only)
  std::string token;           ///< the name of the HTTP token it presented, if that
  role granted = role::none;   ///< what it may do as a client
  bool node = false;           ///< its certificate names a node: that node's own acts too
  /// The type prefixes its submitter or operator acts are limited to (empty: every type;
  /// docs/security.md, "Type prefixes").
  std::vector<std::string> types;

  /// Anyone on a door without TLS: may do everything (today's behaviour, docs/tls.md).
  static caller anyone();
  /// The other side of a TLS connection whose certificate names `id`. Without a policy
  /// (nullptr) a node's certificate may do everything and any other certificate is an
  /// admin client, as before; with one, the policy's role (auth_policy::role_of).
  static caller with_certificate(cert_identity id, const auth_policy* policy = nullptr);
  /// An HTTP client known by its token's name (or "" for none), with the role it has.
  static caller with_token(std::string name, role r, std::vector<std::string> types = {});
  /// "node b", "client ops", "token ci", "an anonymous client", "anyone (no TLS)".
  std::string text() const;
};

/// The role `req` needs: the table of every request kind and, where the kind has them, its
/// operations (reads to reader, changes to operator or admin). role::none for a request with
/// no body (the executor answers it BAD_REQUEST).
role required_role(const pb::Request& req);

/// "" if `who` may send `req`; else one line saying why not, naming the role needed
/// ("abort needs the operator role; client billing has submitter").
std::string authorise(const caller& who, const pb::Request& req);

/// Whether `type` (a procedure type, or an event key) begins with one of `prefixes`; every
/// type when there are none.
bool type_allowed(const std::vector<std::string>& prefixes, std::string_view type);

/// "client billing may act on types billing.*, ci.* only": the refusal's start (`who` as
/// caller::text() says it).
std::string types_text(const std::string& who, const std::vector<std::string>& prefixes);

/// The door's part of the type check: `req.only_types` becomes `who.types` for an act the
/// executor checks against what it names (a procedure or schedule by id or name: abort,
/// bypass, retry, resubmit, release, a schedule's pause, resume, delete, trigger), and is
/// cleared otherwise — whatever the client put there. A node forwarding its client's request
/// (`forwarder`) keeps what the first door set. True if `req` changed.
bool stamp_types(pb::Request& req, const caller& who, bool forwarder);

/// The name of the request's kind, as in wire.proto's Request ("abort", "peer", ...).
std::string request_kind(const pb::Request& req);

}  // namespace proctor
