// The waiting side of a procedure actor: timers, external events and calls to services.
#include <atomic>

#include "actors/base/task_spec.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/keys.hpp"

namespace proctor {

/// The key a new call of procedure `id` waits under: unique on this node across restarts
/// (the time, then a count within the process), so that two calls of one procedure in the
/// same millisecond do not share a call id, which the service would take for one call sent
/// twice and answer with the first reply.
std::string new_call_key(uint64_t id, bool undo) {
  static std::atomic<uint64_t> calls{0};
  return call_key_prefix + std::to_string(id) + (undo ? undo_task_infix : ":")
         + std::to_string(wall_ms()) + ":"
         + std::to_string(calls.fetch_add(1, std::memory_order_relaxed));
}

void arm_timer(proc_actor* self, int64_t at_ms, bool event_deadline) {
  auto& st = self->state;
  auto token = ++st.timer_token;
  st.wait_timer_armed = true;
  st.timer_at_ms = at_ms;
  if (event_deadline)
    arm_timeout(self, st.env->timeout, st.id, timeout_kind::wait, at_ms, wake_atom::value, token);
  else
    arm_timeout(self, st.env->timeout, st.id, timeout_kind::wait, at_ms, retry_atom::value, token);
}

void disarm_timer(proc_actor* self) {
  auto& st = self->state;
  ++st.timer_token;
  if (std::exchange(st.wait_timer_armed, false))
    cancel_timeout(self, st.env->timeout, st.id, timeout_kind::wait);
}

void wait_for_event(proc_actor* self, int64_t deadline_ms) {
  auto& st = self->state;
  set_status(self, proc_state::waiting, 0);  // its step's commit set it, a restart read it
  st.deadline_ms = deadline_ms;
  publish(self, event_wait_reason(st.event_key));
  register_wait(self);
  if (deadline_ms > 0)
    arm_timer(self, deadline_ms, true);
  offer_passivation(self);
}

void decline_event(proc_actor* self, uint64_t event_lsn) {
  if (event_lsn != 0)
    self->send(self->state.env->executor, event_declined_atom::value, event_lsn, self->state.id);
}

/// Woken by an event (or its deadline): journal the delivery, then run the resume state.
void on_wake(proc_actor* self, const std::string& payload, bool timed_out, std::string why,
             uint64_t event_lsn, bool consume) {
  auto& st = self->state;
  if (st.busy || st.stopping || st.parked || st.status != proc_state::waiting
      || st.event_key.empty())
    return decline_event(self, event_lsn);  // not waiting (any more): a late timer or event
  st.busy = true;
  disarm_timer(self);
  pb::JournalRecord rec;
  auto* d = rec.mutable_delivered();
  d->set_proc_id(st.id);
  d->set_event_key(st.event_key);
  d->set_payload_json(payload);
  d->set_timed_out(timed_out);
  const auto at = wall_ms();
  d->set_at_ms(at);
  d->set_event_lsn(event_lsn);
  // Why it fails, unless an on_timeout state or the type resumes it: journaled, so that a
  // restart before the Failed record gives this reason and not a generic one.
  const bool fails = timed_out && !st.timeout_state && !st.inst->resume_on_timeout();
  if (fails && why.empty())
    why = "timed out waiting for event '" + st.event_key + "'";
  if (fails)
    d->set_failure(why);
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  // Its only taker consumes the event: its record goes with this one, so that a crash leaves
  // the event kept and this procedure waiting for it, or neither (docs/concepts.md, "Events").
  if (consume && event_lsn != 0)
    batch.deletes.push_back({journal_keys::meta_root, event_lsn, event_lsn + 1});
  journal_append(self, std::move(batch), [self, payload, timed_out, fails, why, at, event_lsn] {
    auto& st = self->state;
    if (event_lsn != 0)
      self->send(st.env->executor, event_taken_atom::value, event_lsn, st.id);
    st.event_key.clear();
    st.call_service.clear();
    st.call_request.clear();
    st.event_payload = payload;
    st.event_timed_out = timed_out;
    if (timed_out && st.timeout_state)
      st.state = *st.timeout_state;  // the wait's on_timeout state (the journal folds so too)
    set_status(self, proc_state::runnable, at);
    publish(self);
    if (fails)
      return on_business_failure(self, st.state, why);
    proceed(self);
  });
}

/// Waits for the reply of the pending call (and its deadline). The executor has the call
/// made (again after the node restarted: the callee deduplicates by call id) unless it is
/// under way, and routes its reply here as an event under the call id (executor_calls.cpp):
/// so this actor may go while it waits, as an event waiter does.
void wait_for_call(proc_actor* self, int64_t deadline_ms) {
  auto& st = self->state;
  set_status(self, proc_state::waiting, 0);  // its step's commit set it, a restart read it
  st.deadline_ms = deadline_ms;
  publish(self, call_wait_reason(st.call_service));
  register_wait(self);
  if (deadline_ms > 0)
    arm_timer(self, deadline_ms, true);
  offer_passivation(self);
}

void register_wait(proc_actor* self, uint64_t id, bool via, const std::string& key,
                   const std::string& call_service, const std::string& call_request) {
  const auto& executor = self->state.env->executor;
  auto me = caf::actor_cast<caf::actor>(self);
  if (!call_service.empty())
    self->send(executor, wait_call_atom::value, key, id, std::move(me), via, call_service,
               call_request);
  else if (via)
    self->send(executor, wait_event_via_atom::value, key, id, std::move(me));
  else
    self->send(executor, wait_event_atom::value, key, id, std::move(me));
}

void register_wait(proc_actor* self) {
  auto& st = self->state;
  register_wait(self, st.id, false, st.event_key, st.call_service, st.call_request);
}

}  // namespace proctor
