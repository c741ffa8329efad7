// A blocking client of a node's client protocol (proto/WIRE.md): one request, one response,
// over a fresh TCP connection. POSIX sockets and poll only (no CAF), so the CLI runs no
// actor system; nodes call it from a detached actor (a procedure's call to another node).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "tls/tls_options.hpp"

namespace proctor {

/// How one round trip ended.
struct wire_result {
  enum class kind : uint8_t {
    reply,        ///< `reply` holds the node's serialized pb::Response
    unreachable,  ///< no connection (refused, unknown host, no answer to the connect)
    dropped,      ///< connected, but the connection ended before a whole reply came
    no_answer,    ///< connected and sent, but no reply within the reply timeout
    cancelled,    ///< `cancel` was set while waiting
  };
  kind what = kind::unreachable;
  std::string reply;
  std::string reason;  ///< one line saying why there is no reply (otherwise)

  bool ok() const noexcept { return what == kind::reply; }
};

struct wire_call_options {
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds reply_timeout{30'000};
  /// Largest reply accepted (a list of many procedures is large; garbage lengths are not).
  size_t max_reply_bytes = size_t{64} << 20;
  /// When set, checked every 100 ms: a caller that no longer wants the answer (an actor
  /// exiting) stops waiting.
  const std::atomic<bool>* cancel = nullptr;
  /// When enabled, the call speaks TLS (docs/tls.md): this certificate is presented, the
  /// node's must chain to tls.ca, and the handshake is bounded by connect_timeout.
  tls_options tls;
};

/// A nonblocking TCP socket connected to host:port (a name, IPv4 or IPv6 literal; each
/// address tried in turn within `timeout`), with TCP_NODELAY; or -1 and a one-line `*why`.
/// A node's links to its peers connect with it and hand the socket to CAF.
int wire_connect(const std::string& host, uint16_t port, std::chrono::milliseconds timeout,
                 std::string* why);

/// Connects to host:port (a name, IPv4 or IPv6 literal), sends `request` (a serialized
/// pb::Request) as one frame, reads one frame back and closes the connection. A refused TLS
/// handshake is `unreachable`, with the reason "TLS handshake with HOST:PORT failed: ...".
wire_result wire_call(const std::string& host, uint16_t port, std::string_view request,
                      const wire_call_options& opts = {});

}  // namespace proctor
