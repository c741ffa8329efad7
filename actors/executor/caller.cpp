// The one-shot caller of a procedure's call (caller.hpp). What the procedure actor did
// itself before its waits could passivate: the same transport, retries and errors.
#include "actors/executor/caller.hpp"

#include <atomic>

#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/errors.hpp"
#include "actors/base/node_env.hpp"
#include "actors/base/rpc.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wall_clock.hpp"
#include "actors/wire/wire_client.hpp"
#include "supervision/restart_tracker.hpp"
#include "tls/caf_tls.hpp"

namespace proctor {

namespace {

using call_again_atom = caf::atom_constant<caf::atom("callagain")>;

/// Attempts of a call that fails in transport (the first included).
constexpr int max_call_attempts = 10;

struct caller_state {
  static inline const char* name = "proctor.caller";
  std::shared_ptr<node_env> env;
  caf::actor reply_to;
  call_spec spec;
  int attempts = 0;
  bool retry_armed = false;
  /// Set when this actor exits: a round trip to another node then stops waiting.
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
};

using caller_actor = caf::stateful_actor<caller_state>;

#define CLOG(level, self, fmt_, ...)                                                               \
  spdlog::level("[proc {} root {}] " fmt_, (self)->state.spec.proc_id, (self)->state.spec.root_id, \
                ##__VA_ARGS__)

void finish(caller_actor* self, bool ok, std::string text) {
  auto& st = self->state;
  self->send(st.reply_to, call_done_atom::value, st.spec.call_id, ok, std::move(text));
  self->quit();
}

void on_reply(caller_actor* self, std::string reply) {
  finish(self, true, std::move(reply));
}

void fail(caller_actor* self, const std::string& what, bool transient) {
  auto& st = self->state;
  if (transient && ++st.attempts < max_call_attempts) {
    retry_policy p;
    p.max_attempts = 0;
    auto delay = retry_delay(p, st.attempts + 1);
    CLOG(warn, self, "call to {} failed ({}); again in {} ms", st.spec.service, what,
         delay.count());
    st.retry_armed = true;
    arm_timeout(self, st.env->timeout, st.spec.proc_id, timeout_kind::call_retry,
                wall_ms() + delay.count(), call_again_atom::value);
    return;
  }
  finish(self, false, "call to " + st.spec.service + " failed: " + what);
}

/// A service of this node: a request to its actor, which may take as long as it likes (the
/// procedure's deadline, if it set one, ends its wait; the executor then stops this actor).
void call_local(caller_actor* self, const caf::actor& svc) {
  auto& st = self->state;
  self->request(svc, caf::infinite, service_call_atom::value, st.spec.call_id, st.spec.request)
    .then([self](std::string& reply) { on_reply(self, std::move(reply)); },
          [self](caf::error& e) { fail(self, error_text(self->system(), e), false); });
}

/// host:port/service: the other node's client protocol (proto/WIRE.md). The round trip
/// blocks, so a one-shot detached actor makes it and replies (transport_ok, text).
/// Parsed as the command lines' HOST:PORT are: a port past 65535 or with trailing text is
/// refused, not wrapped or cut to another port (as a hand-written parse here did).
void call_remote(caller_actor* self, size_t slash) {
  auto& st = self->state;
  auto name = st.spec.service.substr(slash + 1);
  auto where = parse_endpoint(st.spec.service.substr(0, slash));
  if (!where || name.empty())
    return fail(self,
                "'" + st.spec.service
                  + "' is not host:port/service (a port from 1 to 65535, a service name)",
                false);
  pb::Request req;
  auto* c = req.mutable_call();
  c->set_service(name);
  c->set_call_id(st.spec.call_id);
  c->set_request(st.spec.request);
  wire_call_options opts;
  opts.connect_timeout = std::chrono::seconds{10};
  opts.reply_timeout = std::chrono::seconds{60};
  opts.tls = tls_options_of(self->system());  // a node with TLS calls others with it
  opts.cancel = st.cancel.get();
  auto round_trip =
    self->spawn<caf::detached>([host = where->host, port = where->port, opts, cancel = st.cancel,
                                bytes = req.SerializeAsString()](caf::event_based_actor* a) {
      return caf::behavior{[=](rpc_atom) {
        a->quit();
        auto r = wire_call(host, port, bytes, opts);
        return caf::make_message(r.ok(), r.ok() ? r.reply : r.reason);
      }};
    });
  auto bound = opts.connect_timeout + opts.reply_timeout + std::chrono::seconds{5};
  self->request(round_trip, bound, rpc_atom::value)
    .then(
      [self](bool transport_ok, const std::string& text) {
        if (!transport_ok)
          return fail(self, text, true);
        pb::Response r;
        if (!r.ParseFromString(text))
          return fail(self, "malformed reply", false);
        if (r.code() != pb::Response::OK)
          return fail(self, r.error(), false);
        on_reply(self, r.text());
      },
      [self](caf::error& e) { fail(self, error_text(self->system(), e), true); });
}

void issue(caller_actor* self) {
  auto& st = self->state;
  auto slash = st.spec.service.find('/');
  if (slash != std::string::npos)
    return call_remote(self, slash);
  auto svc = st.env->services.find(st.spec.service);
  if (svc == st.env->services.end())
    return fail(self, "no service '" + st.spec.service + "' on this node", false);
  call_local(self, svc->second);
}

caf::behavior caller_fn(caller_actor* self, std::shared_ptr<node_env> env, caf::actor reply_to,
                        call_spec spec) {
  auto& st = self->state;
  st.env = std::move(env);
  st.reply_to = std::move(reply_to);
  st.spec = std::move(spec);
  self->attach_functor([cancel = st.cancel] { cancel->store(true); });
  self->set_exit_handler([self](caf::exit_msg& m) {
    auto& st = self->state;
    if (st.retry_armed)
      cancel_timeout(self, st.env->timeout, st.spec.proc_id, timeout_kind::call_retry);
    self->quit(m.reason);
  });
  self->send(self, call_again_atom::value);  // the call goes out once the actor runs
  return {
    [self](call_again_atom) {
      self->state.retry_armed = false;
      issue(self);
    },
  };
}

}  // namespace

caf::actor spawn_caller(caf::actor_system& sys, std::shared_ptr<node_env> env, caf::actor reply_to,
                        call_spec spec) {
  return sys.spawn(caller_fn, std::move(env), std::move(reply_to), std::move(spec));
}

}  // namespace proctor
