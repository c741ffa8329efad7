#include "actors/procedure/procedure_actor.hpp"

#include <algorithm>
#include <chrono>

#include "actors/base/errors.hpp"
#include "actors/base/leader_fence.hpp"
#include "actors/cluster/peer_link.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/scheduling/worker_pool.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/thread_counters.hpp"

namespace proctor {

void set_status(proc_actor* self, proc_state s, int64_t at_ms) {
  auto& st = self->state;
  if (st.status == s)
    return;
  st.status = s;
  st.since_ms = at_ms != 0 ? at_ms : wall_ms();
}

proc_update current_update(proc_actor* self) {
  auto& st = self->state;
  proc_update u;
  u.id = st.id;
  u.root_id = st.root_id;
  u.parent_id = st.parent_id;
  u.type = st.type;
  u.state = st.status;
  for (const auto& c : st.children)
    u.children.push_back(c.id);
  u.nonce = st.nonce;
  u.started_at_ms = st.submitted_at_ms;
  u.since_ms = st.since_ms;
  return u;
}

void publish(proc_actor* self, std::string waiting_for, bool passing) {
  auto u = current_update(self);
  u.waiting_for = std::move(waiting_for);
  if (passing)
    u.since_ms = 0;
  self->send(self->state.env->executor, update_atom::value, std::move(u));
}

void journal_append(proc_actor* self, journal_batch batch, std::function<void()> then) {
  // A tagged send, not a request: no response handler to build and match for each step. The
  // journal acknowledges only durable writes and fail-stops the node on a write error, so an
  // append that is never acknowledged means the node is going down; nothing proceeds.
  auto& st = self->state;
  count_tree_records(self, batch);
  auto tag = ++st.last_append_tag;
  st.appends.push_back({tag, std::move(then), {}, 0});
  self->send(st.env->journal, append_atom::value, std::move(batch), tag);
}

void journal_append_lsn(proc_actor* self, journal_batch batch,
                        std::function<void(uint64_t, size_t)> then) {
  auto& st = self->state;
  count_tree_records(self, batch);
  auto tag = ++st.last_append_tag;
  auto n = batch.entries.size();
  st.appends.push_back({tag, {}, std::move(then), n});
  self->send(st.env->journal, append_atom::value, std::move(batch), tag);
}

namespace {

/// The journal made the append `tag` durable: run what waited for it.
void on_appended(proc_actor* self, uint64_t tag, uint64_t lsn) {
  auto& pending = self->state.appends;
  // The journal acknowledges a sender's appends in the order they were sent.
  auto i = std::find_if(pending.begin(), pending.end(), [tag](auto& a) { return a.tag == tag; });
  if (i == pending.end()) {
    PLOG(error, self, "acknowledgement of an unknown journal append {}", tag);
    return;
  }
  auto a = std::move(*i);
  pending.erase(i);
  if (a.then_lsn)
    a.then_lsn(lsn, a.entries);
  else
    a.then();
}

/// Child `d.result.id` ended: it and its subtree's updates are collected, its parent's join
/// looked at again. (Its actor quits next: child_went, after this.)
void on_subtree_done(proc_actor* self, subtree_done& d) {
  auto& st = self->state;
  auto* c = st.child(d.result.id);
  if (c == nullptr || c->cancelling)
    return;              // (ended while cancelled: undone all the same, proc_cancel.cpp)
  int64_t ended_at = 0;  // its own update is in the subtree's, with its end's time
  for (const auto& u : d.procs)
    if (u.id == d.result.id)
      ended_at = u.ended_at_ms;
  st.child_ended(*c, d.result, ended_at);
  for (auto& u : d.procs)
    st.finished_subtree.push_back(std::move(u));
  if (d.result.state == proc_state::success)
    join_after_success(self);  // enough of them: the others are cancelled
  maybe_join(self);
  // Still waiting for others: what ran in that child's branch may have been all that
  // kept the tree awake.
  if (st.status == proc_state::waiting && st.waiting_left > 0 && !st.passivation.holding)
    offer_passivation(self);
  // Thawed while that child ran: with it ended, its other children may all have gone.
  if (st.passivation.wanted)
    offer_parent_passivation(self);
}

/// Runs `job`'s step on this actor (a type whose steps never block) and acts on its outcome.
void run_here(proc_actor* self, step_job& job) {
  if (!leader_fence::open()) {
    // Only a leader acts: this replica is not sure it still leads. Looked at again shortly
    // (the gate opens, or the process re-executes as a follower): never blocks this thread.
    self->delayed_send(self, std::chrono::milliseconds{10}, run_inline_atom::value, std::move(job));
    return;
  }
  auto r = worker_pool::run(job);
  if (!job.direct)
    self->send(self->state.env->scheduler, slot_atom::value, job.ticket);
  if (r.undo)
    return on_undo_done(self, r);
  on_step_done(self, r);
}

}  // namespace

void schedule(proc_actor* self, bool now) {
  auto& st = self->state;
  step_job job;
  job.proc = caf::actor_cast<caf::actor>(self);
  job.inst = st.inst;
  job.ctx.id_ = st.id;
  job.ctx.root_id_ = st.tree_root_id;
  job.ctx.parent_id_ = st.parent_id;
  job.ctx.node_ = &st.env->node_name;
  job.nodes = st.env->cluster->node_names();
  job.ctx.nodes_ = job.nodes.get();
  job.ctx.attempt_ = st.attempt;
  job.ctx.fencing_.epoch = st.env->epoch;
  job.ctx.children_ = st.child_results;
  job.ctx.event_payload_ = st.event_payload;
  job.ctx.event_timed_out_ = st.event_timed_out;
  job.state = st.state;
  job.priority = st.priority;
  job.run_inline = runs_on_actor(st.ptype, *st.inst, st.state, false);
  if (!job.run_inline) {
    // A long step may look whether it is still wanted (ctx.cancelled()): stop_subtree says.
    if (!st.cancel_flag)
      st.cancel_flag = std::make_shared<std::atomic<bool>>(false);
    else
      st.cancel_flag->store(false, std::memory_order_relaxed);
    job.ctx.cancel_flag_ = st.cancel_flag;
  }
  job.first = !st.started;
  st.busy = true;
  st.job_queued = true;
  set_status(self, proc_state::runnable, 0);  // callers that know when set it first
  st.ran_partly_by_queue = !st.ran_partly;
  st.ran_partly = true;
  if (job.run_inline && st.locks.empty() && !st.env->limited(st.type)) {
    // A step that never blocks, needs no lock and has no type limit has nothing to wait
    // for: it takes no run slot (those bound the worker threads) and so needs no turn from
    // the scheduler. It runs on this actor: at once when the caller says nothing else needs
    // a look first (right after a commit: a stop or abort already queued is seen before the
    // next step commits), else after whatever is already in its mailbox (a stop, an abort).
    job.direct = true;
    if (now)
      return run_here(self, job);
    self->send(self, run_inline_atom::value, std::move(job));
    return;
  }
  job.type = st.type;
  job.locks = st.locks;
  job.ancestors = st.ancestors;
  self->send(st.env->scheduler, ready_atom::value, std::move(job));
}

void maybe_join(proc_actor* self) {
  auto& st = self->state;
  if (st.stopping || st.rollback.failing || st.parked || st.busy || st.status != proc_state::waiting
      || !st.event_key.empty())
    return;
  if (st.waiting_left > 0)
    return;
  if (st.passivation.holding)
    return hold(self, [self] { maybe_join(self); });
  if (auto why = join_unmet(st); !why.empty())
    return fail_join(self, why);  // proc_cancel.cpp
  st.child_results.clear();
  int64_t last_end = 0;  // it runs again from the last of its children's ends
  for (auto w : st.waiting_on) {
    const auto* c = st.child(w);
    st.child_results.push_back(c->result);
    last_end = last_end < 0 || c->ended_at_ms == 0 ? -1 : std::max(last_end, c->ended_at_ms);
  }
  set_status(self, proc_state::runnable, std::max<int64_t>(last_end, 0));
  schedule(self);
  publish(self);
}

namespace {
// Per thread, like the actors' message counts: no locked instruction per spawn.
struct actors_started_tag {};
using actors_started = thread_counters<actors_started_tag, 1>;
}  // namespace

uint64_t procedure_actors_started() {
  return actors_started::sum(0);
}

caf::behavior procedure_actor(proc_actor* self, proc_start start) {
  actors_started::add(0);
  // Its parent's end comes as a down_msg too (watch_children). A child gone leaves room
  // for a queued wake-up (max_live_children).
  self->set_down_handler([self](caf::down_msg& m) {
    on_down(self, m);
    wake_queued(self);
  });
  bool announced = start.submitted != nullptr;
  self->state.self_addr = self->address();
  if (!init_from_image(self, start)) {
    self->quit(caf::make_error(errc::quarantined, "cannot recreate procedure"));
    return {};
  }
  auto& st = self->state;
  if (start.rollback) {
    st.rollback.failing = true;
    st.rollback.failure = start.image->failure;
    run_rollback(self, start.image);
  } else {
    // Children first: a parent's own run may depend on how they end. Those that only wait
    // for a timer or an event stay passivated until it comes (proc_passivated_children.cpp).
    for (auto& c : st.children) {
      if (c.ended || c.cancelling)
        continue;  // (a cancelled child is undone below, never run again)
      if (may_passivate_unspawned(self, *start.image, c.id))
        put_to_sleep(self, c, start.image);
      else
        spawn_child(self, start.image, c.id);
    }
    // Its next step sees the children of the step just before it (waiting_on: empty unless
    // that step spawned), in spawn order, as maybe_join hands them on a live path; never the
    // children of an earlier spawn.
    if (st.status == proc_state::runnable)
      for (auto w : st.waiting_on)
        if (const auto* c = st.child(w))
          st.child_results.push_back(c->result);
    for (auto& [cid, why] : st.remote_failed) {
      if (st.is_root) {
        begin_tree_failure(self, cid, 0, why);
        continue;
      }
      self->request(st.root, caf::infinite, tree_fail_atom::value, cid, int32_t{0}, why)
        .then([](bool) {}, [self](caf::error& e) { self->quit(e); });
    }
    if (!st.remote_failed.empty())
      st.status = proc_state::waiting;  // for the tree's stop, which comes next
    switch (st.status) {
      case proc_state::runnable:
        if (!st.event_key.empty() || start.image->find(st.id)->event_delivered) {
          // An event was delivered but the resume step had not run yet.
          st.event_key.clear();
          if (st.event_timed_out && !st.timeout_state && !st.inst->resume_on_timeout()) {
            st.busy = true;
            // (journals older than EventDelivered.failure give no reason)
            on_business_failure(self, st.state,
                                st.event_failure.empty() ? "timed out waiting for an event"
                                                         : st.event_failure);
            break;
          }
        }
        if (!announced)
          publish(self);
        schedule(self);
        break;
      case proc_state::waiting:
        if (!st.call_service.empty()) {
          wait_for_call(self, start.image->find(st.id)->deadline_ms);
        } else if (!st.event_key.empty()) {
          wait_for_event(self, start.image->find(st.id)->deadline_ms);
        } else {
          publish(self, "children");
          offer_passivation(self);
        }
        break;
      case proc_state::waiting_timeout:
        if (start.timer_due) {
          // It runs again from its wake-up, as a restart reads it back.
          set_status(self, proc_state::runnable, start.image->find(st.id)->wake_at_ms);
          // Its parent held it passivated and its timer fired: as the timer's retry_atom would.
          // A step that runs here at once (schedule's direct case) is not announced as
          // runnable first: its commit's update follows within the journal's next write
          // (one message fewer, and one update fewer for the executor, per timer resumed).
          if (runs_on_actor(st.ptype, *st.inst, st.state, false) && st.locks.empty()) {
            schedule(self, true);
            break;
          }
          publish(self);
          schedule(self);
          break;
        }
        publish(self, "timer");
        arm_timer(self, start.image->find(st.id)->wake_at_ms, false);
        offer_passivation(self);
        break;
      default:
        PLOG(warn, self, "started in state {}", to_string(st.status));
        break;
    }
    if (st.status == proc_state::waiting && st.event_key.empty() && st.call_service.empty()) {
      // Its join, as the journal left it: cancellations to carry on, or to begin (a crash
      // came before their record), or a join that can no longer be met.
      run_cancellations(self);
      join_after_success(self);
      maybe_join(self);
    }
  }
  return {
    [self](appended_atom, uint64_t tag, uint64_t lsn) { on_appended(self, tag, lsn); },
    [self](compact_atom) { compact_tree(self); },
    // Our turn, for a type whose steps never block: run it here, free the slot, go on.
    [self](run_inline_atom, step_job& job) { run_here(self, job); },
    [self](step_done_atom, step_result& r) {
      if (r.undo)
        return on_undo_done(self, r);
      on_step_done(self, r);
    },
    [self](subtree_done_atom, subtree_done& d) {
      on_subtree_done(self, d);
      child_went(self, d.result.id);  // its actor quits next (watch_child)
    },
    [self](delivered_atom, std::string& key, std::string& payload, std::string& failure,
           uint64_t event_lsn, bool consume) {
      auto& st = self->state;
      if (!st.rollback.task_key.empty() && key == st.rollback.task_key)
        return on_undo_task_end(self, payload, failure, event_lsn, consume);  // undo_tasks.cpp
      // It no longer waits for this (it timed out, or was bypassed): an event goes back.
      if (st.bypassing || key != st.event_key)
        return decline_event(self, event_lsn);
      bool failed = !failure.empty();
      if (st.passivation.holding || st.passivation.offered)
        return hold(self, [self, key, payload, failed, failure, event_lsn, consume] {
          if (key == self->state.event_key)
            on_wake(self, payload, failed, failure, event_lsn, consume);
          else
            decline_event(self, event_lsn);
        });
      on_wake(self, payload, failed, std::move(failure), event_lsn, consume);
    },
    [self](wake_atom, uint64_t token) {  // its event's or call's deadline passed
      auto& st = self->state;
      if (token != st.timer_token || st.bypassing)
        return;
      st.wait_timer_armed = false;  // it fired
      // Its tree is being passivated (proc_passivate_tree.cpp), or it offered to give up its
      // actor (proc_passivate_waiter.cpp).
      if (st.passivation.holding || st.passivation.offered)
        return hold(self, [self] { on_wake(self, "", true); });
      on_wake(self, "", true);
    },
    [self](wake_child_atom, uint64_t cid) { on_wake_child(self, cid); },
    [self](wake_children_atom) { on_wake_children(self); },
    [self](passivate_offer_atom, uint64_t cid, std::shared_ptr<const tree_image>& image) {
      on_passivate_offer(self, cid, std::move(image));
    },
    [self](passivate_reply_atom, bool accepted) { on_passivate_reply(self, accepted); },
    [self](passivate_undo_atom, uint64_t cid) { on_passivate_undo(self, cid); },
    [self](passivate_atom, uint64_t token) { try_passivate(self, token); },
    [self](passivate_query_atom, uint64_t tag) {
      on_passivate_query(self, caf::actor_cast<caf::actor>(self->current_sender()), tag);
    },
    [self](passivate_answer_atom, uint64_t tag, uint64_t child_id, passivation_answer& a) {
      on_passivate_answer(self, tag, child_id, a);
    },
    [self](passivation_refused_atom) { passivation_refused(self); },
    [self](passivate_late_atom, uint64_t attempt) { on_passivate_late(self, attempt); },
    [self](passivate_hint_atom) {
      auto& st = self->state;
      if (st.status == proc_state::waiting || st.status == proc_state::waiting_timeout)
        offer_passivation(self);
    },
    [self](retry_atom, uint64_t token) {
      auto& st = self->state;
      if (token != st.timer_token || st.busy || st.stopping || st.parked)
        return;
      st.wait_timer_armed = false;  // it fired
      // After a timer (not a retry's back-off) it runs again from its wake-up, as a restart
      // reads it back.
      auto resume = [self] {
        auto& st = self->state;
        st.backing_off = false;
        if (st.status == proc_state::waiting_timeout)
          set_status(self, proc_state::runnable, st.timer_at_ms);
        publish(self);
        schedule(self);
      };
      if (st.passivation.holding || st.passivation.offered)
        return hold(self, [self, token, resume] {
          auto& st = self->state;
          if (token != st.timer_token || st.busy || st.stopping || st.parked)
            return;
          resume();
        });
      resume();
    },
    [self](stop_atom) { stop_subtree(self); },
    [self](stopped_atom, uint64_t cid, const std::vector<uint64_t>& clean) {
      if (auto* c = self->state.child(cid))
        child_stopped(self, *c, &clean);
      child_went(self, cid);  // its actor quits next (watch_child)
    },
    [self](child_failed_atom, uint64_t cid, int32_t state, std::string& error, bool undone) {
      return on_child_failed(self, cid, state, error, undone);
    },
    [self](tree_fail_atom, uint64_t proc_id, int32_t state, std::string& error) {
      return begin_tree_failure(self, proc_id, state, error);
    },
    [self](no_return_atom) { self->state.rollback.past_no_return = true; },
    // The scheduler holds its step back ("lock NAME", "type limit x: 10 of 10 running"),
    // or lets it go ("").
    [self](lock_wait_atom, const std::string& why) {
      if (why.empty())
        publish(self);  // granted: in its state since as before
      else
        publish(self, why, true);
    },
    [self](restart_atom, std::vector<uint64_t>& ids) { restart_children(self, std::move(ids)); },
    [self](undo_retry_atom) { run_rollback(self, self->state.rollback.image); },
    [self](remote_end_atom, const std::string& bytes, int64_t) {
      on_remote_end_in_rollback(self, bytes);
    },
    // A node this root's rollback may wait for went down or came back.
    [self](peer_status_atom, const peer_status&) {
      if (self->state.busy)
        show_remote_wait(self);
    },
    // The parent's tree (on another node) rolls back: so does this fragment.
    [self](remote_rollback_atom, const std::string& reason) -> caf::result<bool> {
      auto& st = self->state;
      if (st.finishing)  // its end is on its way; the executor orders the rollback again
        return caf::make_error(errc::already_ended);
      if (st.rollback.past_no_return)
        return false;
      if (!st.rollback.failing && !begin_tree_failure(self, st.id, 0, reason))
        return false;
      if (!st.rollback.busy_failure_record)
        return true;
      auto rp = self->make_response_promise<bool>();
      st.rollback.failure_acks.push_back(rp);
      return rp;
    },
    [self](bypass_atom, bypass_order& order) { return on_bypass(self, order); },
    [self](op_retry_atom, retry_order& order) { return on_operator_retry(self, order); },
    [self](abort_atom, uint64_t proc_id) -> caf::result<bool> {
      auto& st = self->state;
      if (st.finishing)
        return caf::make_error(errc::already_ended);
      if (st.rollback.past_no_return)
        return false;
      // Not a step's failure: which state may have run partly, the stop finds out.
      if (!st.rollback.failing
          && !begin_tree_failure(self, st.id, 0,
                                 "aborted by operator (procedure " + std::to_string(proc_id) + ")"))
        return false;
      // Acknowledged once the Failed record is durable, never before.
      if (!st.rollback.busy_failure_record)
        return true;
      auto rp = self->make_response_promise<bool>();
      st.rollback.failure_acks.push_back(rp);
      return rp;
    },
  };
}

caf::actor spawn_root(caf::event_based_actor* supervisor, proc_start start) {
  const auto root_id = start.id;
  auto h = supervisor->spawn(procedure_actor, std::move(start));
  // Not a monitor: a root that ends normally has said so (tree_done, fragment_done) just
  // before it quits, and its down message was one of a procedure's seven fixed messages
  // (docs/benchmarks.md, "What a procedure costs"); every other exit is reported as a
  // monitor would. Attached after the spawn: a root already gone runs it at once.
  h->attach_functor([sup = supervisor->address(), root = h.address(),
                     root_id](const caf::error& reason, caf::execution_unit* ctx) {
    if (!reason || reason == caf::exit_reason::normal)
      return;
    if (auto s = caf::actor_cast<caf::actor>(sup))
      s->enqueue(nullptr, caf::make_message_id(),
                 caf::make_message(root_down_atom::value, root_id, root, reason), ctx);
  });
  return h;
}

}  // namespace proctor
