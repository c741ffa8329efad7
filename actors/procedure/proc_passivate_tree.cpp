// Passivation: a tree whose every procedure only waits — for an event, a timer, or children
// that only wait themselves, at any depth — gives up all of its actors. The executor keeps a
// compact entry (the root's: its earliest deadline under the timeout actor, and the event
// waiters' places), and an event, the deadline, an abort, a bypass or a child's end on
// another node brings the tree back from its journal image, as recovery would.
//
// The protocol, started by the root passivate_after after a procedure of its tree began to
// wait (docs/concepts.md, "The timeout actor"):
//   1. the root asks the executor for its tree's wake epoch (how many wake-ups the executor
//      has routed into the tree so far);
//   2. it asks the tree, depth first (passivate_query_atom): a procedure that only waits
//      answers with its deadline and event key, and freezes: a wake-up that reaches it from
//      now on (its own timer firing, a child's end) is held, not acted on;
//   3. the root asks the executor to agree (passivate_atom with the epoch): the executor
//      refuses if it routed anything into the tree meanwhile (an event, a remote child's
//      end) or has a request on its way there (an abort, a bypass);
//   4. agreed, the root quits with errc::passivated and its tree goes down with it; refused
//      (or a procedure that did not only wait), the tree resumes and runs what it held.
// A timer that fired into a passivation_held procedure is not lost: the deadline the executor keeps
// is the tree's earliest, already past, so the tree comes back at once.
#include <memory>

#include "actors/base/errors.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

/// How long a root waits for its tree's and the executor's answers before it gives the
/// attempt up (the bound of every wait of an attempt: parents ask their children without a
/// CAF timeout of their own, and a child that goes down answers with an error at once).
constexpr int64_t attempt_limit_ms = 10'000;

/// True when this procedure (not counting its children's own waits) only waits.
bool only_waits(proc_actor* self) {
  auto& st = self->state;
  if (st.busy || st.job_queued || st.stopping || st.parked || st.rollback.failing || st.bypassing
      || st.finishing || st.stops_pending > 0 || !st.pending_restarts.empty() || !st.appends.empty()
      || !st.remote_failed.empty() || st.cancel_running
      || (st.passivation.offered
          && !st.passivation.held.empty())  // a wake-up held while it offers: it runs next
      || st.passivation.wakes_head
           < st.passivation.wakes_due.size())  // children to spawn as others go down
    return false;
  if (st.status == proc_state::waiting_timeout)
    return st.wait_timer_armed;
  if (st.status != proc_state::waiting)
    return false;
  if (st.event_key.empty() && st.waiting_left == 0)
    return false;  // its children ended: it is about to run
  for (const auto& c : st.children)
    if (!c.ended && !c.passivated && (!c.handle || c.restarting || c.stop_pending))
      return false;
  return true;
}

/// Due soon: not worth passivating, and not passivation_held (its timer is not held up).
void not_if_due_soon(passivation_answer& a) {
  if (a.deadline_ms > 0 && a.deadline_ms < wall_ms() + passivation_min_sleep_ms) {
    a.idle = false;
    a.retry_at_ms = a.deadline_ms;
  }
}

/// The part of the answer of passivated child `c` (it only waits for its wake-up; a passivated
/// subtree answers for all its procedures).
passivation_answer passivated_answer(const proc_actor_state& st, const child_slot& c) {
  passivation_answer a;
  a.procs = c.passivated_procs;
  a.deadline_ms = c.wake_at_ms;
  if (c.passivated_event)
    a.event_waiters.push_back(c.id);
  else if (c.passivated_entry->remote())
    a.remote_nodes.push_back(c.passivated_entry->node);
  // Those of a passivated subtree: an event's or a reply's waiters, or children on other nodes.
  if (!c.passivated_waiters.empty()) {
    const auto& image = *passivated_image_of(st, c);
    for (auto w : c.passivated_waiters) {
      const auto* p = image.find(w);
      if (p != nullptr && p->remote())
        a.remote_nodes.push_back(p->node);
      else
        a.event_waiters.push_back(w);
    }
  }
  not_if_due_soon(a);
  return a;
}

/// The query of this procedure's children is answered (all of them, or one went down).
void finish_query(proc_actor* self) {
  auto& st = self->state;
  auto q = std::move(st.passivation.query);
  // Something may have changed while the children answered (a stop, an abort).
  if (!st.passivation.holding || !only_waits(self))
    q->acc.idle = false;
  q->done(std::move(q->acc));
}

/// Asks this procedure and its live children whether they only wait; freezes it if it does.
/// `done` gets the subtree's answer. Children that go down meanwhile count as not waiting
/// (on_passivate_child_down); a child that neither answers nor goes down leaves the root's
/// attempt to its bound, whose resume drops the query.
void query_subtree(proc_actor* self, std::function<void(passivation_answer)> done) {
  auto& st = self->state;
  auto own = own_answer(self);
  if (!own.idle)
    return done(std::move(own));
  st.passivation.holding = true;
  auto q = std::make_unique<passivation_part::query_state>();
  q->tag = ++st.passivation.query_tag;
  q->acc = std::move(own);
  q->done = std::move(done);
  for (const auto& c : st.children)
    if (c.passivated) {
      q->acc.merge(passivated_answer(st, c));
    } else if (!c.ended) {
      q->asked.insert(c.id);
      self->send(c.handle, passivate_query_atom::value, q->tag);
    }
  st.passivation.query = std::move(q);
  if (st.passivation.query->asked.empty())
    finish_query(self);
}

/// The root's attempt ended without passivation: the tree runs on; `retry`: try again after
/// passivate_after (the executor refused because of a race, not because something runs).
void end_attempt(proc_actor* self, bool retry) {
  auto& st = self->state;
  st.passivation.attempting = false;
  ++st.passivation.failures;
  // An attempt costs its tree (messages to every procedure, wake-ups held while passivation_held):
  // the next one waits at least four times as long as this one took, so that a loaded
  // node spends at most a fifth of its time on attempts that fail.
  st.passivation.not_before =
    std::max(st.passivation.not_before, wall_ms() + 4 * (wall_ms() - st.passivation.started_ms));
  for (auto& f : std::exchange(st.passivation.on_decided, {}))
    f(false);
  passivation_refused(self);
  // Offer again if the executor refused over a race, or if a procedure began to wait
  // while the tree was being asked (its hint found the attempt under way).
  if (retry || std::exchange(st.passivation.hinted, false))
    offer_passivation(self);
}

}  // namespace

passivation_answer own_answer(proc_actor* self) {
  auto& st = self->state;
  passivation_answer a;
  a.procs = 1;
  a.idle = only_waits(self);
  if (!a.idle)
    return a;
  if (st.status == proc_state::waiting_timeout) {
    a.deadline_ms = st.timer_at_ms;
  } else if (!st.event_key.empty()) {
    a.deadline_ms = st.deadline_ms;
    a.event_waiters.push_back(st.id);
  }
  not_if_due_soon(a);
  return a;
}

void passivation_refused(proc_actor* self) {
  auto& st = self->state;
  st.passivation.query.reset();  // the attempt it belonged to is over
  if (!std::exchange(st.passivation.holding, false))
    return;
  for (const auto& c : st.children)
    if (!c.ended && c.handle)
      self->send(c.handle, passivation_refused_atom::value);
  for (auto& f : std::exchange(st.passivation.held, {}))
    f();
  // Its tree could not passivate: a procedure that only waits for its timer may still give
  // up its own actor (proc_passivate_waiter.cpp).
  offer_parent_passivation(self);
}

void hold(proc_actor* self, std::function<void()> f) {
  self->state.passivation.held.push_back(std::move(f));
}

void offer_passivation(proc_actor* self) {
  auto& st = self->state;
  if (st.env->passivate_after.count() < 0)
    return;
  if (!st.is_root) {
    self->send(st.root, passivate_hint_atom::value);
    return;
  }
  // Called when something in the tree began to wait or ended: the tree was active now.
  st.passivation.tree_active_ms = wall_ms();
  if (st.passivation.attempting)
    st.passivation.hinted = true;
  if (st.passivation.armed || st.passivation.attempting)
    return;
  st.passivation.armed = true;
  // Each attempt asks the whole tree; after attempts that found something running, wait
  // longer (10 ms doubling, at most 10 s), so that the children of a wide tree beginning
  // to wait one by one cost a few attempts, not one each.
  auto after = st.env->passivate_after.count();
  if (st.passivation.failures > 0)
    after = std::max<int64_t>(after, int64_t{10} << std::min(st.passivation.failures, 10));
  after = std::min<int64_t>(after, std::max<int64_t>(10'000, st.env->passivate_after.count()));
  // A wide tree woken for deadlines due within the next second is asked again only after
  // the last of them (each attempt costs a message to every procedure, and freezes those
  // that only wait: asked over and over, a woken tree of 10,000 timers crawled).
  auto at = std::max(wall_ms() + after, st.passivation.not_before + 1);
  arm_timeout(self, st.env->timeout, st.id, timeout_kind::passivate, at, passivate_atom::value,
              ++st.passivation.token);
}

void try_passivate(proc_actor* self, uint64_t token) {
  auto& st = self->state;
  if (token != st.passivation.token)
    return;
  st.passivation.armed = false;
  if (st.passivation.attempting || !only_waits(self))
    return;  // when it waits again, it offers again
  // Active since the deadline was armed (children ending, procedures beginning to wait):
  // asking now would likely find something running. Wait until it was quiet for
  // passivate_after, as a procedure that began to wait does.
  if (auto quiet_at = st.passivation.tree_active_ms + st.env->passivate_after.count();
      quiet_at > wall_ms()) {
    st.passivation.armed = true;
    arm_timeout(self, st.env->timeout, st.id, timeout_kind::passivate, quiet_at,
                passivate_atom::value, ++st.passivation.token);
    return;
  }
  st.passivation.started_ms = wall_ms();
  st.env->passivation_attempts.fetch_add(1, std::memory_order_relaxed);
  st.passivation.attempting = true;
  st.passivation.holding = true;
  auto root_id = st.id;
  auto attempt = ++st.passivation.attempt;
  // Answers of an attempt given up (or ended) are ignored.
  auto current = [self, attempt] {
    return self->state.passivation.attempting && self->state.passivation.attempt == attempt;
  };
  arm_timeout(self, st.env->timeout, st.id, timeout_kind::passivate, wall_ms() + attempt_limit_ms,
              passivate_late_atom::value, attempt);
  self->request(st.env->executor, caf::infinite, passivate_begin_atom::value, root_id)
    .then(
      [self, root_id, current](uint64_t epoch) {
        if (!current())
          return;
        query_subtree(self, [self, root_id, epoch, current](passivation_answer a) {
          if (!current())
            return;
          auto& st = self->state;
          // A tree that only waits may have its earliest deadline near by now (it came near
          // while the tree answered): it is tried again after that deadline has fired.
          if (a.idle)
            not_if_due_soon(a);
          if (!a.idle) {
            st.passivation.not_before = std::max(st.passivation.not_before, a.retry_at_ms);
            return end_attempt(self, a.retry_at_ms > 0);
          }
          self
            ->request(self->state.env->executor, caf::infinite, passivate_atom::value, root_id,
                      epoch, a)
            .then(
              [self, current](bool agreed) {
                if (!current()) {
                  // Given up meanwhile: an agreement cannot be taken back, so carry it out.
                  if (agreed)
                    self->quit(caf::make_error(errc::passivated));
                  return;
                }
                if (!agreed)
                  return end_attempt(self, true);
                auto& st = self->state;
                st.passivation.attempting = false;
                for (auto& f : std::exchange(st.passivation.on_decided, {}))
                  f(true);
                release_timers(self);
                PLOG(debug, self, "tree passivated");
                self->quit(caf::make_error(errc::passivated));
              },
              [self, current](caf::error&) {
                if (current())
                  end_attempt(self, false);
              });
        });
      },
      [self, current](caf::error&) {
        if (current())
          end_attempt(self, false);
      });
}

void on_passivate_late(proc_actor* self, uint64_t attempt) {
  auto& st = self->state;
  if (!st.passivation.attempting || attempt != st.passivation.attempt)
    return;
  PLOG(warn, self, "passivation attempt got no answer within {} ms; the tree stays awake",
       attempt_limit_ms);
  end_attempt(self, false);
}

void on_passivate_query(proc_actor* self, const caf::actor& parent, uint64_t tag) {
  auto id = self->state.id;
  query_subtree(self, [self, parent, tag, id](passivation_answer a) {
    self->send(parent, passivate_answer_atom::value, tag, id, std::move(a));
  });
}

void on_passivate_answer(proc_actor* self, uint64_t tag, uint64_t child_id,
                         const passivation_answer& a) {
  auto& q = self->state.passivation.query;
  if (!q || q->tag != tag || q->asked.erase(child_id) == 0)
    return;
  q->acc.merge(a);
  if (q->asked.empty())
    finish_query(self);
}

void on_passivate_child_down(proc_actor* self, uint64_t child_id) {
  auto& q = self->state.passivation.query;
  if (!q || q->asked.erase(child_id) == 0)
    return;
  q->acc.idle = false;
  if (q->asked.empty())
    finish_query(self);
}

void release_timers(proc_actor* self) {
  auto& st = self->state;
  release_passivated(self);
  if (std::exchange(st.wait_timer_armed, false))
    cancel_timeout(self, st.env->timeout, st.id, timeout_kind::wait);
  if (st.is_root && (std::exchange(st.passivation.armed, false) || st.passivation.attempt > 0))
    cancel_timeout(self, st.env->timeout, st.id, timeout_kind::passivate);  // or the guard
}

}  // namespace proctor
