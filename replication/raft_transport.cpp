#include "replication/raft_transport.hpp"

#include <cstdio>
#include <cstring>
#include <string>

#include <uv.h>

namespace proctor {

namespace {

nodelay_transport* self_of_outer(struct raft_uv_transport* t) {
  return static_cast<nodelay_transport*>(t->impl);
}

nodelay_transport* self_of_inner(struct raft_uv_transport* t) {
  return static_cast<nodelay_transport*>(t->data);
}

void copy_errmsg(nodelay_transport* self) {
  std::memcpy(self->outer.errmsg, self->inner.errmsg, sizeof(self->outer.errmsg));
}

void set_nodelay(struct uv_stream_s* stream) {
  // raft_uv_tcp's streams are uv_tcp_t. A failure only costs latency: nothing to report.
  if (stream != nullptr && stream->type == UV_TCP)
    uv_tcp_nodelay(reinterpret_cast<uv_tcp_t*>(stream), 1);
}

int t_init(struct raft_uv_transport* t, raft_id id, const char* address) {
  auto* self = self_of_outer(t);
  auto plain = raft_transport_address(address);
  std::snprintf(self->address, sizeof(self->address), "%s", plain.c_str());
  // raft_uv_tcp keeps the pointer (uvTcpInit): hand it our copy, which lives as long.
  int rv = self->inner.init(&self->inner, id, self->address);
  if (rv != 0)
    copy_errmsg(self);
  return rv;
}

void on_accept(struct raft_uv_transport* inner, raft_id id, const char* address,
               struct uv_stream_s* stream) {
  auto* self = self_of_inner(inner);
  set_nodelay(stream);
  self->accept_cb(&self->outer, id, address, stream);
}

int t_listen(struct raft_uv_transport* t, raft_uv_accept_cb cb) {
  auto* self = self_of_outer(t);
  self->accept_cb = cb;
  int rv = self->inner.listen(&self->inner, on_accept);
  if (rv != 0) {
    copy_errmsg(self);
    // raft_uv_tcp 0.15 fails a bind or listen with RAFT_IOERR and no message.
    if (self->outer.errmsg[0] == '\0')
      std::snprintf(self->outer.errmsg, sizeof(self->outer.errmsg),
                    "cannot listen on %s (in use, or not an address of this host)", self->address);
  }
  return rv;
}

/// One connect request: ours to raft_uv_tcp, wrapping libraft's to us.
struct connect_req {
  struct raft_uv_connect inner;
  struct raft_uv_connect* outer;
  std::string address;  // what raft_uv_tcp connects to, alive until its callback
};

void on_connect(struct raft_uv_connect* req, struct uv_stream_s* stream, int status) {
  auto* c = static_cast<connect_req*>(req->data);
  auto* outer = c->outer;
  delete c;  // raft_uv_tcp is done with it once its callback runs (also when canceled)
  if (status == 0)
    set_nodelay(stream);
  outer->cb(outer, stream, status);
}

int t_connect(struct raft_uv_transport* t, struct raft_uv_connect* req, raft_id id,
              const char* address, raft_uv_connect_cb cb) {
  auto* self = self_of_outer(t);
  // The transport, not libraft, stores the callback in the request (uv_tcp_connect.c).
  req->cb = cb;
  auto* c = new connect_req{};
  c->inner.data = c;
  c->outer = req;
  c->address = raft_transport_address(address);
  int rv = self->inner.connect(&self->inner, &c->inner, id, c->address.c_str(), on_connect);
  if (rv != 0) {
    delete c;
    copy_errmsg(self);
  }
  return rv;
}

void on_close(struct raft_uv_transport* inner) {
  auto* self = self_of_inner(inner);
  self->close_cb(&self->outer);
}

void t_close(struct raft_uv_transport* t, raft_uv_transport_close_cb cb) {
  auto* self = self_of_outer(t);
  self->close_cb = cb;
  self->inner.close(&self->inner, on_close);
}

}  // namespace

int nodelay_transport_init(nodelay_transport* t, struct uv_loop_s* loop) {
  std::memset(&t->outer, 0, sizeof(t->outer));
  std::memset(&t->inner, 0, sizeof(t->inner));
  int rv = raft_uv_tcp_init(&t->inner, loop);
  if (rv != 0)
    return rv;
  t->inner.data = t;  // raft_uv_tcp keeps `data` for its user; libraft sets outer.data
  t->outer.impl = t;
  t->outer.init = t_init;
  t->outer.listen = t_listen;
  t->outer.connect = t_connect;
  t->outer.close = t_close;
  return 0;
}

void nodelay_transport_close(nodelay_transport* t) {
  raft_uv_tcp_close(&t->inner);
}

}  // namespace proctor
