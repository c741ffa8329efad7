// One connection of libraft's TLS transport (raft_tls_transport.hpp): a TCP connection carrying
// TLS (OpenSSL with memory BIOs, driven by the Raft loop) and a Unix socket pair, one end of
// which is libraft's stream while the tunnel pumps the other end through TLS; before libraft
// gets the stream, the preamble (magic, server id, address) is exchanged inside TLS. The
// transport (raft_tls_transport.cpp) listens and connects, and hands each connection to a
// tunnel. Internal to replication/.
//
// Threading: the Raft loop thread only, like every libuv object.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <openssl/ssl.h>
#include <uv.h>

#include "replication/raft_c.hpp"
#include "tls/tls_in_use.hpp"

namespace proctor {

struct tunnel;

struct tls_transport {
  struct raft_uv_transport uv {};
  uv_loop_t* loop = nullptr;
  std::shared_ptr<SSL_CTX> ctx;
  std::string peer_node;  // every peer's certificate names this node ("": any node)
  std::shared_ptr<tls_context_slot> reload;  // if set: its current context, not ctx
  bool check_host = false;                   // --tls-check-host: see tunnel::host
  raft_id id = 0;
  std::string address;
  uv_tcp_t listener{};
  bool listener_open = false;     // until its close callback
  bool listener_closing = false;  // uv_close called
  raft_uv_accept_cb accept_cb = nullptr;
  raft_uv_transport_close_cb close_cb = nullptr;
  bool closing = false;
  bool close_fired = false;
  std::set<tunnel*> tunnels;
  std::map<std::string, std::chrono::steady_clock::time_point> logged;  // rate limit, per peer
};

/// One connection: TCP with TLS on one side, libraft's end of a socket pair on the other.
struct tunnel {
  enum class state { connecting, handshaking, open, closing };

  tls_transport* t = nullptr;
  bool outgoing = false;
  state st = state::connecting;
  std::string peer;     // for the log: "to ADDRESS", or "from HOST:PORT"
  std::string log_key;  // rate limit: "to ADDRESS", or "from HOST"
  std::string host;     // outgoing: the host dialled, its certificate's to carry (check_host)

  uv_tcp_t tcp{};
  uv_pipe_t pipe{};  // our end of the socket pair, once open
  uv_timer_t timer{};
  bool pipe_open = false;
  int handles = 0;  // open handles: closing ends when none is left
  uv_connect_t connect_req{};

  SSL* ssl = nullptr;
  std::string refused;  // the peer's certificate, if refused (note_refused_certificate)
  BIO* rbio = nullptr;  // TLS bytes from the network, for OpenSSL (owned by ssl)
  BIO* wbio = nullptr;  // TLS bytes from OpenSSL, for the network (owned by ssl)

  struct raft_uv_connect* req = nullptr;  // outgoing, until its callback ran
  std::string preamble;                   // incoming: plaintext read so far, before open
};

/// Calls libraft's close callback once nothing of the transport is open any more.
void maybe_fire_close(tls_transport* t);

/// Creates a tunnel with its TCP handle and handshake timer (both open) on `t`'s loop; it
/// closes itself if its handshake and preamble are not done within 10 s.
tunnel* new_tunnel(tls_transport* t, bool outgoing);

/// Starts TLS on `c`'s connected TCP stream (an outgoing tunnel sends its ClientHello).
bool start_tls(tunnel* c);

/// Closes `c`; once its handles closed, libraft's connect request (if any) is answered and
/// `c` freed.
void close_tunnel(tunnel* c);

}  // namespace proctor
