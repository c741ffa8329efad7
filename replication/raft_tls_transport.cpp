#include "replication/raft_tls_transport.hpp"

#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>

#include <uv.h>

#include "replication/raft_tls_tunnel.hpp"
#include "replication/raft_transport.hpp"

namespace proctor {

namespace {

tls_transport* of(struct raft_uv_transport* uv) {
  return static_cast<tls_transport*>(uv->impl);
}

/// HOST:PORT, HOST an IPv4 address (as raft_uv_tcp: libraft's addresses are IPv4).
bool parse_address(const std::string& address, struct sockaddr_in* addr) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 >= address.size())
    return false;
  std::string host = address.substr(0, colon);
  char* end = nullptr;
  long port = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535)
    return false;
  return uv_ip4_addr(host.c_str(), static_cast<int>(port), addr) == 0;
}

void close_listener(tls_transport* t) {
  if (!t->listener_open || t->listener_closing)
    return;
  t->listener_closing = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&t->listener), [](uv_handle_t* h) {
    auto* tt = static_cast<tls_transport*>(h->data);
    tt->listener_open = false;
    maybe_fire_close(tt);
  });
}

void on_connection(uv_stream_t* server, int status) {
  auto* t = static_cast<tls_transport*>(server->data);
  if (status < 0 || t->closing)
    return;
  tunnel* c = new_tunnel(t, false);
  c->peer = c->log_key = "from an unknown address";
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->tcp)) != 0) {
    close_tunnel(c);
    return;
  }
  struct sockaddr_storage ss {};
  int len = sizeof(ss);
  if (uv_tcp_getpeername(&c->tcp, reinterpret_cast<struct sockaddr*>(&ss), &len) == 0
      && ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<struct sockaddr_in*>(&ss);
    char host[64] = {};
    uv_ip4_name(in, host, sizeof(host));
    c->log_key = std::string("from ") + host;
    c->peer = c->log_key + ":" + std::to_string(ntohs(in->sin_port));
  }
  start_tls(c);
}

void on_connected(uv_connect_t* creq, int status) {
  tunnel* c = static_cast<tunnel*>(creq->data);
  if (c->st == tunnel::state::closing)
    return;  // closed meanwhile: on_handle_closed answers libraft
  if (status < 0) {
    // Not a TLS matter: a peer that is down. Not logged (libraft retries every second).
    close_tunnel(c);
    return;
  }
  start_tls(c);
}

// -- raft_uv_transport -----------------------------------------------------------------------

int t_init(struct raft_uv_transport* uv, raft_id id, const char* address) {
  tls_transport* t = of(uv);
  t->id = id;
  t->address = raft_transport_address(address);
  return 0;
}

int t_listen(struct raft_uv_transport* uv, raft_uv_accept_cb cb) {
  tls_transport* t = of(uv);
  t->accept_cb = cb;
  struct sockaddr_in addr {};
  if (!parse_address(t->address, &addr)) {
    std::snprintf(uv->errmsg, sizeof(uv->errmsg), "cannot listen on %s: not an IPv4 HOST:PORT",
                  t->address.c_str());
    return RAFT_INVALID;
  }
  uv_tcp_init(t->loop, &t->listener);
  t->listener.data = t;
  t->listener_open = true;
  int rv = uv_tcp_bind(&t->listener, reinterpret_cast<const struct sockaddr*>(&addr), 0);
  if (rv == 0)
    rv = uv_listen(reinterpret_cast<uv_stream_t*>(&t->listener), 128, on_connection);
  if (rv != 0) {
    std::snprintf(uv->errmsg, sizeof(uv->errmsg),
                  "cannot listen on %s (in use, or not an address of this host): %s",
                  t->address.c_str(), uv_strerror(rv));
    close_listener(t);
    return RAFT_IOERR;
  }
  return 0;
}

int t_connect(struct raft_uv_transport* uv, struct raft_uv_connect* req, raft_id,
              const char* address, raft_uv_connect_cb cb) {
  tls_transport* t = of(uv);
  // The transport, not libraft, stores the callback in the request (as raft_uv_tcp does).
  req->cb = cb;
  std::string plain = raft_transport_address(address);
  struct sockaddr_in addr {};
  if (!parse_address(plain, &addr)) {
    std::snprintf(uv->errmsg, sizeof(uv->errmsg), "cannot connect to %s: not an IPv4 HOST:PORT",
                  plain.c_str());
    return RAFT_NOCONNECTION;
  }
  tunnel* c = new_tunnel(t, true);
  c->peer = c->log_key = "to " + plain;
  c->host = plain.substr(0, plain.rfind(':'));
  c->connect_req.data = c;
  if (int rv = uv_tcp_connect(&c->connect_req, &c->tcp,
                              reinterpret_cast<const struct sockaddr*>(&addr), on_connected);
      rv != 0) {
    std::snprintf(uv->errmsg, sizeof(uv->errmsg), "uv_tcp_connect(): %s", uv_strerror(rv));
    close_tunnel(c);  // req is not set: libraft hears of it from the return value only
    return RAFT_NOCONNECTION;
  }
  c->req = req;
  return 0;
}

void t_close(struct raft_uv_transport* uv, raft_uv_transport_close_cb cb) {
  tls_transport* t = of(uv);
  t->closing = true;
  t->close_cb = cb;
  close_listener(t);
  for (tunnel* c : std::set<tunnel*>(t->tunnels))
    close_tunnel(c);
  maybe_fire_close(t);
}

}  // namespace

tls_transport* tls_transport_new(struct uv_loop_s* loop, std::shared_ptr<ssl_ctx_st> ctx,
                                 std::string peer_node, std::shared_ptr<tls_context_slot> reload,
                                 bool check_host) {
  auto* t = new tls_transport{};
  t->check_host = check_host;
  t->loop = loop;
  t->ctx = std::move(ctx);
  t->peer_node = std::move(peer_node);
  t->reload = std::move(reload);
  t->uv.impl = t;
  t->uv.init = t_init;
  t->uv.listen = t_listen;
  t->uv.connect = t_connect;
  t->uv.close = t_close;
  return t;
}

struct raft_uv_transport* tls_transport_uv(tls_transport* t) {
  return &t->uv;
}

void tls_transport_free(tls_transport* t) {
  delete t;
}

}  // namespace proctor
