// A procedure actor as the supervisor of its children: crashes restart the crashed subtree
// from its last journaled state, by strategy, within the restart intensity; past it the
// supervisor escalates (a root fails its tree instead). Also the stop protocol: a subtree
// stops at step boundaries, bottom-up.
#include <algorithm>

#include "actors/base/errors.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"
#include "supervision/supervisor.hpp"

namespace proctor {

void restart_children(proc_actor* self, std::vector<uint64_t> ids) {
  auto& st = self->state;
  if (st.stopping || st.rollback.failing || st.parked)
    return;
  self->request(st.env->journal, caf::infinite, read_tree_atom::value, st.root_id)
    .then(
      [self, ids](journal_records& recs) {
        auto& st = self->state;
        if (st.stopping || st.rollback.failing || st.parked)
          return;
        auto image = std::make_shared<const tree_image>(fold_tree(st.root_id, recs));
        if (!image->corrupt.empty()) {
          PLOG(error, self, "cannot restart children: tree damaged: {}", image->corrupt);
          self->quit(caf::make_error(errc::quarantined, image->corrupt));
          return;
        }
        for (auto cid : ids) {
          auto* c = st.child(cid);
          const auto* p = image->find(cid);
          if (c == nullptr || p == nullptr || c->handle || c->cancelling)
            continue;  // (a cancelled child is undone, never run again: proc_cancel.cpp)
          if (is_final(p->status)) {
            // It ended before it went down; collect how, as its subtree_done would have.
            c->restarting = false;
            st.child_ended(*c, child_result{cid, p->status, p->result_json, p->error, false},
                           p->ended_at_ms);
            collect_subtree(*image, cid, &st.finished_subtree);
            if (p->status == proc_state::success)
              join_after_success(self);
            continue;
          }
          PLOG(info, self, "restarting child {} from its journaled state", cid);
          spawn_child(self, image, cid);
        }
        maybe_join(self);
      },
      [self](caf::error& e) {
        PLOG(critical, self, "journal read failed: {}", error_text(self->system(), e));
        self->quit(caf::make_error(errc::journal_failed));
      });
}

namespace {

/// Asks child `c` to stop at a step boundary (once).
void request_stop(proc_actor* self, child_slot& c) {
  if (c.stop_pending || !c.handle)
    return;
  c.stop_pending = true;
  ++self->state.stops_pending;
  self->send(c.handle, stop_atom::value);
}

/// Restarts every batch whose children all stopped, after its back-off.
void fire_pending_restarts(proc_actor* self) {
  auto& batches = self->state.pending_restarts;
  for (auto i = batches.begin(); i != batches.end();) {
    bool stopped = std::none_of(i->ids.begin(), i->ids.end(), [self](uint64_t cid) {
      auto* c = self->state.child(cid);
      return c != nullptr && c->stop_pending;
    });
    if (!stopped) {
      ++i;
      continue;
    }
    auto owner = i->ids.front();  // a child is in one batch at a time
    arm_timeout(self, self->state.env->timeout, owner, timeout_kind::restart,
                wall_ms() + i->backoff.count(), restart_atom::value, std::move(i->ids));
    i = batches.erase(i);
  }
}

/// Stops the live children in `ids` at a step boundary, then restarts all of `ids` after
/// the back-off.
void stop_then_restart(proc_actor* self, std::vector<uint64_t> ids,
                       std::chrono::milliseconds backoff) {
  auto& st = self->state;
  for (auto cid : ids) {
    auto* c = st.child(cid);
    c->restarting = true;
    stop_passivated(self, *c);
    request_stop(self, *c);
  }
  st.pending_restarts.push_back(restart_batch{std::move(ids), backoff});
  fire_pending_restarts(self);
}

}  // namespace

void stop_cancelled_child(proc_actor* self, child_slot& c) {
  c.restarting = false;  // a restart due for it is not carried out (restart_children)
  if (c.passivated)
    stop_passivated(self, c);
  else
    request_stop(self, c);
}

void child_stopped(proc_actor* self, child_slot& c, const std::vector<uint64_t>* clean) {
  auto& st = self->state;
  if (!c.stop_pending)
    return;
  c.stop_pending = false;
  --st.stops_pending;
  if (clean != nullptr)
    c.stopped_clean = *clean;
  fire_pending_restarts(self);
  maybe_finish_stop(self);
  if (c.cancelling)
    run_cancellations(self);  // its subtree can be undone now (proc_cancel.cpp)
}

std::vector<uint64_t> stopped_clean(proc_actor* self) {
  auto& st = self->state;
  auto out = st.stopped_clean;
  // A report is dropped when its child is spawned again (spawn_child): what is left comes
  // from children that stopped and did not run since.
  for (const auto& c : st.children)
    out.insert(out.end(), c.stopped_clean.begin(), c.stopped_clean.end());
  // A failing root reads FAILED without having ended.
  bool ended = is_final(st.status) && !(st.is_root && st.rollback.failing);
  if (!st.ran_partly && !ended)
    out.push_back(st.id);
  return out;
}

void watch_children(proc_actor* self) {
  // Not a monitor of the parent by each child: CAF 0.17 keeps a monitor in the parent's
  // attachables until the parent exits, and with it a weak reference to the child, which
  // keeps the ended child's actor memory (its storage, some 2.4 KB) allocated until then: a
  // parent of 10,000 children held 10,000 of them. Each monitor also took the parent's
  // lock. One functor per parent instead, which knows its live children.
  auto live = std::make_shared<live_children>();
  self->state.child_addrs = live;
  self->attach_functor([live, me = self->address()](const caf::error& reason) {
    for (const auto& [addr, id] : *live)
      if (auto child = caf::actor_cast<caf::actor>(addr))
        caf::anon_send(child, caf::down_msg{me, reason});
  });
}

namespace {

/// Child `c`'s actor is gone, for `reason` (none: it said its end or its stop just before
/// it quit): its slot and what waited for it let go of it, and a crash is supervised.
void child_gone(proc_actor* self, child_slot* c, const caf::error& reason) {
  auto& st = self->state;
  bool normal = !reason || reason == caf::exit_reason::normal;
  st.child_addrs->erase(c->handle.address());
  c->handle = nullptr;
  on_passivate_child_down(self, c->id);
  if (c->passivate_pending && on_passivating_child_down(self, *c, reason))
    return;  // it gave up its actor (proc_passivate_waiter.cpp)
  if (c->stop_pending) {
    // Asked to stop, it is gone: stopped, whatever it did meanwhile (it may have ended,
    // or crashed) and whether or not it could report.
    child_stopped(self, *c, nullptr);
    return;
  }
  if (c->cancelling)
    return run_cancellations(self);  // gone before its stop was sent: stopped all the same
  if (normal || c->ended || c->restarting || st.stopping || st.rollback.failing || st.parked)
    return;
  auto why = error_text(self->system(), reason);
  std::vector<supervised_child> children;
  children.reserve(st.children.size());
  for (auto& x : st.children)
    children.push_back(supervised_child{x.id, x.ended});
  auto d = on_child_crash(st.restarts, std::chrono::steady_clock::now(), c->id, children, why);
  if (!d.restart) {
    if (st.is_root) {
      PLOG(warn, self, "supervision gives up at the root: {}; the tree fails", d.reason);
      begin_tree_failure(self, st.id, st.state, "escalated: " + d.reason);
    } else {
      PLOG(warn, self, "escalating: {}", d.reason);
      self->quit(caf::make_error(errc::escalated, d.reason));
    }
    return;
  }
  PLOG(info, self, "child {} crashed ({}); restarting {} child(ren) in {} ms", c->id, why,
       d.ids.size(), d.backoff.count());
  stop_then_restart(self, std::move(d.ids), d.backoff);
}

}  // namespace

void watch_child(proc_actor* self, const caf::actor& child) {
  // Not a monitor: a child that ends or stops says so (subtree_done, stopped_atom) just
  // before it quits, and a down message after it cost the parent one message per child
  // (docs/benchmarks.md, "What a procedure costs"); every other exit (a crash, its
  // passivation, its parent's end) is reported as a monitor would. Attached after the
  // spawn: a child already gone runs it at once.
  child->attach_functor([parent = self->address(), me = child.address()](const caf::error& reason,
                                                                         caf::execution_unit* ctx) {
    if (!reason || reason == caf::exit_reason::normal)
      return;
    if (auto p = caf::actor_cast<caf::actor>(parent))
      p->enqueue(nullptr, caf::make_message_id(), caf::make_message(caf::down_msg{me, reason}),
                 ctx);
  });
}

void child_went(proc_actor* self, uint64_t cid) {
  auto* c = self->state.child(cid);
  // Once: from the actor the slot holds (a report of an actor gone before does nothing),
  // and not once this actor quit (its down message would not have been taken either).
  if (c == nullptr || !c->handle || c->handle.address() != self->current_sender()
      || !self->has_behavior())
    return;
  child_gone(self, c, caf::error{});
  wake_queued(self);
}

void on_down(proc_actor* self, caf::down_msg& m) {
  auto& st = self->state;
  if (st.parent && m.source == st.parent.address()) {
    if (m.reason && m.reason != caf::exit_reason::normal) {
      release_timers(self);
      self->quit(m.reason);  // our supervisor went down (or passivated): so does the subtree
    }
    return;
  }
  if (auto* c = st.child_by_addr(m.source))
    child_gone(self, c, m.reason);
}

void stop_subtree(proc_actor* self) {
  auto& st = self->state;
  if (st.stopping)
    return maybe_finish_stop(self);
  st.stopping = true;
  disarm_timer(self);  // no timer or retry fires any more
  if (st.busy && st.cancel_flag)
    st.cancel_flag->store(true, std::memory_order_relaxed);  // a step under way: not wanted
  if (st.cancel_running && st.busy && st.rollback.plan_pos < st.rollback.plan.size()
      && st.rollback.plan[st.rollback.plan_pos].remote)
    st.busy = false;  // a cancellation waiting for a node's answer: the tree's plan takes over
  if (st.job_queued) {
    // A step that has not started yet (queued, or waiting for a lock) need not run. The
    // scheduler always answers; a job it no longer holds runs and reports as usual.
    self->request(st.env->scheduler, caf::infinite, cancel_atom::value, st.id)
      .then(
        [self](bool cancelled) {
          auto& st = self->state;
          if (cancelled && st.job_queued) {
            st.job_queued = false;
            st.busy = false;
            if (st.ran_partly_by_queue)
              st.ran_partly = false;  // it never started
            maybe_finish_stop(self);
          }
        },
        [](caf::error&) {});
  }
  for (auto& c : st.children) {
    if (c.passivated)
      stop_passivated(self, c);
    else if (!c.ended)
      request_stop(self, c);
  }
  maybe_finish_stop(self);
}

void maybe_finish_stop(proc_actor* self) {
  auto& st = self->state;
  if (!st.stopping || st.busy || st.stops_pending > 0)
    return;
  abandon_cancellation(self);  // the journal holds how far it got
  if (st.is_root) {
    if (st.rollback.failing)
      rollback_after_stop(self);
    return;
  }
  // Tell the parent which procedures of this subtree never started their current state
  // (their rollback skips it), then go (the report stands for our down message: child_went).
  self->send(st.parent, stopped_atom::value, st.id, stopped_clean(self));
  self->quit();
}

}  // namespace proctor
