// Mutual TLS settings (docs/tls.md), shared by a node's sockets (tls/caf_tls.hpp, through
// CAF's OpenSSL module) and the blocking client (tls/tls_client.hpp, OpenSSL directly).
// Both sides present a certificate and require the other side's to chain to the CA; the
// side that dials may also require it to carry the address dialled (check_host, etcd's SAN
// check; docs/security.md, "Host checks").
// No CAF here: the CLI links this without an actor system.
#pragma once

#include <string>

struct ssl_ctx_st;  // OpenSSL's SSL_CTX
struct ssl_st;      // OpenSSL's SSL

namespace proctor {

struct tls_options {
  std::string cert;  ///< PEM certificate (chain) this side presents
  std::string key;   ///< PEM private key of `cert`, not encrypted
  std::string ca;    ///< PEM CA certificate(s) the other side's certificate must chain to
  /// Dialling a node (a peer link, a call, a Raft connection, the CLI), require its
  /// certificate to carry the host dialled in a subjectAltName (IP for an address, DNS for a
  /// name): --tls-check-host. The accepting side has no dialled address to check.
  bool check_host = false;

  /// Any of the three set (check_tls_options wants all three then).
  bool enabled() const noexcept { return !cert.empty() || !key.empty() || !ca.empty(); }
};

/// "" when `o` is empty, or when all three are set, readable, hold what they should and the
/// key belongs to the certificate; otherwise one line naming the option and file, e.g.
/// "cannot read --tls-key /etc/proctor/a.key: No such file or directory".
std::string check_tls_options(const tls_options& o);

/// A TLS context presenting o.cert/o.key and requiring the other side's certificate to chain
/// to o.ca (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT), TLS 1.2 at least. nullptr
/// and a one-line `*why` (as check_tls_options) when a file does not do. Free it with
/// SSL_CTX_free.
ssl_ctx_st* make_tls_context(const tls_options& o, std::string* why);

/// With o.check_host: from now on `ssl` refuses the other side's certificate unless a
/// subjectAltName of it carries `host` (an IPv4/IPv6 address, matched as IP; anything else
/// as a DNS name, no partial wildcards). "" or one line why `host` cannot be checked.
/// Without o.check_host, or for an empty `host`, does nothing.
std::string expect_peer_host(ssl_st* ssl, const tls_options& o, const std::string& host);

/// The reason of OpenSSL's latest error on this thread ("certificate verify failed"), or
/// `fallback` when there is none; clears the thread's error queue.
std::string tls_error_text(const std::string& fallback);

/// From now on, when `ssl` refuses the other side's certificate, `*out` (if still empty)
/// names it: its subject and issuer and why ("CN=x issued by CN=y: unable to get local
/// issuer certificate"), for the log line or error that reports the refusal.
/// `out` must outlive the handshake. Keeps `ssl`'s verify mode.
void note_refused_certificate(ssl_st* ssl, std::string* out);

/// From now on (with note_refused_certificate called before), `ssl` refuses the other
/// side's certificate unless it names node `*node` (tls/cert_identity.hpp; "": any node),
/// noting why as note_refused_certificate does. `node` must outlive the handshake; nullptr:
/// no such check.
void expect_peer_node(ssl_st* ssl, const std::string* node);

}  // namespace proctor
