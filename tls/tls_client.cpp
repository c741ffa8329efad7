#include "tls/tls_client.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace proctor {

namespace {

/// OpenSSL writes to the socket with write(), not send(MSG_NOSIGNAL): a closed connection
/// would raise SIGPIPE and end the process (the CLI; a node's procedure calling another
/// node). Blocked for the call, and a SIGPIPE it raised is taken before unblocking (as CAF's
/// OpenSSL session does).
class sigpipe_guard {
public:
  sigpipe_guard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &saved_);
  }
  ~sigpipe_guard() {
    timespec zero{};
    while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

private:
  sigset_t pipe_, saved_;
};

}  // namespace

std::unique_ptr<tls_client_session>
tls_client_session::make(const tls_options& o, int fd, const std::string& host, std::string* why) {
  auto* ctx = make_tls_context(o, why);
  if (ctx == nullptr)
    return nullptr;
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1) {
    *why = "cannot start a TLS session: " + tls_error_text("out of memory");
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return nullptr;
  }
  SSL_set_connect_state(ssl);
  std::unique_ptr<tls_client_session> out{new tls_client_session(ctx, ssl)};
  note_refused_certificate(ssl, &out->refused_);
  if (auto bad = expect_peer_host(ssl, o, host); !bad.empty()) {
    *why = bad;
    return nullptr;
  }
  return out;
}

tls_client_session::~tls_client_session() {
  SSL_free(ssl_);
  SSL_CTX_free(ctx_);
}

tls_client_session::step tls_client_session::result_of(int ret) {
  int saved_errno = errno;
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      return step::want_read;
    case SSL_ERROR_WANT_WRITE:
      return step::want_write;
    case SSL_ERROR_ZERO_RETURN:
      return step::closed;
    case SSL_ERROR_SYSCALL:
      if (ERR_peek_error() == 0) {
        if (saved_errno == 0 || saved_errno == ECONNRESET || saved_errno == EPIPE)
          return step::closed;
        error_ = std::strerror(saved_errno);
        return step::failed;
      }
      [[fallthrough]];
    default: {
      error_ = tls_error_text("unknown TLS error");
      auto verify = SSL_get_verify_result(ssl_);
      if (!refused_.empty())
        error_ += ": the node's certificate " + refused_;
      else if (verify != X509_V_OK)
        error_ += ": the node's certificate: " + std::string{X509_verify_cert_error_string(verify)};
      return step::failed;
    }
  }
}

tls_client_session::step tls_client_session::handshake() {
  sigpipe_guard guard;
  ERR_clear_error();
  errno = 0;
  int ret = SSL_connect(ssl_);
  return ret == 1 ? step::done : result_of(ret);
}

tls_client_session::step tls_client_session::write(const char* buf, size_t len, size_t* n) {
  sigpipe_guard guard;
  ERR_clear_error();
  errno = 0;
  *n = 0;
  int ret = SSL_write(ssl_, buf, static_cast<int>(std::min<size_t>(len, INT_MAX)));
  if (ret > 0) {
    *n = static_cast<size_t>(ret);
    return step::done;
  }
  return result_of(ret);
}

tls_client_session::step tls_client_session::read(char* buf, size_t len, size_t* n) {
  sigpipe_guard guard;
  ERR_clear_error();
  errno = 0;
  *n = 0;
  int ret = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(len, INT_MAX)));
  if (ret > 0) {
    *n = static_cast<size_t>(ret);
    return step::done;
  }
  return result_of(ret);
}

}  // namespace proctor
