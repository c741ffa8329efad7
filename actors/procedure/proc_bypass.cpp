// An operator's bypass (`proctor bypass`, HBCK2's bypass): the procedure ends SUCCESS without
// running or undoing anything more of it, and its parent carries on as if it succeeded. The
// executor decides whether it may (stuck, or forced); the request travels down the tree from
// the root to the procedure's own actor, which refuses while a step of it runs or while
// children of it have not ended.
#include <algorithm>

#include "actors/base/errors.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

/// Why the procedure cannot be bypassed now ("" when it can).
std::string refusal(proc_actor* self) {
  auto& st = self->state;
  auto me = "procedure " + std::to_string(st.id);
  // Bypassed already, and that is durable (its first order was answered so): it ended.
  if (st.bypassing && st.status == proc_state::success)
    return me + " already ended SUCCESS (bypassed)";
  if (st.finishing)
    return me + " is already ending";
  if (st.rollback.failing || st.parked || st.stopping)
    return me + ": its tree is failing or stopping; bypass does not skip a rollback";
  if (st.busy && !st.job_queued)
    return me + " is running a step (or writing its commit); bypass it while it waits";
  size_t live = 0;
  for (const auto& c : st.children)
    live += c.ended ? 0 : 1;
  if (live > 0)
    return me + " has " + std::to_string(live)
           + " child(ren) that have not ended; bypass them (or wait for them) first";
  return {};
}

/// Journals the bypass and ends the procedure as its last step's done would.
void commit_bypass(proc_actor* self, const bypass_order& order,
                   caf::typed_response_promise<std::string> rp) {
  auto& st = self->state;
  st.bypassing = true;
  st.busy = true;
  disarm_timer(self);  // its retry, wake-up or deadline no longer fires
  PLOG(warn, self, "bypassed by an operator while {}{}{}", to_string(st.status),
       order.waiting_for.empty() ? "" : " (" + order.waiting_for + ")",
       order.forced ? ", forced" : "");
  pb::JournalRecord rec;
  auto* b = rec.mutable_bypassed();
  b->set_proc_id(st.id);
  b->set_state(to_pb(st.status));
  b->set_waiting_for(order.waiting_for);
  b->set_forced(order.forced);
  const auto at = wall_ms();
  b->set_at_ms(at);
  auto success = [self, at] {
    auto u = current_update(self);
    u.state = proc_state::success;
    u.ended = true;
    u.bypassed = true;
    u.since_ms = u.ended_at_ms = at;
    return u;
  };
  if (st.is_fragment()) {
    // Its parent's node learns of the end as of any fragment's.
    finish_fragment(self, std::move(rec), {}, [rp]() mutable { rp.deliver(std::string{}); });
    return;
  }
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  journal_append(self, std::move(batch), [self, rp, success, at]() mutable {
    auto& st = self->state;
    set_status(self, proc_state::success, at);
    rp.deliver(std::string{});
    auto procs = std::move(st.finished_subtree);
    procs.push_back(success());
    if (st.is_root)
      return finish_tree(self, std::move(procs), false);
    st.busy = false;
    self->send(st.env->executor, update_atom::value, procs.back());
    if (!st.locks.empty())
      self->send(st.env->scheduler, unlock_atom::value, st.id);
    subtree_done d;
    d.result = child_result{st.id, proc_state::success, {}, {}, false};
    d.procs = std::move(procs);
    self->send(st.parent, subtree_done_atom::value, std::move(d));
    self->quit();
  });
}

void bypass_here(proc_actor* self, const bypass_order& order,
                 caf::typed_response_promise<std::string> rp);

}  // namespace

caf::result<std::string> on_bypass(proc_actor* self, bypass_order& order) {
  auto& st = self->state;
  // A promise is made only once the answer is known to come later: making one takes the
  // answer over, so a value returned after it would never reach the executor.
  if (order.path.empty())
    return std::string{"no procedure named"};
  if (order.path.back() != st.id) {
    // On the way down: hand it to the child on the path.
    auto pos = std::find(order.path.begin(), order.path.end(), st.id);
    auto* c =
      pos == order.path.end() || pos + 1 == order.path.end() ? nullptr : st.child(*(pos + 1));
    if (c != nullptr && c->passivated)
      wake_passivated(self, *c);  // it comes back to be bypassed, as a passivated tree does
    if (c == nullptr || c->ended || !c->handle)
      return "procedure " + std::to_string(order.path.back())
             + " has no running actor (its subtree is restarting, or it ended); retry";
    auto rp = self->make_response_promise<std::string>();
    self->request(c->handle, std::chrono::seconds{20}, bypass_atom::value, std::move(order))
      .then([rp](std::string& why) mutable { rp.deliver(std::move(why)); },
            [rp](caf::error&) mutable {
              rp.deliver(std::string{"the procedure's actor did not answer; retry"});
            });
    return rp;
  }
  if (st.passivation.attempting) {
    // The executor counted this order in flight before sending it, so it refuses the
    // passivation asked for: the bypass goes on with that answer.
    auto rp = self->make_response_promise<std::string>();
    st.passivation.on_decided.push_back([self, order, rp](bool agreed) mutable {
      if (agreed)
        rp.deliver("procedure " + std::to_string(self->state.id) + " passivated meanwhile; retry");
      else
        bypass_here(self, order, rp);
    });
    return rp;
  }
  if (st.passivation.holding) {
    // Its tree is being passivated; the executor counted this order in flight, so it
    // refuses, and the tree resumes: the order goes on then.
    auto rp = self->make_response_promise<std::string>();
    hold(self, [self, order, rp]() mutable {
      if (auto why = refusal(self); !why.empty())
        rp.deliver(std::move(why));
      else
        bypass_here(self, order, rp);
    });
    return rp;
  }
  if (auto why = refusal(self); !why.empty())
    return why;
  auto rp = self->make_response_promise<std::string>();
  bypass_here(self, order, rp);
  return rp;
}

namespace {

void bypass_here(proc_actor* self, const bypass_order& order,
                 caf::typed_response_promise<std::string> rp) {
  auto& st = self->state;
  if (auto why = refusal(self); !why.empty()) {
    rp.deliver(why);
    return;
  }
  if (!st.job_queued)
    return commit_bypass(self, order, rp);
  // A step queued for a run slot or a lock: it must not run after the bypass.
  self->request(st.env->scheduler, std::chrono::seconds{10}, cancel_atom::value, st.id)
    .then(
      [self, order, rp](bool cancelled) mutable {
        auto& st = self->state;
        if (!cancelled || !st.job_queued) {
          rp.deliver("procedure " + std::to_string(st.id)
                     + " started a step meanwhile; retry when it waits");
          return;
        }
        st.job_queued = false;
        st.busy = false;
        if (auto why = refusal(self); !why.empty()) {
          rp.deliver(why);
          return;
        }
        commit_bypass(self, order, rp);
      },
      [rp](caf::error&) mutable {
        rp.deliver(std::string{"the scheduler did not answer; retry"});
      });
}

}  // namespace

}  // namespace proctor
