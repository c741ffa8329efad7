// The doorman, scribe and stream policy below are adapted from CAF 0.17.6's
// libcaf_openssl/src/openssl/middleman_actor.cpp (ssl_policy, scribe_impl, doorman_impl;
// Copyright 2011-2018 Dominik Charousset, BSD 3-Clause or Boost Software License 1.0). Ours
// add: handshake failures logged with OpenSSL's reason, CAF's exceptions for files gone bad
// caught, TCP_NODELAY on accepted sockets.
#include "tls/caf_tls.hpp"

#include <unistd.h>

#include <exception>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include <caf/detail/socket_guard.hpp>
#include <caf/io/all.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/session.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

namespace proctor {

namespace {

namespace net = caf::io::network;
using net::native_socket;
using net::rw_state;

/// CAF 0.17's session keeps its SSL object private and sets no verify callback, and OpenSSL
/// says which certificate it refused only to one. An explicit instantiation may name a
/// private member ([temp.spec.general]/6): so `session::ssl_` is read here without assuming
/// the class's layout, to add the callback (note_refused_certificate).
struct session_ssl {
  using type = SSL* caf::openssl::session::*;
  friend type member_of(session_ssl);
};
template <class Tag, typename Tag::type M>
struct expose {
  friend typename Tag::type member_of(Tag) { return M; }
};
template struct expose<session_ssl, &caf::openssl::session::ssl_>;

/// "127.0.0.1:45678", or "an unknown address".
std::string remote_of(native_socket fd) {
  auto host = net::remote_addr_of_fd(fd);
  auto port = net::remote_port_of_fd(fd);
  if (!host || !port)
    return "an unknown address";
  return (host->find(':') != std::string::npos ? "[" + *host + "]" : *host) + ":"
         + std::to_string(*port);
}

/// The identities of the accepted and connected TLS connections' other sides, by connection
/// handle (a socket's number: unique while it is open). A scribe enters its own once its
/// handshake is over and takes it out when it goes, before its socket's number can be reused.
struct identity_table {
  std::mutex mutex;
  std::unordered_map<int64_t, std::pair<const void*, cert_identity>> by_hdl;
};

identity_table& identities() {
  static identity_table t;
  return t;
}

/// What a connection's policy and scribe share: whether the handshake is over (the first
/// application byte moved) or its failure logged.
struct handshake_state {
  std::string peer;  ///< names the other side in logs
  bool over = false;
  std::string refused;        ///< the other side's certificate, if refused (subject, issuer, why)
  std::string expected_node;  ///< the node the other side's certificate must name, if set
  int64_t hdl = -1;           ///< the connection's handle, entered into identities()

  /// The handshake succeeded: the other side's identity is entered for the broker.
  void succeeded(SSL* ssl) {
    over = true;
    std::string why;
    X509* cert = SSL_get1_peer_certificate(ssl);
    auto id = identity_of(cert, &why);
    X509_free(cert);
    if (!why.empty())
      spdlog::warn("TLS with {}: its certificate names no usable identity ({}); it may act as "
                   "an anonymous client only",
                   peer, why);
    std::lock_guard<std::mutex> lock{identities().mutex};
    identities().by_hdl[hdl] = {this, std::move(id)};
  }
  /// The connection is gone: its identity with it.
  void forget() const {
    std::lock_guard<std::mutex> lock{identities().mutex};
    auto& t = identities().by_hdl;
    if (auto i = t.find(hdl); i != t.end() && i->second.first == this)
      t.erase(i);
  }

  void fail(const std::string& why) {
    if (over)
      return;
    over = true;
    if (refused.empty())
      spdlog::warn("TLS with {} failed: {}; connection closed", peer, why);
    else
      spdlog::warn("TLS with {} failed: {}: its certificate {}; connection closed", peer, why,
                   refused);
  }
};

/// `s`, which notes in `hs` the other side's certificate should it refuse it.
caf::openssl::session_ptr noting(caf::openssl::session_ptr s, handshake_state* hs) {
  SSL* ssl = s.get()->*member_of(session_ssl{});
  note_refused_certificate(ssl, &hs->refused);
  expect_peer_node(ssl, hs->expected_node.empty() ? nullptr : &hs->expected_node);
  return s;
}

/// Hands the stream's reads and writes to CAF's session; until the first application byte
/// moved, a failure is a refused handshake and is logged.
class tls_policy {
public:
  tls_policy(caf::openssl::session_ptr session, handshake_state* hs)
      : session_(std::move(session)), hs_(hs) {}

  rw_state read_some(size_t& result, native_socket fd, void* buf, size_t len) {
    // CAF's session leaves OpenSSL's error queue to us (its own logging is compiled out).
    ERR_clear_error();
    auto r = session_->read_some(result, fd, buf, len);
    return note(r, result);
  }

  rw_state write_some(size_t& result, native_socket fd, const void* buf, size_t len) {
    ERR_clear_error();
    auto r = session_->write_some(result, fd, buf, len);  // before `result` is read
    return note(r, result);
  }

  bool must_read_more(native_socket fd, size_t threshold) {
    return session_->must_read_more(fd, threshold);
  }

private:
  rw_state note(rw_state r, size_t moved) {
    if (r == rw_state::failure)
      hs_->fail(tls_error_text("closed during the handshake"));
    else if (moved > 0 && !hs_->over)
      hs_->succeeded(session_.get()->*member_of(session_ssl{}));
    return r;
  }

  caf::openssl::session_ptr session_;
  handshake_state* hs_;
};

class tls_scribe : public caf::io::scribe {
public:
  tls_scribe(net::default_multiplexer& mpx, native_socket fd, caf::openssl::session_ptr s,
             std::string peer, std::string expected_node)
      : scribe(net::conn_hdl_from_socket(fd)), hs_{std::move(peer),
                                                   false,
                                                   {},
                                                   std::move(expected_node),
                                                   static_cast<int64_t>(fd)},
        stream_(mpx, fd, noting(std::move(s), &hs_), &hs_) {}
  ~tls_scribe() override { hs_.forget(); }
  tls_scribe(const tls_scribe&) = delete;
  tls_scribe& operator=(const tls_scribe&) = delete;

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_)
      launch();
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = net::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string{};
  }
  uint16_t port() const override {
    auto x = net::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

protected:
  // The connection is gone. A socket error (a reset, a hang-up) gets here without passing
  // the policy: one during the handshake is logged here.
  caf::message detach_message() override {
    hs_.fail("the connection ended during the handshake");
    hs_.forget();
    return scribe::detach_message();
  }

private:
  void launch() {
    launched_ = true;
    stream_.start(this);
    // Schedules the scribe for writing while SSL_connect or SSL_accept still has to run;
    // otherwise the multiplexer drops the socket from its write set after this empty write.
    stream_.force_empty_write(this);
  }

  handshake_state hs_;
  bool launched_ = false;
  net::stream_impl<tls_policy> stream_;
};

/// A session over `fd`, or nullptr and `*why` (logged: `what` names the connection).
caf::openssl::session_ptr make_session(caf::actor_system& sys, native_socket fd, bool accepted,
                                       const std::string& what, std::string* why,
                                       const std::string& expected_node = {},
                                       const std::string& dialled_host = {}) {
  ERR_clear_error();
  try {
    // caf::openssl::make_session, with the verify callback set before the handshake's first
    // step: under load the other side's certificate may arrive, and be refused, within it.
    caf::openssl::session_ptr s{new caf::openssl::session(sys)};
    std::string refused;  // noted here until the scribe's own handshake_state takes over
    bool ok = s->init();
    if (ok) {
      note_refused_certificate(s.get()->*member_of(session_ssl{}), &refused);
      expect_peer_node(s.get()->*member_of(session_ssl{}),
                       expected_node.empty() ? nullptr : &expected_node);
      if (auto bad =
            expect_peer_host(s.get()->*member_of(session_ssl{}), tls_options_of(sys), dialled_host);
          !bad.empty()) {
        *why = bad;
        spdlog::warn("TLS with {}: {}; connection closed", what, bad);
        return nullptr;
      }
      ok = accepted ? s->try_accept(fd) : s->try_connect(fd);
    }
    if (!ok) {
      *why = tls_error_text("closed during the handshake");
      if (refused.empty())
        spdlog::warn("TLS with {} failed: {}; connection closed", what, *why);
      else
        spdlog::warn("TLS with {} failed: {}: its certificate {}; connection closed", what, *why,
                     refused);
      return nullptr;
    }
    return s;
  } catch (const std::exception& e) {
    // CAF reads the files again for every connection and throws when one went bad.
    *why =
      std::string{e.what()} + " (" + tls_error_text("check --tls-cert, --tls-key, --tls-ca") + ")";
    spdlog::error("TLS with {}: {}; connection closed", what, *why);
    return nullptr;
  }
}

class tls_doorman : public net::doorman_impl {
public:
  tls_doorman(net::default_multiplexer& mpx, native_socket fd) : net::doorman_impl(mpx, fd) {}

  bool new_connection() override {
    if (detached())
      return false;  // closed by the broker while the multiplexer still had events
    auto& mpx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    caf::detail::socket_guard guard{fd};
    net::nonblocking(fd, true);
    // The handshake takes several small writes each way: none may wait for a delayed ACK.
    net::tcp_nodelay(fd, true);
    auto peer = "the connection from " + remote_of(fd);
    std::string why;
    auto session = make_session(parent()->system(), fd, true, peer, &why);
    if (!session)
      return false;
    auto scribe =
      caf::make_counted<tls_scribe>(mpx, fd, std::move(session), std::move(peer), std::string{});
    guard.release();  // the scribe owns the socket
    auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    return doorman::new_connection(&mpx, hdl);
  }
};

net::default_multiplexer& multiplexer_of(caf::actor_system& sys) {
  return static_cast<net::default_multiplexer&>(sys.middleman().backend());
}

/// Where configure_tls keeps tls_options::check_host (CAF has no field for it).
constexpr const char check_host_key[] = "proctor.tls-check-host";

caf::error not_configured() {
  return caf::make_error(caf::sec::runtime_error,
                         "TLS wanted but the actor system was not configured for it");
}

}  // namespace

void configure_tls(caf::actor_system_config& cfg, const tls_options& tls) {
  if (!tls.enabled())
    return;
  cfg.openssl_certificate = tls.cert;
  cfg.openssl_key = tls.key;
  cfg.openssl_cafile = tls.ca;
  // CAF's set() takes only options it declared; its settings take any key.
  caf::put(cfg.content, check_host_key, tls.check_host);
  cfg.load<caf::openssl::manager>();
}

bool tls_enabled(const caf::actor_system& sys) {
  return sys.has_openssl_manager() && sys.openssl_manager().authentication_enabled();
}

tls_options tls_options_of(const caf::actor_system& sys) {
  if (!tls_enabled(sys))
    return {};
  const auto& cfg = sys.config();
  return tls_options{cfg.openssl_certificate, cfg.openssl_key, cfg.openssl_cafile,
                     caf::get_or(cfg, check_host_key, false)};
}

caf::expected<caf::io::doorman_ptr> new_tls_doorman(caf::actor_system& sys, uint16_t port,
                                                    const std::string& host) {
  if (!tls_enabled(sys))
    return not_configured();
  auto fd = net::new_tcp_acceptor_impl(port, host.c_str(), true);
  if (!fd)
    return std::move(fd.error());
  return caf::io::doorman_ptr{caf::make_counted<tls_doorman>(multiplexer_of(sys), *fd)};
}

caf::expected<caf::io::scribe_ptr> new_tls_scribe(caf::actor_system& sys, int fd,
                                                  const std::string& peer,
                                                  const std::string& expected_node,
                                                  const std::string& dialled_host) {
  if (!tls_enabled(sys)) {
    ::close(fd);
    return not_configured();
  }
  net::nonblocking(fd, true);
  std::string why;
  auto session = make_session(sys, fd, false, peer, &why, expected_node, dialled_host);
  if (!session) {
    ::close(fd);
    return caf::make_error(caf::sec::cannot_connect_to_node, "TLS handshake failed: " + why);
  }
  return caf::io::scribe_ptr{caf::make_counted<tls_scribe>(
    multiplexer_of(sys), fd, std::move(session), peer, expected_node)};
}

std::optional<cert_identity> tls_peer_identity(caf::io::connection_handle hdl) {
  std::lock_guard<std::mutex> lock{identities().mutex};
  auto& t = identities().by_hdl;
  if (auto i = t.find(hdl.id()); i != t.end())
    return i->second.second;
  return std::nullopt;
}

}  // namespace proctor
