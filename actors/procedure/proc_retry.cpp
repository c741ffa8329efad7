// An operator's retry (`proctor retry`): a procedure whose step failed past its point of no
// return and ran out of attempts (FAILED, its tree waiting for an operator), or whose step
// failed and backs off before its next attempt, runs that step again now, from its last
// committed data, its attempts counting again from 1. The order travels down the tree from
// the root as a bypass does (proc_bypass.cpp); the procedure journals a Retried record and
// answers "" once it is durable, then schedules the step. Nothing is answered, and nothing
// runs, before the record is durable.
#include <algorithm>

#include "actors/base/errors.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

/// FAILED for good: past its point of no return and out of attempts (on_business_failure).
bool failed_for_good(const proc_actor_state& st) {
  return st.status == proc_state::failed && !st.busy && !st.rollback.failing && !st.parked
         && !st.stopping && !st.finishing;
}

/// Why the procedure's step cannot be retried now ("" when it can).
std::string refusal(proc_actor* self) {
  auto& st = self->state;
  auto me = "procedure " + std::to_string(st.id);
  if (st.retrying)
    return me + " is being retried already";
  if (st.bypassing || st.finishing)
    return me + " is already ending";
  if (st.rollback.failing || st.parked || st.stopping)
    return me + ": its tree is failing or stopping; a rollback is not retried";
  if (failed_for_good(st))
    return {};
  if (st.backing_off && !st.busy && !st.job_queued)
    return {};
  auto what = std::string(to_string(st.status));
  if (st.busy)
    what += ", running a step";
  return me + " is " + what
         + ": only a procedure FAILED past its point of no return, or one backing off "
           "before its step's next attempt, can be retried";
}

void commit_retry(proc_actor* self, caf::typed_response_promise<std::string> rp) {
  auto& st = self->state;
  bool was_failed = failed_for_good(st);
  // Backing off, `attempt` is already the next attempt's number (retry_step counts it).
  auto made = was_failed ? st.attempt : std::max(st.attempt - 1, 1);
  st.retrying = true;
  st.busy = true;
  disarm_timer(self);  // its back-off no longer fires
  PLOG(warn, self, "retried by an operator while {} after {} attempt(s) of state {}: {}",
       was_failed ? "FAILED" : "backing off", made, st.inst->state_name(st.state), st.last_failure);
  pb::JournalRecord rec;
  auto* r = rec.mutable_retried();
  r->set_proc_id(st.id);
  r->set_state(st.state);
  r->set_attempts(made);
  r->set_was_failed(was_failed);
  r->set_error(st.last_failure);
  const auto at = wall_ms();
  r->set_at_ms(at);
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  journal_append(self, std::move(batch), [self, rp, at]() mutable {
    auto& st = self->state;
    st.retrying = false;
    st.backing_off = false;
    // As any retry: from the last committed data, not what the failed attempt left.
    if (!st.inst->data().ParseFromString(st.committed_data)) {
      rp.deliver(std::string{});  // durable: the restart below runs the step again
      PLOG(error, self, "cannot reload the committed data for a retry; restarting instead");
      self->quit(caf::make_error(errc::step_crashed, "committed data does not parse"));
      return;
    }
    st.attempt = 1;
    st.busy = false;
    set_status(self, proc_state::runnable, at);
    PLOG(info, self, "its Retried record is durable: state {} runs again (attempt 1)",
         st.inst->state_name(st.state));
    // Its status first, straight to the executor: the answer goes up the tree, and the
    // executor answers the operator with the status it holds then.
    publish(self);
    rp.deliver(std::string{});
    schedule(self);
  });
}

void retry_here(proc_actor* self, caf::typed_response_promise<std::string> rp) {
  if (auto why = refusal(self); !why.empty()) {
    rp.deliver(std::move(why));
    return;
  }
  commit_retry(self, std::move(rp));
}

}  // namespace

caf::result<std::string> on_operator_retry(proc_actor* self, retry_order& order) {
  auto& st = self->state;
  if (order.path.empty())
    return std::string{"no procedure named"};
  if (order.path.back() != st.id) {
    // On the way down: hand it to the child on the path.
    auto pos = std::find(order.path.begin(), order.path.end(), st.id);
    auto* c =
      pos == order.path.end() || pos + 1 == order.path.end() ? nullptr : st.child(*(pos + 1));
    if (c != nullptr && c->passivated)
      wake_passivated(self, *c);
    if (c == nullptr || c->ended || !c->handle)
      return "procedure " + std::to_string(order.path.back())
             + " has no running actor (its subtree is restarting, or it ended); retry";
    auto rp = self->make_response_promise<std::string>();
    self->request(c->handle, std::chrono::seconds{20}, op_retry_atom::value, std::move(order))
      .then([rp](std::string& why) mutable { rp.deliver(std::move(why)); },
            [rp](caf::error&) mutable {
              rp.deliver(std::string{"the procedure's actor did not answer; retry"});
            });
    return rp;
  }
  if (st.passivation.attempting) {
    // The executor counted this order in flight, so it refuses the passivation asked for.
    auto rp = self->make_response_promise<std::string>();
    st.passivation.on_decided.push_back([self, rp](bool agreed) mutable {
      if (agreed)
        rp.deliver("procedure " + std::to_string(self->state.id) + " passivated meanwhile; retry");
      else
        retry_here(self, rp);
    });
    return rp;
  }
  if (st.passivation.holding) {
    auto rp = self->make_response_promise<std::string>();
    hold(self, [self, rp]() mutable { retry_here(self, rp); });
    return rp;
  }
  if (auto why = refusal(self); !why.empty())
    return why;
  auto rp = self->make_response_promise<std::string>();
  commit_retry(self, rp);
  return rp;
}

}  // namespace proctor
