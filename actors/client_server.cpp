#include "actors/client_server.hpp"

#include <algorithm>
#include <unordered_map>

#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/rpc.hpp"
#include "actors/wire_frame.hpp"
#include "wire.pb.h"

namespace proctor {

namespace {

using caf::io::connection_handle;
using caf::io::receive_policy;

/// A client connection. `want` is 0 while its next frame's header is awaited, else the
/// length of the payload being read.
struct client_conn {
  uint64_t generation = 0;
  uint32_t want = 0;
};

struct client_server_state {
  static inline const char* name = "proctor.client_server";
  caf::actor executor;
  client_server_config cfg;
  std::unordered_map<connection_handle, client_conn> conns;
  /// Tells connections apart that get the same handle (the same fd) one after the other.
  uint64_t next_generation = 0;
};

using client_broker = caf::io::stateful_broker<client_server_state>;

using close_conn_atom = caf::atom_constant<caf::atom("close_conn")>;

std::string error_response(pb::Response::Code code, const std::string& what) {
  pb::Response r;
  r.set_code(code);
  r.set_error(what);
  return r.SerializeAsString();
}

void write_frame(client_broker* self, connection_handle hdl, const std::string& payload) {
  char header[frame_header_bytes];
  put_frame_header(header, static_cast<uint32_t>(payload.size()));
  self->write(hdl, sizeof header, header);
  self->write(hdl, payload.size(), payload.data());
  self->flush(hdl);
}

/// Answers BAD_REQUEST and closes: after a refused length the stream cannot be resynced.
void refuse(client_broker* self, connection_handle hdl, const std::string& why) {
  spdlog::debug("client connection {}: {}; closing it", hdl.id(), why);
  write_frame(self, hdl, error_response(pb::Response::BAD_REQUEST, why));
  self->state.conns.erase(hdl);
  // Closed from a message to ourselves: closing inside the data handler frees the
  // connection's servant while CAF 0.17 still touches it after the handler (a crash, seen).
  // Without a token nothing more is read meanwhile.
  self->send(self, close_conn_atom::value, hdl);
}

/// Writes `reply` if the connection that asked is still there, then reads its next frame.
void answer(client_broker* self, connection_handle hdl, uint64_t generation,
            const std::string& reply) {
  auto i = self->state.conns.find(hdl);
  if (i == self->state.conns.end() || i->second.generation != generation) {
    spdlog::debug("client connection {} closed before its answer; answer dropped", hdl.id());
    return;
  }
  write_frame(self, hdl, reply);
  self->trigger(hdl, 1);  // the next header
}

/// How long the executor may take to answer `bytes`; rewrites an unbounded wait (see
/// client_server_config::max_wait_ms).
std::chrono::milliseconds bound_request(const client_server_config& cfg, std::string& bytes) {
  pb::Request req;
  if (!req.ParseFromString(bytes) || !req.has_wait())
    return cfg.request_timeout;  // malformed bytes: the executor answers BAD_REQUEST at once
  auto ms = req.wait().timeout_ms();
  if (ms == 0 || ms > cfg.max_wait_ms) {
    ms = cfg.max_wait_ms;
    req.mutable_wait()->set_timeout_ms(ms);
    bytes = req.SerializeAsString();
  }
  return std::chrono::milliseconds{ms} + cfg.wait_grace;
}

void forward(client_broker* self, connection_handle hdl, uint64_t generation, std::string bytes) {
  auto bound = bound_request(self->state.cfg, bytes);
  self->request(self->state.executor, bound, rpc_atom::value, std::move(bytes))
    .then(
      [self, hdl, generation](const std::string& reply) { answer(self, hdl, generation, reply); },
      [self, hdl, generation, bound](caf::error& e) {
        auto why = e == caf::sec::request_timeout
                     ? "node did not answer within " + std::to_string(bound.count()) + " ms"
                     : "node did not answer (" + self->system().render(e) + ")";
        spdlog::warn("client request: {}", why);
        answer(self, hdl, generation, error_response(pb::Response::INTERNAL, why));
      });
}

caf::behavior client_server(client_broker* self, caf::io::doorman_ptr door, caf::actor executor,
                            client_server_config cfg) {
  self->add_doorman(std::move(door));
  self->state.executor = std::move(executor);
  self->state.cfg = cfg;
  return {
    [self](const caf::io::new_connection_msg& m) {
      auto& st = self->state;
      st.conns[m.handle] = client_conn{++st.next_generation, 0};
      self->configure_read(m.handle, receive_policy::exactly(frame_header_bytes));
      // Reading runs on activity tokens, one per read: a connection reads its next frame
      // only when given a token, so nothing is read while a request is served (halt()
      // would not stop a read loop already under way, tokens do).
      self->trigger(m.handle, 1);
    },
    [self](caf::io::new_data_msg& m) {
      auto& st = self->state;
      auto i = st.conns.find(m.handle);
      if (i == st.conns.end())
        return;  // closed by us; the bytes were on their way
      auto& c = i->second;
      if (c.want == 0) {
        auto len = frame_length(m.buf.data());
        if (check_frame_length(len, st.cfg.max_frame_bytes) != frame_check::ok)
          return refuse(self, m.handle, describe_refused_frame(len, st.cfg.max_frame_bytes));
        c.want = len;
        self->configure_read(m.handle, receive_policy::exactly(len));
        self->trigger(m.handle, 1);  // the payload
        return;
      }
      c.want = 0;
      // No token: nothing more is read from this connection until this request is answered
      // (answer() gives one). Answers go out in request order, and a client cannot queue
      // up work in the node without bound.
      self->configure_read(m.handle, receive_policy::exactly(frame_header_bytes));
      forward(self, m.handle, c.generation, std::string(m.buf.begin(), m.buf.end()));
    },
    [self](const caf::io::connection_closed_msg& m) { self->state.conns.erase(m.handle); },
    [self](close_conn_atom, connection_handle hdl) {
      self->close(hdl);  // graceful: the answer is still sent
    },
    [](const caf::io::connection_passivated_msg&) {
      // Out of tokens after a whole request: expected, answer() gives the next one.
    },
    [](const caf::io::acceptor_closed_msg&) {
      spdlog::error("the client listener closed; no new client connections");
    },
  };
}

} // namespace

size_t client_frame_limit(size_t max_args_bytes) {
  return std::min(max_args_bytes + (size_t{1} << 20), max_frame_bytes);
}

caf::expected<std::pair<caf::actor, uint16_t>>
spawn_client_server(caf::actor_system& sys, caf::actor executor, const std::string& host,
                    uint16_t port, client_server_config cfg) {
  // The listening socket is opened here, not in the broker, so that a port in use is an
  // error of this call (as middleman().publish was) and the caller learns the port.
  auto door = sys.middleman().backend().new_tcp_doorman(port, host.c_str(), true);
  if (!door)
    return std::move(door.error());
  auto bound = (*door)->port();
  auto broker = sys.middleman().spawn_broker(client_server, std::move(*door), std::move(executor),
                                             cfg);
  return std::make_pair(caf::actor{broker}, bound);
}

} // namespace proctor
