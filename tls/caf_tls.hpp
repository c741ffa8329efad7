// A node's sockets over TLS (docs/tls.md), with CAF's OpenSSL module (libcaf_openssl).
//
// CAF's caf::openssl::session takes its certificate, key and CA from the actor system's
// config (openssl_certificate, openssl_key, openssl_cafile), needs caf::openssl::manager
// loaded, and with them set requires a certificate from the other side that chains to the
// CA (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT), on accepted and connected sockets
// alike; it checks no host name. So TLS is a property of the actor system: configure_tls
// before the system is built, and every socket of the client protocol that system opens
// (client_server's listener, peer_link's links, a procedure's call to another node) speaks
// TLS. What CAF's session leaves to us: it reads the three files again for each connection
// and throws when one went bad meanwhile (caught here: that connection is refused and
// logged), and it reports nothing but through CAF's logger, which nodes keep quiet (refused
// handshakes are logged here, with OpenSSL's reason).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <caf/all.hpp>
#include <caf/io/fwd.hpp>

#include "tls/cert_identity.hpp"
#include "tls/tls_options.hpp"

namespace proctor {

/// Sets `cfg` up for mutual TLS with `tls` (check_tls_options first: CAF only finds a bad
/// file at the first connection), or leaves it alone when `tls` is empty. Needs the
/// middleman loaded before.
void configure_tls(caf::actor_system_config& cfg, const tls_options& tls);

/// Whether `sys` was configured by configure_tls with options.
bool tls_enabled(const caf::actor_system& sys);

/// The options `sys` was configured with (empty without TLS), for the blocking client.
tls_options tls_options_of(const caf::actor_system& sys);

/// A listening socket on host:port (0: any) whose connections speak TLS, for a broker's
/// add_doorman. A connection is handed to the broker at once; one whose handshake fails
/// is logged and closed (the broker sees connection_closed_msg).
caf::expected<caf::io::doorman_ptr> new_tls_doorman(caf::actor_system& sys, uint16_t port,
                                                    const std::string& host);

/// The client end of TLS over `fd`, a connected nonblocking socket (taken over, closed on
/// failure), for a broker's add_scribe. `peer` ("node b at 10.0.0.2:7002") names the other
/// side in logs. With `expected_node` set, the handshake fails (logged) unless the other
/// side's certificate names that node (tls/cert_identity.hpp); with --tls-check-host
/// (tls_options::check_host) and `dialled_host` set, unless it carries that host.
caf::expected<caf::io::scribe_ptr> new_tls_scribe(caf::actor_system& sys, int fd,
                                                  const std::string& peer,
                                                  const std::string& expected_node = {},
                                                  const std::string& dialled_host = {});

/// The identity the certificate of the other side of TLS connection `hdl` names, once its
/// handshake is over (a connection's first bytes come after it); nullopt for a connection
/// that is not TLS or not known here.
std::optional<cert_identity> tls_peer_identity(caf::io::connection_handle hdl);

}  // namespace proctor
