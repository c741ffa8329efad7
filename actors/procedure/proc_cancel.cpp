// Join policies on the parent's side, and the cancellation of children (docs/flow-control.md,
// "Join policies"). A spawn's join says how many children must succeed: once that many did,
// the others are cancelled; a child's failure that the policy can absorb is contained the
// same way. Cancelling is a partial rollback run by the parent while the rest of the tree
// runs on: a Cancelled record, durable before anything is stopped; the children stopped at a
// step boundary; their subtrees undone in exact reverse order (the root's plan runner, with
// the plan cut down to those subtrees); a Finished per procedure of them closes it. A crash
// at any point resumes from the journal: a cancelled child is never run forward again. A
// tree that fails meanwhile takes over: its whole-tree plan holds what is left to undo.
#include <algorithm>
#include <unordered_set>

#include "actors/base/errors.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

size_t needed(const proc_actor_state& st) {
  return st.join_at_least != 0 ? st.join_at_least : st.waiting_on.size();
}

std::string policy_text(const proc_actor_state& st) {
  if (st.join_at_least == 0)
    return "join::all";
  if (st.join_at_least == 1)
    return "join::any";
  return "join::at_least(" + std::to_string(st.join_at_least) + ")";
}

/// The last spawn's children, counted: ended SUCCESS, failed (ended otherwise, or being
/// cancelled for their own failure), and those that may still succeed; `except` left out.
struct join_count {
  size_t succeeded = 0;
  size_t failed = 0;
  size_t running = 0;
  std::string first_failure;
};

join_count count_join(proc_actor_state& st, uint64_t except = 0) {
  join_count n;
  for (auto w : st.waiting_on) {
    const auto* c = st.child(w);
    if (c == nullptr || w == except)
      continue;
    if (c->ended && c->result.state == proc_state::success) {
      ++n.succeeded;
    } else if (c->ended || (c->cancelling && c->cancel_failed)) {
      ++n.failed;
      if (n.first_failure.empty())
        n.first_failure =
          "child " + std::to_string(w) + ": " + (c->ended ? c->result.error : c->cancel_reason);
    } else if (!c->cancelling) {
      ++n.running;
    }
  }
  return n;
}

/// Every procedure of the subtrees of `tops`, in `image`.
std::unordered_set<uint64_t> subtrees(const tree_image& image, const std::vector<uint64_t>& tops) {
  std::unordered_set<uint64_t> out;
  std::vector<uint64_t> todo(tops.begin(), tops.end());
  while (!todo.empty()) {
    auto id = todo.back();
    todo.pop_back();
    const auto* p = image.find(id);
    if (p == nullptr || !out.insert(id).second)
      continue;
    todo.insert(todo.end(), p->children.begin(), p->children.end());
  }
  return out;
}

std::string cancel_progress(const proc_actor_state& st) {
  std::string ids;
  for (auto c : st.cancel_batch)
    ids += (ids.empty() ? "" : ", ") + std::to_string(c);
  return "cancelling child(ren) " + ids + ": " + std::to_string(st.rollback.plan_pos) + " of "
         + std::to_string(st.rollback.plan.size()) + " undone";
}

}  // namespace

void fail_join(proc_actor* self, const std::string& why) {
  auto& st = self->state;
  PLOG(info, self, "{}: the tree fails", why);
  auto stuck = [self, why] {
    PLOG(error, self,
         "{}; the tree is past its point of no return: it stays FAILED until an "
         "operator intervenes",
         why);
    set_status(self, proc_state::failed, 0);
    auto u = current_update(self);
    u.error = why;
    self->send(self->state.env->executor, update_atom::value, std::move(u));
  };
  if (st.is_root) {
    if (!begin_tree_failure(self, st.id, 0, why))
      stuck();
    return;
  }
  st.busy = true;  // nothing runs (nor joins again) until the root answered
  self->request(st.root, caf::infinite, tree_fail_atom::value, st.id, int32_t{0}, why)
    .then(
      [self, stuck](bool rolls_back) {
        auto& st = self->state;
        st.busy = false;
        if (!rolls_back)
          return stuck();
        st.parked = true;
        maybe_finish_stop(self);
      },
      [self](caf::error& e) { self->quit(e); });
}

namespace {

/// Decides on a contained child's failure; `answer` tells the child whether its tree rolls
/// back (it then parks until it is stopped), as the root's tree_fail_atom does.
void decide_failure(proc_actor* self, uint64_t cid, int32_t state, const std::string& error,
                    bool undone, std::function<void(bool)> answer) {
  auto& st = self->state;
  auto* c = st.child(cid);
  if (undone
      && (c == nullptr || c->ended || c->cancelling || st.stopping || st.rollback.failing
          || st.parked))
    return answer(false);  // the placeholder fails the tree as it would have
  if (c == nullptr || c->ended || c->cancelling || st.stopping || st.rollback.failing || st.parked)
    return answer(true);  // cancelled already, or the whole tree stops: its stop comes
  auto forward = [self, cid, state, error, answer] {
    auto& st = self->state;
    if (st.is_root)
      return answer(begin_tree_failure(self, cid, state, error));
    self->request(st.root, caf::infinite, tree_fail_atom::value, cid, state, error)
      .then([answer](bool rolls_back) { answer(rolls_back); },
            [self](caf::error& e) { self->quit(e); });
  };
  auto n = count_join(st, cid);
  bool reachable = n.succeeded + n.running >= needed(st);
  bool contained = c->awaited && joins_tolerantly(st) && (reachable || st.join_wait);
  if (!contained && undone)
    return answer(false);  // (its placeholder asks the root: the tree fails)
  if (!contained) {
    if (joins_tolerantly(st))
      PLOG(info, self, "child {} failed and {} can no longer be met: the tree fails", cid,
           policy_text(st));
    return forward();
  }
  PLOG(info, self, "child {} failed: {} contains it ({})", cid, policy_text(st),
       reachable ? "it can still be met" : "its siblings run to their ends first");
  if (undone) {
    // Its fragment on another node rolled back there, and its end is journaled here: its
    // placeholder reports it as ended (subtree_done), FAILED, and goes.
    st.env->contained_failures.fetch_add(1, std::memory_order_relaxed);
    return answer(true);
  }
  cancel_children(self, {cid}, error, true);
  answer(true);
}

}  // namespace

std::string join_unmet(const proc_actor_state& cst) {
  auto& st = const_cast<proc_actor_state&>(cst);  // child() is not const; nothing changes
  if (!joins_tolerantly(st))
    return {};
  auto n = count_join(st);
  if (n.succeeded >= needed(st))
    return {};
  return policy_text(st) + " not met: " + std::to_string(n.succeeded) + " of "
         + std::to_string(st.waiting_on.size()) + " children succeeded"
         + (n.first_failure.empty() ? "" : " (first failure: " + n.first_failure + ")");
}

caf::result<bool> on_child_failed(proc_actor* self, uint64_t cid, int32_t state,
                                  const std::string& error, bool undone) {
  auto rp = self->make_response_promise<bool>();
  auto answer = [rp](bool b) mutable { rp.deliver(b); };
  auto& st = self->state;
  if (st.passivation.holding || st.passivation.offered) {
    hold(self, [self, cid, state, error, undone, answer] {
      decide_failure(self, cid, state, error, undone, answer);
    });
    return rp;
  }
  decide_failure(self, cid, state, error, undone, answer);
  return rp;
}

void join_after_success(proc_actor* self) {
  auto& st = self->state;
  if (!joins_tolerantly(st) || st.stopping || st.rollback.failing || st.parked || st.busy
      || st.status != proc_state::waiting || !st.event_key.empty())
    return;
  if (st.passivation.holding)  // its tree is asked to passivate: decided on resume
    return hold(self, [self] { join_after_success(self); });
  auto n = count_join(st);
  if (n.succeeded + n.running < needed(st) && !st.join_wait && n.running > 0) {
    // Read back so (a failure journaled while this parent was down): as at the failure.
    return fail_join(self, join_unmet(st));
  }
  if (st.join_at_least == 0 || n.succeeded < needed(st) || n.running == 0)
    return;
  std::vector<uint64_t> rest;
  for (auto w : st.waiting_on)
    if (auto* c = st.child(w); c != nullptr && !c->ended && !c->cancelling)
      rest.push_back(w);
  cancel_children(self, std::move(rest),
                  "cancelled: " + policy_text(st) + " was met by " + std::to_string(n.succeeded)
                    + " of its siblings",
                  false);
}

void cancel_children(proc_actor* self, std::vector<uint64_t> ids, std::string reason, bool failed) {
  auto& st = self->state;
  std::erase_if(ids, [&](uint64_t cid) {
    auto* c = st.child(cid);
    return c == nullptr || c->ended || c->cancelling;
  });
  if (ids.empty())
    return;
  pb::JournalRecord rec;
  auto* r = rec.mutable_cancelled();
  r->set_parent_id(st.id);
  for (auto cid : ids) {
    r->add_children(cid);
    auto* c = st.child(cid);
    c->cancelling = true;  // decided: nothing counts it as running any more
    c->cancel_failed = failed;
    c->cancel_reason = reason;
  }
  r->set_reason(reason);
  r->set_failed(failed);
  r->set_at_ms(wall_ms());
  PLOG(info, self, "cancelling {} child(ren): {}", ids.size(), reason);
  (failed ? st.env->contained_failures : st.env->cancelled_children)
    .fetch_add(ids.size(), std::memory_order_relaxed);
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  // Stopped only once the record is durable: a crash before it runs them on, never half
  // cancels them.
  journal_append(self, std::move(batch), [self, ids] {
    auto& st = self->state;
    std::string names;
    for (auto cid : ids) {
      names += (names.empty() ? "" : ", ") + std::to_string(cid);
      if (auto* c = st.child(cid)) {
        c->cancel_journaled = true;
        stop_cancelled_child(self, *c);
      }
    }
    if (!st.stopping && !st.rollback.failing && !st.cancel_running)
      publish(self, "cancelling child(ren) " + names + ": stopping them");
    run_cancellations(self);
  });
}

void run_cancellations(proc_actor* self) {
  auto& st = self->state;
  if (st.cancel_running || st.stopping || st.rollback.failing || st.parked || st.busy)
    return;
  std::vector<uint64_t> batch;
  std::vector<uint64_t> clean;
  for (const auto& c : st.children)
    if (c.cancelling && c.cancel_journaled && !c.ended && !c.handle && !c.stop_pending
        && !c.passivated) {
      batch.push_back(c.id);
      clean.insert(clean.end(), c.stopped_clean.begin(), c.stopped_clean.end());
    }
  if (batch.empty())
    return;
  st.cancel_running = true;
  st.cancel_batch = batch;
  st.busy = true;
  self->request(st.env->journal, caf::infinite, read_tree_atom::value, st.root_id)
    .then(
      [self, batch, clean](journal_records& recs) {
        auto& st = self->state;
        st.busy = false;
        if (st.stopping || st.rollback.failing) {
          abandon_cancellation(self);
          return maybe_finish_stop(self);
        }
        auto image = std::make_shared<tree_image>(fold_tree(st.root_id, recs));
        if (!image->corrupt.empty()) {
          PLOG(error, self, "cannot cancel children: tree damaged: {}", image->corrupt);
          self->quit(caf::make_error(errc::quarantined, image->corrupt));
          return;
        }
        auto set = subtrees(*image, batch);
        // What stopped before its current state started has no partly run state to undo:
        // journaled as such, as a tree's rollback does (rollback_after_stop).
        auto nb = never_started_undos(self, *image, clean,
                                      [&set](uint64_t id) { return set.count(id) != 0; });
        auto start = [self, image, set] {
          auto& st = self->state;
          st.busy = false;
          if (st.stopping || st.rollback.failing) {
            abandon_cancellation(self);
            return maybe_finish_stop(self);
          }
          st.rollback.plan.clear();
          for (auto& item : rollback_plan(*image))
            if (set.count(item.proc_id) != 0)
              st.rollback.plan.push_back(std::move(item));
          st.rollback.plan_pos = 0;
          st.rollback.undo_attempt = 1;
          st.rollback.undone_before = 0;
          st.rollback.image = image;
          PLOG(info, self, "cancelling: {} undo(s) to run", st.rollback.plan.size());
          // The ends of fragments on other nodes come here (their placeholders stopped).
          for (const auto& item : st.rollback.plan)
            if (item.remote)
              self->send(st.env->executor, remote_route_atom::value, item.proc_id,
                         caf::actor_cast<caf::actor>(self));
          run_rollback(self, image);
        };
        if (nb.entries.empty())
          return start();
        st.busy = true;
        journal_append(self, std::move(nb), start);
      },
      [self](caf::error& e) {
        PLOG(critical, self, "journal read failed: {}", error_text(self->system(), e));
        self->quit(caf::make_error(errc::journal_failed));
      });
}

void publish_cancellation(proc_actor* self, const std::string& detail) {
  auto& st = self->state;
  auto text = cancel_progress(st);
  // The plan runner's own progress ("rolling back: ...") is replaced by the cancellation's;
  // what follows it (a node waited for) is kept.
  auto rest = detail;
  if (rest.rfind("rolling back", 0) == 0) {
    auto cut = rest.find("; ");
    rest = cut == std::string::npos ? std::string{} : rest.substr(cut + 2);
  }
  if (!rest.empty())
    text += "; " + rest;
  publish(self, std::move(text));
}

void finish_cancellation(proc_actor* self) {
  auto& st = self->state;
  auto image = st.rollback.image;
  auto set = subtrees(*image, st.cancel_batch);
  const auto at = wall_ms();
  journal_batch batch;
  std::vector<proc_update> ups;
  for (auto id : set) {
    const auto* p = image->find(id);
    if (p == nullptr)
      continue;
    auto u = update_from_image(*image, *p);
    u.ended = true;
    u.result_json.clear();
    if (p->remote()) {
      // Its end came from its node (ROLLEDBACK, or FAILED when it could not be undone).
      if (auto f = st.rollback.remote_failed.find(id); f != st.rollback.remote_failed.end()) {
        u.state = proc_state::failed;  // its end came FAILED: not undone there
        u.error = f->second;
      } else if (!is_final(p->status)) {
        u.state = proc_state::rolledback;
      }
      ups.push_back(std::move(u));
      continue;
    }
    const auto* top = st.child(id);
    bool own_failure = top != nullptr && top->cancel_failed;
    u.state = own_failure ? proc_state::failed : proc_state::rolledback;
    u.error = top != nullptr ? top->cancel_reason
                             : "cancelled with its ancestor (" + std::to_string(p->parent_id) + ")";
    if (own_failure)
      u.error += " (its steps are undone)";
    u.since_ms = u.ended_at_ms = at;
    pb::JournalRecord rec;
    auto* f = rec.mutable_finished();
    f->set_proc_id(id);
    f->set_state(to_pb(u.state));
    f->set_error(u.error);
    f->set_cancelled(true);
    f->set_at_ms(at);
    batch.entries.push_back(make_entry(st.root_id, rec));
    ups.push_back(std::move(u));
  }
  st.busy = true;
  journal_append(self, std::move(batch), [self, ups = std::move(ups), at]() mutable {
    auto& st = self->state;
    st.busy = false;
    for (const auto& u : ups) {
      self->send(st.env->executor, update_atom::value, u);
      if (u.node.empty())
        self->send(st.env->scheduler, unlock_atom::value, u.id);
    }
    for (auto cid : st.cancel_batch) {
      auto* c = st.child(cid);
      if (c == nullptr)
        continue;
      bool own_failure = c->cancel_failed;
      PLOG(info, self, "child {} {}", cid,
           own_failure ? "failed and is undone" : "cancelled and undone");
      c->cancelling = false;
      st.child_ended(*c,
                     child_result{cid,
                                  own_failure ? proc_state::failed : proc_state::rolledback,
                                  {},
                                  c->cancel_reason,
                                  !own_failure},
                     at);
    }
    for (auto& u : ups)
      st.finished_subtree.push_back(std::move(u));
    st.cancel_running = false;
    st.cancel_batch.clear();
    st.rollback.image.reset();
    st.rollback.plan.clear();
    st.rollback.plan_pos = 0;
    if (st.stopping || st.rollback.failing)
      return maybe_finish_stop(self);
    run_cancellations(self);  // children whose stop came after this plan began
    if (!st.cancel_running) {
      publish(self, "children");
      join_after_success(self);  // successes that came while this plan ran
      maybe_join(self);
    }
  });
}

void abandon_cancellation(proc_actor* self) {
  auto& st = self->state;
  if (!st.cancel_running)
    return;
  PLOG(info, self, "cancellation stops at a boundary ({}); the journal carries it on",
       cancel_progress(st));
  st.cancel_running = false;
  st.cancel_batch.clear();
  st.rollback.image.reset();
  st.rollback.plan.clear();
  st.rollback.plan_pos = 0;
  cancel_timeout(self, st.env->timeout, st.id, timeout_kind::undo_retry);
}

}  // namespace proctor
