#include "replication/raft_tls_tunnel.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <uv.h>

#include "tls/tls_options.hpp"

namespace proctor {

namespace {

/// The preamble a connecting replica sends inside TLS: magic, its id, the length of its
/// address, the address (raft_uv_tcp's handshake, with a magic of our own: only Proctor's
/// TLS transport speaks it).
constexpr uint64_t preamble_magic = 0x3154464152544350ull;  // "PCTRAFT1", little-endian
constexpr size_t preamble_fixed = 24;
constexpr size_t max_address = 1024;
constexpr uint64_t handshake_timeout_ms = 10000;
constexpr size_t read_chunk = 64 * 1024;

void put64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t get64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

tunnel* of(uv_handle_t* h) {
  return static_cast<tunnel*>(h->data);
}

void fail(tunnel* c, const std::string& why);

}  // namespace

void maybe_fire_close(tls_transport* t) {
  if (!t->closing || t->close_fired || t->listener_open || !t->tunnels.empty())
    return;
  t->close_fired = true;
  if (t->close_cb != nullptr)
    t->close_cb(&t->uv);
}

namespace {

/// Logs why a connection was refused or dropped: at most one line per peer host (or address
/// dialled) per 10 s, since libraft reconnects every second.
void log_refusal(tunnel* c, const std::string& why) {
  tls_transport* t = c->t;
  auto now = std::chrono::steady_clock::now();
  auto it = t->logged.find(c->log_key);
  if (it != t->logged.end() && now - it->second < std::chrono::seconds(10))
    return;
  t->logged[c->log_key] = now;
  spdlog::warn("raft transport {}: TLS connection {} failed: {}; connection closed", t->address,
               c->peer, why);
}

struct write_req {
  uv_write_t w;
  std::unique_ptr<char[]> data;
  tunnel* c;
};

void on_written(uv_write_t* w, int status) {
  std::unique_ptr<write_req> r(static_cast<write_req*>(w->data));
  tunnel* c = r->c;
  if (status < 0 && status != UV_ECANCELED && c->st != tunnel::state::closing)
    fail(c, std::string("write: ") + uv_strerror(status));
}

/// Queues the first `n` bytes of `data` on `stream`, which keeps them until written.
bool write_to(tunnel* c, uv_stream_t* stream, std::unique_ptr<char[]> data, size_t n) {
  auto r = std::make_unique<write_req>();
  r->data = std::move(data);
  r->c = c;
  r->w.data = r.get();
  uv_buf_t buf = uv_buf_init(r->data.get(), static_cast<unsigned>(n));
  if (int rv = uv_write(&r->w, stream, &buf, 1, on_written); rv != 0) {
    fail(c, std::string("write: ") + uv_strerror(rv));
    return false;
  }
  (void)r.release();  // on_written owns it now (through w.data)
  return true;
}

/// Queues a copy of `n` bytes of `data` (a small buffer's worth: a read's plaintext) on `stream`.
bool write_copy(tunnel* c, uv_stream_t* stream, const char* data, size_t n) {
  auto copy = std::make_unique<char[]>(n);
  std::memcpy(copy.get(), data, n);
  return write_to(c, stream, std::move(copy), n);
}

/// Sends what OpenSSL has written to its memory BIO (read straight into the write's buffer).
bool flush_tls(tunnel* c) {
  size_t pending = BIO_ctrl_pending(c->wbio);
  if (pending == 0)
    return true;
  auto buf = std::make_unique<char[]>(pending);
  int n = BIO_read(c->wbio, buf.get(), static_cast<int>(pending));
  if (n <= 0)
    return true;
  return write_to(c, reinterpret_cast<uv_stream_t*>(&c->tcp), std::move(buf),
                  static_cast<size_t>(n));
}

void on_handle_closed(uv_handle_t* h) {
  tunnel* c = of(h);
  if (--c->handles > 0)
    return;
  tls_transport* t = c->t;
  if (c->req != nullptr) {
    auto* req = c->req;
    c->req = nullptr;
    req->cb(req, nullptr, t->closing ? RAFT_CANCELED : RAFT_NOCONNECTION);
  }
  if (c->ssl != nullptr)
    SSL_free(c->ssl);
  t->tunnels.erase(c);
  delete c;
  maybe_fire_close(t);
}

}  // namespace

void close_tunnel(tunnel* c) {
  if (c->st == tunnel::state::closing)
    return;
  c->st = tunnel::state::closing;
  uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), on_handle_closed);
  if (c->pipe_open)
    uv_close(reinterpret_cast<uv_handle_t*>(&c->pipe), on_handle_closed);
}

namespace {

void fail(tunnel* c, const std::string& why) {
  if (c->st == tunnel::state::closing)
    return;
  // Once open, a closed connection is ordinary (a peer restarting, libraft reconnecting).
  if (c->st != tunnel::state::open)
    log_refusal(c, why);
  close_tunnel(c);
}

void alloc_buf(uv_handle_t*, size_t, uv_buf_t* buf) {
  buf->base = new char[read_chunk];
  buf->len = read_chunk;
}

/// libraft wrote to its end of the pair: encrypt and send.
void on_pipe_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  tunnel* c = of(reinterpret_cast<uv_handle_t*>(s));
  if (nread > 0 && c->st == tunnel::state::open) {
    ERR_clear_error();
    // With memory BIOs and no partial writes, SSL_write takes everything or fails.
    if (SSL_write(c->ssl, buf->base, static_cast<int>(nread)) != nread)
      fail(c, tls_error_text("TLS write failed"));
    else
      flush_tls(c);
  } else if (nread < 0) {
    close_tunnel(c);  // libraft closed its stream
  }
  delete[] buf->base;
}

/// The connection is authenticated and its preamble exchanged: libraft gets its stream.
void open_tunnel(tunnel* c, raft_id peer_id, const std::string& peer_address) {
  tls_transport* t = c->t;
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    fail(c, std::string("socketpair: ") + std::strerror(errno));
    return;
  }
  uv_pipe_init(t->loop, &c->pipe, 0);
  c->pipe.data = c;
  c->pipe_open = true;
  ++c->handles;
  auto* theirs = static_cast<uv_pipe_t*>(raft_malloc(sizeof(uv_pipe_t)));
  if (theirs == nullptr || uv_pipe_open(&c->pipe, fds[0]) != 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    raft_free(theirs);
    fail(c, "cannot open the socket pair");
    return;
  }
  uv_pipe_init(t->loop, theirs, 0);
  if (uv_pipe_open(theirs, fds[1]) != 0) {
    ::close(fds[1]);
    // libraft frees the streams it is given in their close callback: so do we here.
    uv_close(reinterpret_cast<uv_handle_t*>(theirs), [](uv_handle_t* h) { raft_free(h); });
    fail(c, "cannot open the socket pair");
    return;
  }
  uv_timer_stop(&c->timer);
  uv_read_start(reinterpret_cast<uv_stream_t*>(&c->pipe), alloc_buf, on_pipe_read);
  c->st = tunnel::state::open;
  auto* stream = reinterpret_cast<uv_stream_t*>(theirs);
  if (c->outgoing) {
    auto* req = c->req;
    c->req = nullptr;
    req->cb(req, stream, 0);
  } else {
    t->accept_cb(&t->uv, peer_id, peer_address.c_str(), stream);
  }
  // Plaintext that came with the preamble belongs to libraft.
  if (!c->preamble.empty() && c->st == tunnel::state::open) {
    std::string rest;
    rest.swap(c->preamble);
    write_copy(c, reinterpret_cast<uv_stream_t*>(&c->pipe), rest.data(), rest.size());
  }
}

/// An incoming connection's preamble, once whole: open the tunnel (garbage closes it).
void take_preamble(tunnel* c) {
  if (c->preamble.size() < preamble_fixed)
    return;
  const char* p = c->preamble.data();
  if (get64(p) != preamble_magic) {
    fail(c, "not a Proctor Raft replica (bad preamble)");
    return;
  }
  uint64_t id = get64(p + 8);
  uint64_t len = get64(p + 16);
  if (len == 0 || len > max_address) {
    fail(c, "bad preamble (address of " + std::to_string(len) + " bytes)");
    return;
  }
  if (c->preamble.size() < preamble_fixed + len)
    return;
  std::string address(p + preamble_fixed, len);
  c->preamble.erase(0, preamble_fixed + len);
  c->peer =
    "from replica " + std::to_string(id) + " at " + address + " (" + c->peer.substr(5) + ")";
  open_tunnel(c, id, address);
}

/// Decrypts what arrived: for libraft once open, else the preamble.
void pump_in(tunnel* c) {
  char buf[16 * 1024];
  for (;;) {
    if (c->st == tunnel::state::closing)
      return;
    ERR_clear_error();
    int n = SSL_read(c->ssl, buf, sizeof(buf));
    if (n > 0) {
      if (c->st == tunnel::state::open) {
        if (!write_copy(c, reinterpret_cast<uv_stream_t*>(&c->pipe), buf, static_cast<size_t>(n)))
          return;
      } else if (!c->outgoing) {
        c->preamble.append(buf, static_cast<size_t>(n));
        take_preamble(c);
      }
      continue;
    }
    int err = SSL_get_error(c->ssl, n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
      break;
    if (err != SSL_ERROR_ZERO_RETURN) {
      // Also once open: with TLS 1.3 a client finishes its handshake before the server has
      // checked the client's certificate, and hears of a refusal only as an alert here.
      log_refusal(c, tls_error_text("TLS read failed"));
    }
    close_tunnel(c);
    return;
  }
  flush_tls(c);
}

void handshake_done(tunnel* c) {
  if (c->outgoing) {
    std::string pre;
    put64(&pre, preamble_magic);
    put64(&pre, c->t->id);
    put64(&pre, c->t->address.size());
    pre += c->t->address;
    ERR_clear_error();
    if (SSL_write(c->ssl, pre.data(), static_cast<int>(pre.size()))
        != static_cast<int>(pre.size())) {
      fail(c, tls_error_text("TLS write failed"));
      return;
    }
    if (!flush_tls(c))
      return;
    open_tunnel(c, 0, {});
  }
  // Incoming: the preamble follows (pump_in).
}

void drive_handshake(tunnel* c) {
  ERR_clear_error();
  int rv = SSL_do_handshake(c->ssl);
  if (!flush_tls(c))
    return;
  if (rv == 1) {
    handshake_done(c);
    return;
  }
  int err = SSL_get_error(c->ssl, rv);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
    return;
  std::string why = tls_error_text("TLS handshake failed");
  long verify = SSL_get_verify_result(c->ssl);
  if (verify != X509_V_OK)
    why += std::string(": ") + X509_verify_cert_error_string(verify);
  if (!c->refused.empty())
    why += ": its certificate " + c->refused;
  fail(c, why);
}

void on_tcp_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) {
  tunnel* c = of(reinterpret_cast<uv_handle_t*>(s));
  if (nread > 0 && c->st != tunnel::state::closing) {
    BIO_write(c->rbio, buf->base, static_cast<int>(nread));
    if (c->st == tunnel::state::handshaking && !SSL_is_init_finished(c->ssl))
      drive_handshake(c);
    if (c->st != tunnel::state::closing && SSL_is_init_finished(c->ssl))
      pump_in(c);
  } else if (nread < 0) {
    if (c->st == tunnel::state::open)
      close_tunnel(c);
    else
      fail(c, nread == UV_EOF ? std::string("connection closed during the TLS handshake")
                              : std::string(uv_strerror(static_cast<int>(nread))));
  }
  delete[] buf->base;
}

void on_timeout(uv_timer_t* timer) {
  fail(of(reinterpret_cast<uv_handle_t*>(timer)), "no TLS handshake and preamble within "
                                                    + std::to_string(handshake_timeout_ms / 1000)
                                                    + " s");
}

}  // namespace

/// Creates a tunnel with its TCP handle and handshake timer (both open).
tunnel* new_tunnel(tls_transport* t, bool outgoing) {
  auto* c = new tunnel{};
  c->t = t;
  c->outgoing = outgoing;
  uv_tcp_init(t->loop, &c->tcp);
  c->tcp.data = c;
  uv_timer_init(t->loop, &c->timer);
  c->timer.data = c;
  c->handles = 2;
  t->tunnels.insert(c);
  uv_timer_start(&c->timer, on_timeout, handshake_timeout_ms, 0);
  return c;
}

/// Starts TLS on `c`'s connected TCP stream.
bool start_tls(tunnel* c) {
  uv_tcp_nodelay(&c->tcp, 1);  // latency (raft_transport.hpp); a failure only costs that
  // A reload (SIGHUP) replaces the context for connections made after it.
  std::shared_ptr<SSL_CTX> ctx = c->t->reload ? c->t->reload->current.load() : nullptr;
  c->ssl = SSL_new(ctx ? ctx.get() : c->t->ctx.get());
  c->rbio = BIO_new(BIO_s_mem());
  c->wbio = BIO_new(BIO_s_mem());
  if (c->ssl == nullptr || c->rbio == nullptr || c->wbio == nullptr) {
    if (c->ssl == nullptr) {
      BIO_free(c->rbio);
      BIO_free(c->wbio);
    }
    fail(c, "cannot create the TLS session");
    return false;
  }
  SSL_set_bio(c->ssl, c->rbio, c->wbio);
  note_refused_certificate(c->ssl, &c->refused);
  expect_peer_node(c->ssl, &c->t->peer_node);
  if (c->outgoing && c->t->check_host) {
    tls_options check;
    check.check_host = true;
    if (auto bad = expect_peer_host(c->ssl, check, c->host); !bad.empty()) {
      fail(c, bad);
      return false;
    }
  }
  if (c->outgoing)
    SSL_set_connect_state(c->ssl);
  else
    SSL_set_accept_state(c->ssl);
  c->st = tunnel::state::handshaking;
  if (int rv = uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), alloc_buf, on_tcp_read);
      rv != 0) {
    fail(c, std::string("read: ") + uv_strerror(rv));
    return false;
  }
  if (c->outgoing)
    drive_handshake(c);  // the ClientHello
  return true;
}

}  // namespace proctor
