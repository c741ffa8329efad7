// The waiting side of a procedure actor: timers, external events and calls to services.
#include <atomic>
#include <memory>

#include "actors/endpoint.hpp"
#include "actors/wire_client.hpp"

#include "actors/procedure_actor_state.hpp"
#include "actors/rpc.hpp"
#include "actors/timeout_actor.hpp"
#include "actors/tls.hpp"
#include "wire.pb.h"

namespace proctor {

void arm_timer(proc_actor* self, int64_t at_ms, bool event_deadline) {
  auto& st = self->state;
  auto token = ++st.timer_token;
  st.wait_timer_armed = true;
  st.timer_at_ms = at_ms;
  if (event_deadline)
    arm_timeout(self, st.env->timeout, st.id, timeout_kind::wait, at_ms, wake_atom::value,
                std::string{}, true, token);
  else
    arm_timeout(self, st.env->timeout, st.id, timeout_kind::wait, at_ms, retry_atom::value,
                token);
}

void disarm_timer(proc_actor* self) {
  auto& st = self->state;
  ++st.timer_token;
  if (std::exchange(st.wait_timer_armed, false))
    cancel_timeout(self, st.env->timeout, st.id, timeout_kind::wait);
}

void wait_for_event(proc_actor* self, int64_t deadline_ms) {
  auto& st = self->state;
  st.status = proc_state::waiting;
  st.deadline_ms = deadline_ms;
  publish(self, event_wait_reason(st.event_key));
  self->send(st.env->executor, wait_event_atom::value, st.event_key, st.id,
             caf::actor_cast<caf::actor>(self));
  if (deadline_ms > 0)
    arm_timer(self, deadline_ms, true);
  offer_passivation(self);
}

/// Woken by an event (or its deadline): journal the delivery, then run the resume state.
void on_wake(proc_actor* self, const std::string& payload, bool timed_out, std::string why) {
  auto& st = self->state;
  if (st.busy || st.stopping || st.parked || st.status != proc_state::waiting
      || st.event_key.empty())
    return;  // not waiting (any more): a late timer or a duplicate event
  st.busy = true;
  disarm_timer(self);
  pb::JournalRecord rec;
  auto* d = rec.mutable_delivered();
  d->set_proc_id(st.id);
  d->set_event_key(st.event_key);
  d->set_payload_json(payload);
  d->set_timed_out(timed_out);
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  journal_append(self, std::move(batch), [self, payload, timed_out, why] {
    auto& st = self->state;
    auto key = std::move(st.event_key);
    st.event_key.clear();
    st.call_service.clear();
    st.call_request.clear();
    st.event_payload = payload;
    st.event_timed_out = timed_out;
    st.status = proc_state::runnable;
    publish(self);
    if (timed_out && !st.inst->resume_on_timeout())
      return on_business_failure(self, st.state,
                                 why.empty() ? "timed out waiting for event '" + key + "'" : why);
    proceed(self);
  });
}

/// Sends the pending call (again, after a restart: the callee deduplicates by call id).
/// Transport failures are retried with back-off; an error reply fails the call.
void issue_call(proc_actor* self) {
  auto& st = self->state;
  auto token = st.timer_token;
  auto key = st.event_key;
  auto on_reply = [self, token](const std::string& reply) {
    if (self->state.timer_token == token)
      on_wake(self, reply, false);
  };
  auto on_error = [self, token](const std::string& what, bool transient) {
    auto& st = self->state;
    if (st.timer_token != token)
      return;
    if (transient && ++st.call_attempts < 10) {
      retry_policy p;
      p.max_attempts = 0;
      auto delay = retry_delay(p, st.call_attempts + 1);
      PLOG(warn, self, "call to {} failed ({}); again in {} ms", st.call_service, what,
           delay.count());
      arm_timeout(self, st.env->timeout, st.id, timeout_kind::call_retry,
                  now_ms() + delay.count(), call_again_atom::value, token);
      return;
    }
    on_wake(self, "", true, "call to " + st.call_service + " failed: " + what);
  };
  auto slash = st.call_service.find('/');
  if (slash == std::string::npos) {
    auto svc = st.env->services.find(st.call_service);
    if (svc == st.env->services.end())
      return on_error("no service '" + st.call_service + "' on this node", false);
    self->request(svc->second, caf::infinite, service_call_atom::value, key, st.call_request)
      .then([on_reply](const std::string& reply) { on_reply(reply); },
            [self, on_error](caf::error& e) { on_error(self->system().render(e), false); });
    return;
  }
  // host:port/service: the other node's client protocol (proto/WIRE.md). The round trip
  // blocks, so a one-shot detached actor makes it and replies (transport_ok, text); this
  // actor keeps running. It stops waiting within 100 ms once this actor exits.
  // Parsed as the command lines' HOST:PORT are: a port past 65535 or with trailing text is
  // refused, not wrapped or cut to another port (as a hand-written parse here did).
  auto name = st.call_service.substr(slash + 1);
  auto where = parse_endpoint(st.call_service.substr(0, slash));
  if (!where || name.empty())
    return on_error("'" + st.call_service
                      + "' is not host:port/service (a port from 1 to 65535, a service name)",
                    false);
  auto host = where->host;
  auto port = where->port;
  pb::Request req;
  auto* c = req.mutable_call();
  c->set_service(name);
  c->set_call_id(key);
  c->set_request(st.call_request);
  wire_call_options opts;
  opts.connect_timeout = std::chrono::seconds{10};
  opts.reply_timeout = std::chrono::seconds{60};
  opts.tls = tls_options_of(self->system());  // a node with TLS calls others with it
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  opts.cancel = cancel.get();
  self->attach_functor([cancel] { cancel->store(true); });
  auto caller = self->spawn<caf::detached>(
    [host, port, opts, cancel, bytes = req.SerializeAsString()](caf::event_based_actor* a) {
      return caf::behavior{[=](rpc_atom) {
        a->quit();
        auto r = wire_call(host, port, bytes, opts);
        return caf::make_message(r.ok(), r.ok() ? r.reply : r.reason);
      }};
    });
  auto bound = opts.connect_timeout + opts.reply_timeout + std::chrono::seconds{5};
  self->request(caller, bound, rpc_atom::value)
    .then(
      [on_reply, on_error](bool transport_ok, const std::string& text) {
        if (!transport_ok)
          return on_error(text, true);
        pb::Response r;
        if (!r.ParseFromString(text))
          return on_error("malformed reply", false);
        if (r.code() != pb::Response::OK)
          return on_error(r.error(), false);
        on_reply(r.text());
      },
      [self, on_error](caf::error& e) { on_error(self->system().render(e), true); });
}

/// Waits for the reply of the pending call (and its deadline).
void wait_for_call(proc_actor* self, int64_t deadline_ms) {
  auto& st = self->state;
  st.status = proc_state::waiting;
  st.call_attempts = 0;
  publish(self, "reply from " + st.call_service);
  if (deadline_ms > 0)
    arm_timer(self, deadline_ms, true);
  issue_call(self);
}

} // namespace proctor
