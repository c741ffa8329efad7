#include "actors/cluster/client_server.hpp"

#include <algorithm>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/audit.hpp"
#include "actors/base/authoriser.hpp"
#include "actors/base/errors.hpp"
#include "actors/base/log_rate.hpp"
#include "actors/base/rpc.hpp"
#include "actors/wire/wire_frame.hpp"
#include "tls/caf_tls.hpp"

namespace proctor {

namespace {

using caf::io::connection_handle;
using caf::io::receive_policy;

/// A client connection. `want` is 0 while its next frame's header is awaited, else the
/// length of the payload being read. One request is with the executor at a time
/// (`busy`); requests read meanwhile wait in `queued`, so answers go out in request order.
/// A tagged request (wire.proto Request.tag) with the executor: answered when it is ready,
/// whatever the connection's other requests do.
struct tagged_request {
  uint64_t tag = 0;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds bound{0};
};

struct client_conn {
  uint64_t generation = 0;
  /// Until its first whole request: a connection that sends none by this time (a TLS
  /// handshake never started, a client that connected and went silent) is closed.
  std::optional<std::chrono::steady_clock::time_point> first_request_by;
  uint32_t want = 0;
  bool busy = false;
  uint64_t seq = 0;  ///< the request with the executor (answers of others are stale)
  std::chrono::steady_clock::time_point deadline;  ///< when `seq` is answered INTERNAL
  std::chrono::milliseconds bound{0};
  std::deque<std::string> queued;
  std::unordered_map<uint64_t, tagged_request> tagged;  ///< by seq
  /// What the certificate of its other side names (known from its first request on: its
  /// TLS handshake is over by then); nullopt until then, and without TLS.
  std::optional<cert_identity> id;
};

/// Requests a client may send ahead of its answers; more is refused (the node would
/// otherwise buffer whatever a client sends without reading its answers).
constexpr size_t max_queued_requests = 16;
/// Tagged requests a connection may have with the executor at once (a peer's link sends
/// one delivery, one heartbeat and the queries its node forwards).
constexpr size_t max_tagged_requests = 1024;

struct client_server_state {
  static inline const char* name = "proctor.client_server";
  caf::actor executor;
  client_server_config cfg;
  std::unordered_map<connection_handle, client_conn> conns;
  /// Tells connections apart that get the same handle (the same fd) one after the other.
  uint64_t next_generation = 0;
  uint64_t next_seq = 0;
  bool sweeping = false;  ///< a sweep_atom is on its way
};

using client_broker = caf::io::stateful_broker<client_server_state>;

using close_conn_atom = caf::atom_constant<caf::atom("close_conn")>;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;

/// How often the broker looks for requests past their bound.
constexpr auto sweep_interval = std::chrono::seconds{1};
/// How long a new connection may take to send its first whole request (its TLS handshake
/// included): slow clients are not this slow; idle sockets would otherwise be held forever.
constexpr auto first_request_timeout = std::chrono::seconds{10};

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
  // The connection's state is gone, so nothing read meanwhile is acted on.
  self->send(self, close_conn_atom::value, hdl);
}

void forward(client_broker* self, connection_handle hdl, std::string bytes);

/// Who the other side of `hdl` is: anyone without TLS, else what its certificate names,
/// with the role the policy in force gives it (read for each request: a reload applies to
/// the connections open too).
caller caller_of(client_broker* self, connection_handle hdl, client_conn& c) {
  if (!tls_enabled(self->system()))
    return caller::anyone();
  if (!c.id) {
    c.id = tls_peer_identity(hdl);
    if (!c.id) {  // not met: the scribe enters it before the first byte reaches this broker
      spdlog::error("client connection {}: no identity known for its certificate; it acts "
                    "as an anonymous client",
                    hdl.id());
      c.id = cert_identity{};
    }
  }
  auto policy = self->state.cfg.policy->current.load();
  return caller::with_certificate(*c.id, policy.get());
}

/// "" if the connection's caller may send `req` (authoriser.hpp); else the refusal's answer
/// (PERMISSION_DENIED), logged at a falling rate and counted. Malformed bytes pass: the
/// executor answers them BAD_REQUEST.
std::string authorisation_refusal(client_broker* self, connection_handle hdl, client_conn& c,
                                  const pb::Request* req) {
  if (req == nullptr)
    return {};
  const auto who = caller_of(self, hdl, c);
  auto why = authorise(who, *req);
  if (why.empty())
    return {};
  auto n = ++*self->state.cfg.refused_requests;
  if (log_nth(n))
    spdlog::warn("refused a request from {}:{} ({}): {} ({} refused so far; logged at a "
                 "falling rate)",
                 self->remote_addr(hdl), self->remote_port(hdl), who.text(), why, n);
  return error_response(pb::Response::PERMISSION_DENIED, why);
}

/// Who sent `req`, for its audit record (actors/base/audit.hpp), and the types it is limited
/// to (authoriser.hpp, stamp_types), as its connection knows them; `bytes` re-encoded if
/// that changed it. A peer's link (`tagged`) from a node's
/// certificate forwards its own clients' requests: what their door said stays.
void stamp_actor(client_broker* self, connection_handle hdl, client_conn& c, pb::Request& req,
                 std::string& bytes, bool tagged) {
  const bool submits = self->state.cfg.audit_submits;
  // Every act checked against a caller's types is audited (operator acts): the common case,
  // a read or a submit, has nothing to say and is not re-encoded.
  if (!req.has_actor() && !audited(req, submits) && req.only_types().empty())
    return;
  const auto who = caller_of(self, hdl, c);
  const bool forwarder = tagged && (who.node || !tls_enabled(self->system()));
  auto address = self->remote_addr(hdl) + ":" + std::to_string(self->remote_port(hdl));
  const bool actor_changed = set_actor(req, who, address, submits, forwarder);
  if (stamp_types(req, who, forwarder) || actor_changed)
    bytes = req.SerializeAsString();
}

/// Writes `reply` if the connection that asked is still there and still waits for request
/// `seq`, then sends its next queued request on.
void answer(client_broker* self, connection_handle hdl, uint64_t generation, uint64_t seq,
            std::string reply) {
  // A frame past the limit would be refused by the reader, and with it its connection (a
  // peer's link: every request on it): the request fails instead.
  if (reply.size() + 16 > max_frame_bytes) {
    spdlog::warn("client request: an answer of {} bytes exceeds the frame limit; answered "
                 "INTERNAL instead",
                 reply.size());
    reply = error_response(pb::Response::INTERNAL, "the answer (" + std::to_string(reply.size())
                                                     + " bytes) exceeds the frame limit of "
                                                     + std::to_string(max_frame_bytes) + " bytes");
  }
  auto i = self->state.conns.find(hdl);
  if (i == self->state.conns.end() || i->second.generation != generation) {
    spdlog::debug("client connection {} closed before its answer; answer dropped", hdl.id());
    return;
  }
  auto& c = i->second;
  if (auto t = c.tagged.find(seq); t != c.tagged.end()) {
    write_frame(self, hdl, with_varint_field(reply, response_tag_field, t->second.tag));
    c.tagged.erase(t);
    return;
  }
  if (!c.busy || c.seq != seq)
    return;  // answered already (INTERNAL at its bound); this is the executor's late answer
  write_frame(self, hdl, reply);
  c.busy = false;
  if (!c.queued.empty()) {
    auto next = std::move(c.queued.front());
    c.queued.pop_front();
    forward(self, hdl, std::move(next));
  }
}

/// How long the executor may take to answer `bytes`; rewrites an unbounded wait (see
/// client_server_config::max_wait_ms).
std::chrono::milliseconds bound_request(const client_server_config& cfg, pb::Request& req,
                                        std::string& bytes) {
  if (req.has_replicas() && !req.replicas().add().empty()) {
    // A new replica's catch-up is bounded by the request itself (docs/replication.md).
    auto ms = req.replicas().timeout_ms() != 0 ? req.replicas().timeout_ms() : 120'000u;
    return std::chrono::milliseconds{ms} + cfg.request_timeout;
  }
  if (!req.has_wait())
    return cfg.request_timeout;  // malformed bytes: the executor answers BAD_REQUEST at once
  auto ms = req.wait().timeout_ms();
  if (ms == 0 || ms > cfg.max_wait_ms) {
    ms = cfg.max_wait_ms;
    req.mutable_wait()->set_timeout_ms(ms);
    bytes = req.SerializeAsString();
  }
  return std::chrono::milliseconds{ms} + cfg.wait_grace;
}

/// Sends `bytes` to the executor as request `seq` of connection `hdl`.
void ask_executor(client_broker* self, connection_handle hdl, uint64_t generation, uint64_t seq,
                  std::string bytes) {
  self->request(self->state.executor, caf::infinite, rpc_atom::value, std::move(bytes))
    .then([self, hdl, generation,
           seq](std::string& reply) { answer(self, hdl, generation, seq, std::move(reply)); },
          [self, hdl, generation, seq](caf::error& e) {
            auto why = "node did not answer (" + error_text(self->system(), e) + ")";
            spdlog::warn("client request: {}", why);
            answer(self, hdl, generation, seq, error_response(pb::Response::INTERNAL, why));
          });
}

void arm_sweep(client_broker* self);

// The bound is kept by the broker (a sweep each second), not by a CAF request timeout:
// CAF 0.17 does not cancel a request's timeout when the answer comes, so each request left
// an entry in the clock for its whole bound (60 s): some 140 bytes per call, 14 MB of RSS
// over 100,000 calls in 13 s (seen).
void forward(client_broker* self, connection_handle hdl, std::string bytes) {
  auto& st = self->state;
  auto& c = st.conns[hdl];
  pb::Request req;
  // Malformed bytes go on as they are: the executor answers BAD_REQUEST at once.
  bool parsed = req.ParseFromString(bytes);
  c.busy = true;
  c.seq = ++st.next_seq;
  if (auto refusal = authorisation_refusal(self, hdl, c, parsed ? &req : nullptr); !refusal.empty())
    return answer(self, hdl, c.generation, c.seq, std::move(refusal));  // in its turn
  if (parsed)
    stamp_actor(self, hdl, c, req, bytes, false);
  c.bound = parsed ? bound_request(st.cfg, req, bytes) : st.cfg.request_timeout;
  c.deadline = std::chrono::steady_clock::now() + c.bound;
  ask_executor(self, hdl, c.generation, c.seq, std::move(bytes));
  arm_sweep(self);
}

/// A tagged request: to the executor at once, answered whenever it is ready.
void forward_tagged(client_broker* self, connection_handle hdl, pb::Request& req,
                    std::string bytes) {
  auto& st = self->state;
  auto& c = st.conns[hdl];
  auto seq = ++st.next_seq;
  auto& t = c.tagged[seq];
  t.tag = req.tag();
  t.bound = bound_request(st.cfg, req, bytes);
  t.deadline = std::chrono::steady_clock::now() + t.bound;
  ask_executor(self, hdl, c.generation, seq, std::move(bytes));
  arm_sweep(self);
}

void arm_sweep(client_broker* self) {
  auto& st = self->state;
  if (!st.sweeping) {
    st.sweeping = true;
    self->delayed_send(self, sweep_interval, sweep_atom::value);
  }
}

/// Answers INTERNAL for every request past its bound; runs while any request is out.
void sweep(client_broker* self) {
  auto& st = self->state;
  auto now = std::chrono::steady_clock::now();
  struct late_request {
    connection_handle hdl;
    uint64_t generation, seq;
    std::chrono::milliseconds bound;
  };
  std::vector<late_request> late;
  std::vector<connection_handle> silent;
  bool busy = false;
  for (auto& [hdl, c] : st.conns) {
    busy = busy || c.busy || !c.tagged.empty() || c.first_request_by.has_value();
    if (c.first_request_by && *c.first_request_by <= now)
      silent.push_back(hdl);
    if (c.busy && c.deadline <= now)
      late.push_back({hdl, c.generation, c.seq, c.bound});
    for (auto& [seq, t] : c.tagged)
      if (t.deadline <= now)
        late.push_back({hdl, c.generation, seq, t.bound});
  }
  for (auto& l : late) {
    auto why = "node did not answer within " + std::to_string(l.bound.count()) + " ms";
    spdlog::warn("client request: {}", why);
    answer(self, l.hdl, l.generation, l.seq, error_response(pb::Response::INTERNAL, why));
  }
  for (auto hdl : silent) {
    spdlog::warn(
      "client connection {} from {}:{}: no request within {} s of connecting; closing it", hdl.id(),
      self->remote_addr(hdl), self->remote_port(hdl), first_request_timeout.count());
    st.conns.erase(hdl);
    self->close(hdl);  // from the sweep, not a data handler: closing here is safe
  }
  st.sweeping = busy;
  if (busy)
    self->delayed_send(self, sweep_interval, sweep_atom::value);
}

caf::behavior client_server(client_broker* self, caf::io::doorman_ptr door, caf::actor executor,
                            client_server_config cfg) {
  self->add_doorman(std::move(door));
  self->state.executor = std::move(executor);
  self->state.cfg = cfg;
  return {
    [self](const caf::io::new_connection_msg& m) {
      auto& st = self->state;
      auto& c = st.conns[m.handle];
      c = client_conn{};
      c.generation = ++st.next_generation;
      c.first_request_by = std::chrono::steady_clock::now() + first_request_timeout;
      self->configure_read(m.handle, receive_policy::exactly(frame_header_bytes));
      arm_sweep(self);
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
        return;
      }
      c.want = 0;
      c.first_request_by.reset();
      self->configure_read(m.handle, receive_policy::exactly(frame_header_bytes));
      std::string bytes(m.buf.begin(), m.buf.end());
      if (pb::Request req; req.ParseFromString(bytes) && req.tag() != 0) {
        // The frame was read whole, so the stream stays in step: this request alone is
        // refused, with its tag (closing would fail every other request of a peer's link).
        if (c.tagged.size() >= max_tagged_requests) {
          auto why = "more than " + std::to_string(max_tagged_requests)
                     + " tagged requests at once; retry later";
          spdlog::warn("client connection {}: {}", m.handle.id(), why);
          return write_frame(self, m.handle,
                             with_varint_field(error_response(pb::Response::REFUSED, why),
                                               response_tag_field, req.tag()));
        }
        if (auto refusal = authorisation_refusal(self, m.handle, c, &req); !refusal.empty())
          return write_frame(self, m.handle,
                             with_varint_field(refusal, response_tag_field, req.tag()));
        stamp_actor(self, m.handle, c, req, bytes, true);
        return forward_tagged(self, m.handle, req, std::move(bytes));
      }
      if (!c.busy)
        return forward(self, m.handle, std::move(bytes));
      // CAF's halt() and activity tokens would stop reading instead, but a connection
      // passivated that way sometimes never reported its close (fds leaked, seen): queue.
      if (c.queued.size() >= max_queued_requests)
        return refuse(self, m.handle,
                      "more than " + std::to_string(max_queued_requests)
                        + " requests sent ahead of their answers");
      c.queued.push_back(std::move(bytes));
    },
    [self](const caf::io::connection_closed_msg& m) { self->state.conns.erase(m.handle); },
    [self](sweep_atom) { sweep(self); },
    [self](close_conn_atom, connection_handle hdl) {
      self->close(hdl);  // graceful: the answer is still sent
    },
    [](const caf::io::acceptor_closed_msg&) {
      spdlog::error("the client listener closed; no new client connections");
    },
  };
}

}  // namespace

size_t client_frame_limit(size_t max_args_bytes) {
  return std::min(max_args_bytes + (size_t{1} << 20), max_frame_bytes);
}

caf::expected<std::pair<caf::actor, uint16_t>>
spawn_client_server(caf::actor_system& sys, caf::actor executor, const std::string& host,
                    uint16_t port, client_server_config cfg) {
  // The listening socket is opened here, not in the broker, so that a port in use is an
  // error of this call (as middleman().publish was) and the caller learns the port.
  auto door = tls_enabled(sys)
                ? new_tls_doorman(sys, port, host)
                : sys.middleman().backend().new_tcp_doorman(port, host.c_str(), true);
  if (!door)
    return std::move(door.error());
  auto bound = (*door)->port();
  bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
  if (!tls_enabled(sys) && !loopback)
    spdlog::warn("serving {}:{} without TLS: whoever reaches it can submit, abort and pose as "
                 "a peer (docs/tls.md)",
                 host, bound);
  if (tls_enabled(sys) && !loopback && !cfg.policy->current.load())
    spdlog::warn("serving {}:{} without --auth-policy: any client certificate the CA signed may "
                 "do everything a client can, as before (nodes act only as themselves; "
                 "docs/security.md)",
                 host, bound);
  auto broker =
    sys.middleman().spawn_broker(client_server, std::move(*door), std::move(executor), cfg);
  return std::make_pair(caf::actor{broker}, bound);
}

}  // namespace proctor
