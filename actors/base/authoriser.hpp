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

  /// Anyone on a door without TLS: may do everything (today's behaviour, docs/tls.md).
  static caller anyone();
  /// The other side of a TLS connection whose certificate names `id`. Without a policy
  /// (nullptr) a node's certificate may do everything and any other certificate is an
  /// admin client, as before; with one, the policy's role (auth_policy::role_of).
  static caller with_certificate(cert_identity id, const auth_policy* policy = nullptr);
  /// An HTTP client known by its token's name (or "" for none), with the role it has.
  static caller with_token(std::string name, role r);
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

/// The name of the request's kind, as in wire.proto's Request ("abort", "peer", ...).
std::string request_kind(const pb::Request& req);

}  // namespace proctor
