// libraft's transport over mutual TLS: the node's --tls-cert/--tls-key/--tls-ca (docs/tls.md)
// protect the Raft port too.
//
// libraft's uv I/O reads and writes its messages on a uv_stream_t that the transport hands
// it, and libuv streams cannot be user-defined. So each connection is a tunnel: a TCP
// connection carrying TLS (OpenSSL with memory BIOs, driven by this loop), and a Unix socket
// pair, one end of which is libraft's stream while this transport pumps the other end through
// the TLS connection. raft_uv_tcp sends a plaintext handshake (protocol, server id, address)
// before anything else; here the equivalent preamble goes inside TLS, so nothing reaches
// libraft from a peer whose certificate was not verified.
//
// What is checked is what the node checks on its own connections: both sides present a
// certificate that chains to the other's CA (SSL_VERIFY_PEER | FAIL_IF_NO_PEER_CERT); host
// names are not. A connection that has not finished its handshake and preamble within 10 s
// is closed. Refused connections are logged (at most one line per peer address per 10 s).
//
// Threading: the Raft loop thread only, like every libuv object.
#pragma once

#include <memory>

#include "replication/raft_c.hpp"
#include "tls/tls_in_use.hpp"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace proctor {

struct tls_transport;

/// A transport on `loop` whose connections use `ctx` (a context that presents this
/// replica's certificate and verifies the peer's, make_tls_context), and refuse a peer whose
/// certificate does not name node `peer_node` ("": any node; tls/tls_options.hpp), and
/// with `check_host` (--tls-check-host) a peer it dials whose certificate does not carry the
/// host dialled (expect_peer_host).
tls_transport* tls_transport_new(struct uv_loop_s* loop, std::shared_ptr<ssl_ctx_st> ctx,
                                 std::string peer_node,
                                 std::shared_ptr<tls_context_slot> reload = nullptr,
                                 bool check_host = false);

/// What raft_uv_init is given.
struct raft_uv_transport* tls_transport_uv(tls_transport* t);

/// Releases `t`, once libraft has closed it (after raft_close's callback), or if it was never
/// given to libraft.
void tls_transport_free(tls_transport* t);

}  // namespace proctor
