// The client end of a TLS connection over a connected, nonblocking socket, for the blocking
// client (wire_client.hpp). It never polls: each call says whether it got on or what the
// socket must become ready for, and the caller polls with its own deadlines.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tls/tls_options.hpp"

struct ssl_st;  // OpenSSL's SSL

namespace proctor {

class tls_client_session {
public:
  enum class step : unsigned char {
    done,        ///< handshake finished / bytes moved (`*n`)
    want_read,   ///< poll for POLLIN, then call again
    want_write,  ///< poll for POLLOUT, then call again
    closed,      ///< the other side closed the connection
    failed,      ///< see error()
  };

  /// A session over `fd` (not owned) with the context of `o` (make_tls_context), to `host`
  /// (checked with o.check_host: expect_peer_host); nullptr and `*why` when the options do
  /// not do.
  static std::unique_ptr<tls_client_session> make(const tls_options& o, int fd,
                                                  const std::string& host, std::string* why);
  ~tls_client_session();
  tls_client_session(const tls_client_session&) = delete;
  tls_client_session& operator=(const tls_client_session&) = delete;

  /// One step of SSL_connect: done once the server's certificate is verified and ours sent.
  /// With TLS 1.3 the server's verdict on ours comes later, with the first read.
  step handshake();
  step write(const char* buf, size_t len, size_t* n);
  step read(char* buf, size_t len, size_t* n);

  /// Why the last call failed, one line ("certificate verify failed: unable to get local
  /// issuer certificate", "tlsv13 alert certificate required").
  const std::string& error() const noexcept { return error_; }

private:
  tls_client_session(ssl_ctx_st* ctx, ssl_st* ssl) : ctx_(ctx), ssl_(ssl) {}
  step result_of(int ret);

  ssl_ctx_st* ctx_;
  ssl_st* ssl_;
  std::string error_;
  std::string refused_;  ///< the node's certificate, if refused (note_refused_certificate)
};

}  // namespace proctor
