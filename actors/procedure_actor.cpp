#include "actors/procedure_actor.hpp"

#include <algorithm>
#include <chrono>

#include "actors/errors.hpp"
#include "actors/procedure_actor_state.hpp"
#include "actors/worker_pool.hpp"

namespace proctor {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

journal_entry make_entry(uint64_t root_id, pb::JournalRecord& rec) {
  rec.set_format(1);
  return journal_entry{root_id, rec.SerializeAsString()};
}

void publish(proc_actor* self, std::string waiting_for) {
  auto& st = self->state;
  proc_update u;
  u.id = st.id;
  u.root_id = st.root_id;
  u.parent_id = st.parent_id;
  u.type = st.type;
  u.state = st.status;
  for (const auto& c : st.children)
    u.children.push_back(c.id);
  u.waiting_for = std::move(waiting_for);
  u.nonce = st.nonce;
  self->send(st.env->executor, update_atom::value, std::move(u));
}

void journal_append(proc_actor* self, journal_batch batch, std::function<void()> then) {
  self->request(self->state.env->journal, caf::infinite, append_atom::value, std::move(batch))
    .then([then = std::move(then)](uint64_t) { then(); },
          [self](caf::error& e) {
            // The journal acknowledges only durable writes and fail-stops the node on a
            // write error; an error here means it is gone. Nothing may proceed.
            PLOG(critical, self, "journal append failed: {}", self->system().render(e));
            self->quit(caf::make_error(errc::journal_failed));
          });
}

void schedule(proc_actor* self) {
  auto& st = self->state;
  step_job job;
  job.proc = caf::actor_cast<caf::actor>(self);
  job.inst = st.inst;
  job.ctx.id_ = st.id;
  job.ctx.root_id_ = st.root_id;
  job.ctx.parent_id_ = st.parent_id;
  job.ctx.attempt_ = st.attempt;
  job.ctx.children_ = st.child_results;
  job.ctx.event_payload_ = st.event_payload;
  job.ctx.event_timed_out_ = st.event_timed_out;
  job.state = st.state;
  job.priority = st.priority;
  job.run_inline = st.ptype->nonblocking;
  st.busy = true;
  st.job_queued = true;
  st.status = proc_state::runnable;
  if (job.run_inline && st.locks.empty()) {
    // A step that never blocks and needs no lock has nothing to wait for: it takes no run
    // slot (those bound the worker threads) and so needs no turn from the scheduler. It runs
    // on this actor after whatever is already in its mailbox (a stop, an abort).
    job.direct = true;
    self->send(self, run_inline_atom::value, std::move(job));
    return;
  }
  job.type = st.type;
  job.locks = st.locks;
  job.ancestors = st.ancestors;
  self->send(st.env->scheduler, ready_atom::value, std::move(job));
}

namespace {

proc_update final_update(proc_actor* self, const std::string& result) {
  auto& st = self->state;
  proc_update u;
  u.id = st.id;
  u.root_id = st.root_id;
  u.parent_id = st.parent_id;
  u.type = st.type;
  u.state = proc_state::success;
  for (const auto& c : st.children)
    u.children.push_back(c.id);
  u.result_json = result;
  u.nonce = st.nonce;
  u.ended = true;
  return u;
}

} // namespace

/// After a commit: carry on, or stop if a stop was requested meanwhile.
void proceed(proc_actor* self) {
  auto& st = self->state;
  st.busy = false;
  if (st.stopping)
    return maybe_finish_stop(self);
  schedule(self);
}

/// Runs the failed step again after the policy's back-off.
void retry_step(proc_actor* self, int32_t state, const std::string& error, int max_attempts) {
  auto& st = self->state;
  auto policy = st.ptype->retry;
  policy.max_attempts = max_attempts;
  ++st.attempt;
  auto delay = retry_delay(policy, st.attempt);
  PLOG(info, self, "retrying {} in {} ms (attempt {}): {}", st.inst->state_name(state),
       delay.count(), st.attempt, error);
  st.busy = false;
  publish(self, "retry");
  arm_timer(self, now_ms() + delay.count(), false);
}

/// A business failure of this procedure's step: retry it while the type's policy allows,
/// then ask the root whether the tree rolls back (it does not past a point of no return:
/// then the step is retried forward).
void on_business_failure(proc_actor* self, int32_t state, const std::string& error) {
  auto& st = self->state;
  PLOG(info, self, "step {} failed (attempt {}): {}", st.inst->state_name(state), st.attempt,
       error);
  const auto& policy = st.ptype->retry;
  if (policy.max_attempts == 0 || st.attempt < policy.max_attempts)
    return retry_step(self, state, error, policy.max_attempts);
  auto retry_forward = [self, state, error] {
    auto& st = self->state;
    auto limit = st.ptype->retry.max_attempts_past_no_return;
    if (limit > 0 && st.attempt >= limit) {
      PLOG(error, self, "past the point of no return and out of retries: {}; it stays "
                        "FAILED until an operator intervenes", error);
      st.status = proc_state::failed;
      st.busy = false;
      auto u = final_update(self, {});
      u.state = proc_state::failed;
      u.error = error;
      self->send(st.env->executor, update_atom::value, std::move(u));
      return;
    }
    PLOG(warn, self, "past the point of no return: the failure is retried forward");
    retry_step(self, state, error, limit);
  };
  if (st.is_root) {
    if (!begin_tree_failure(self, st.id, state, error))
      retry_forward();
    else
      st.busy = false;
    return;
  }
  self->request(st.root, caf::infinite, tree_fail_atom::value, st.id, state, error)
    .then(
      [self, retry_forward](bool rolls_back) {
        if (!rolls_back)
          return retry_forward();
        auto& st = self->state;
        st.busy = false;
        st.parked = true;
        maybe_finish_stop(self);
      },
      [self](caf::error& e) {
        PLOG(warn, self, "root unreachable while failing: {}", self->system().render(e));
        self->quit(e);
      });
}

namespace {

void commit_outcome(proc_actor* self, step_result& r) {
  auto& st = self->state;
  auto& out = *r.out;
  auto executed = r.state;
  bool no_return = !st.inst->rollback_supported(executed);
  pb::JournalRecord rec;
  auto* step = rec.mutable_step();
  step->set_proc_id(st.id);
  step->set_executed_state(executed);
  step->set_next_state(out.state());
  step->set_data(r.data);
  step->set_past_no_return(no_return);
  step->set_attempt(st.attempt);
  journal_batch batch;
  auto after_commit = [self, no_return, data = r.data, executed, next = out.state()] {
    auto& st = self->state;
    // No progress: the step leads back to itself with its data unchanged.
    bool same = next == executed && data == st.committed_data;
    st.same_state_commits = same ? st.same_state_commits + 1 : 0;
    st.committed_data = data;
    if (no_return && !st.past_no_return) {
      st.past_no_return = true;
      if (!st.is_root)
        self->send(st.root, no_return_atom::value);
    }
    if (st.same_state_commits == st.env->no_progress_limit) {
      PLOG(warn, self, "no progress: state {} committed {} times in a row with the same data",
           st.inst->state_name(executed), st.same_state_commits);
      self->send(st.env->executor, no_progress_atom::value, st.type);
    }
  };
  switch (out.what()) {
    case outcome::kind::next: {
      batch.entries.push_back(make_entry(st.root_id, rec));
      journal_append(self, std::move(batch), [self, after_commit, next = out.state()] {
        after_commit();
        auto& st = self->state;
        st.attempt = 1;
        st.state = next;
        st.child_results.clear();
        st.event_payload.clear();
        st.event_timed_out = false;
        proceed(self);
      });
      return;
    }
    case outcome::kind::done: {
      if (st.is_root) {
        // The tree's summary says all the last step's records would: one write ends it.
        auto procs = std::move(st.finished_subtree);
        procs.push_back(final_update(self, out.result_json()));
        return finish_tree(self, std::move(procs), false);
      }
      batch.entries.push_back(make_entry(st.root_id, rec));
      pb::JournalRecord fin;
      fin.mutable_finished()->set_proc_id(st.id);
      fin.mutable_finished()->set_state(pb::SUCCESS);
      fin.mutable_finished()->set_result_json(out.result_json());
      batch.entries.push_back(make_entry(st.root_id, fin));
      journal_append(self, std::move(batch), [self, after_commit, result = out.result_json()] {
        after_commit();
        auto& st = self->state;
        st.busy = false;
        st.status = proc_state::success;
        PLOG(debug, self, "SUCCESS");
        auto procs = std::move(st.finished_subtree);
        procs.push_back(final_update(self, result));
        self->send(st.env->executor, update_atom::value, procs.back());
        if (!st.locks.empty())
          self->send(st.env->scheduler, unlock_atom::value, st.id);
        subtree_done d;
        d.result = child_result{st.id, proc_state::success, result, {}};
        d.procs = std::move(procs);
        self->send(st.parent, subtree_done_atom::value, std::move(d));
        self->quit();
      });
      return;
    }
    case outcome::kind::spawn: {
      std::vector<uint64_t> ids;
      std::vector<pb::JournalRecord> subs;
      for (auto& c : out.children()) {
        const auto* t = st.env->types->find(c.type);
        if (t == nullptr)
          return on_business_failure(self, executed, "spawn of unknown procedure type '"
                                                       + c.type + "'");
        auto cid = st.env->next_id->fetch_add(1);
        ids.push_back(cid);
        std::string err;
        auto probe = st.env->types->make_from_bytes(c.type, c.data, &err);
        if (!probe)
          return on_business_failure(self, executed, "spawn of " + c.type + ": " + err);
        pb::JournalRecord sub;
        auto* s = sub.mutable_submitted();
        s->set_proc_id(cid);
        s->set_parent_id(st.id);
        s->set_type(c.type);
        s->set_type_version(t->version);
        s->set_data(c.data);
        s->set_state(probe->initial_state());
        s->set_priority(c.priority != 0 ? c.priority : st.priority);
        s->set_submitted_at_ms(now_ms());
        subs.push_back(std::move(sub));
      }
      for (auto cid : ids)
        step->add_children(cid);
      batch.entries.push_back(make_entry(st.root_id, rec));
      for (auto& sub : subs)
        batch.entries.push_back(make_entry(st.root_id, sub));
      journal_append(self, std::move(batch),
                     [self, after_commit, ids, subs = std::move(subs), next = out.state()] {
        after_commit();
        auto& st = self->state;
        st.busy = false;
        st.state = next;
        st.attempt = 1;
        st.child_results.clear();
        st.waiting_on = ids;
        for (auto& c : st.children)
          c.awaited = false;
        st.waiting_left = 0;
        for (auto cid : ids)
          st.add_child(cid, true);
        if (st.stopping)
          return maybe_finish_stop(self);
        if (ids.empty())
          return proceed(self);  // nothing to wait for
        st.status = proc_state::waiting;
        // The children's images: fresh submits, folded like any journal records.
        auto img = std::make_shared<tree_image>();
        img->root_id = st.root_id;
        for (size_t i = 0; i < ids.size(); ++i) {
          tree_folder f(st.root_id);
          f.add(0, subs[i]);
          auto one = f.finish();
          img->procs.emplace(ids[i], std::move(one.procs.at(ids[i])));
        }
        std::shared_ptr<const tree_image> cimg = img;
        for (auto cid : ids)
          spawn_child(self, cimg, cid);
        publish(self, "children");
      });
      return;
    }
    case outcome::kind::suspend: {
      int64_t deadline = out.duration().count() > 0 ? now_ms() + out.duration().count() : 0;
      batch.entries.push_back(make_entry(st.root_id, rec));
      pb::JournalRecord sus;
      auto* s = sus.mutable_suspended();
      s->set_proc_id(st.id);
      s->set_event_key(out.event_key());
      s->set_deadline_ms(deadline);
      s->set_resume_state(out.state());
      batch.entries.push_back(make_entry(st.root_id, sus));
      journal_append(self, std::move(batch),
                     [self, after_commit, key = out.event_key(), next = out.state(), deadline] {
        after_commit();
        auto& st = self->state;
        st.busy = false;
        st.state = next;
        st.attempt = 1;
        st.event_key = key;
        st.event_payload.clear();
        st.event_timed_out = false;
        if (st.stopping)
          return maybe_finish_stop(self);
        wait_for_event(self, deadline);
      });
      return;
    }
    case outcome::kind::call: {
      int64_t deadline = out.duration().count() > 0 ? now_ms() + out.duration().count() : 0;
      auto key = "call:" + std::to_string(st.id) + ":" + std::to_string(now_ms()) + ":"
                 + std::to_string(st.attempt);
      batch.entries.push_back(make_entry(st.root_id, rec));
      pb::JournalRecord sus;
      auto* s = sus.mutable_suspended();
      s->set_proc_id(st.id);
      s->set_event_key(key);
      s->set_deadline_ms(deadline);
      s->set_resume_state(out.state());
      s->set_call_service(out.service());
      s->set_call_request(out.request());
      batch.entries.push_back(make_entry(st.root_id, sus));
      journal_append(self, std::move(batch),
                     [self, after_commit, key, svc = out.service(), req = out.request(),
                      next = out.state(), deadline] {
        after_commit();
        auto& st = self->state;
        st.busy = false;
        st.state = next;
        st.attempt = 1;
        st.event_key = key;
        st.call_service = svc;
        st.call_request = req;
        st.event_payload.clear();
        st.event_timed_out = false;
        if (st.stopping)
          return maybe_finish_stop(self);
        wait_for_call(self, deadline);
      });
      return;
    }
    case outcome::kind::wait: {
      int64_t wake_at = now_ms() + out.duration().count();
      batch.entries.push_back(make_entry(st.root_id, rec));
      pb::JournalRecord tr;
      tr.mutable_timer()->set_proc_id(st.id);
      tr.mutable_timer()->set_wake_at_ms(wake_at);
      tr.mutable_timer()->set_resume_state(out.state());
      batch.entries.push_back(make_entry(st.root_id, tr));
      journal_append(self, std::move(batch), [self, after_commit, next = out.state(), wake_at] {
        after_commit();
        auto& st = self->state;
        st.busy = false;
        st.state = next;
        st.attempt = 1;
        if (st.stopping)
          return maybe_finish_stop(self);
        st.status = proc_state::waiting_timeout;
        publish(self, "timer");
        arm_timer(self, wake_at, false);
      });
      return;
    }
    case outcome::kind::yield:
    case outcome::kind::fail:
      break;  // handled by the caller
  }
}

void on_step_done(proc_actor* self, step_result& r) {
  auto& st = self->state;
  st.job_queued = false;
  if (r.took > st.env->stuck_after)
    PLOG(warn, self, "stuck step: {} ran {} ms", st.inst->state_name(r.state),
         r.took.count() / 1000);
  switch (r.what) {
    case step_result::kind::crashed:
      PLOG(warn, self, "step {} crashed (attempt {}): {}", st.inst->state_name(r.state),
           st.attempt, r.error);
      st.busy = false;
      if (st.stopping)
        return maybe_finish_stop(self);
      // The supervisor restarts this subtree from its last journaled state.
      self->quit(caf::make_error(errc::step_crashed, r.error));
      return;
    case step_result::kind::failed:
      if (st.stopping) {
        st.busy = false;
        return maybe_finish_stop(self);
      }
      return on_business_failure(self, r.state, r.error);
    case step_result::kind::ok:
      break;
  }
  if (r.out->what() == outcome::kind::yield) {
    st.attempt = r.out->state() == st.state ? st.attempt + 1 : 1;
    st.state = r.out->state();
    st.busy = false;
    if (st.stopping)
      return maybe_finish_stop(self);
    return schedule(self);
  }
  commit_outcome(self, r);
}

/// Starts from the journaled image: spawn live children, then run, wait or roll back.
bool init_from_image(proc_actor* self, proc_start& s) {
  auto& st = self->state;
  const auto* p = s.image->find(s.id);
  if (p == nullptr) {
    spdlog::error("[proc {}] not in its tree's image", s.id);
    return false;
  }
  st.env = s.env;
  st.id = p->id;
  st.root_id = s.image->root_id;
  st.parent_id = p->parent_id;
  st.type = p->type;
  st.priority = p->priority;
  st.nonce = p->nonce;
  st.parent = s.parent;
  st.is_root = !s.parent;
  st.root = st.is_root ? caf::actor_cast<caf::actor>(self) : s.root;
  st.ptype = st.env->types->find(p->type);
  if (st.ptype == nullptr) {
    PLOG(error, self, "unknown procedure type '{}' (not registered in this binary)", p->type);
    return false;
  }
  st.restarts = restart_tracker(st.ptype->supervision);
  if (s.submitted) {
    st.inst = std::move(s.submitted);
  } else {
    std::string err;
    auto inst = st.env->types->make_from_bytes(p->type, p->data, &err);
    if (!inst) {
      PLOG(error, self, "cannot load data: {}", err);
      return false;
    }
    st.inst = std::move(inst);
  }
  st.locks = st.inst->locks();
  st.ancestors = s.ancestors;
  st.committed_data = p->data;
  if (st.env->on_procedure_start)
    st.env->on_procedure_start(st.id);
  st.state = p->state;
  st.status = p->status;
  st.event_key = p->event_key;
  st.call_service = p->call_service;
  st.call_request = p->call_request;
  st.event_payload = p->event_payload;
  st.event_timed_out = p->event_timed_out;
  st.past_no_return = s.image->past_no_return;
  st.waiting_on = p->last_spawned;
  for (auto cid : p->children) {
    bool awaited = std::find(p->last_spawned.begin(), p->last_spawned.end(), cid)
                   != p->last_spawned.end();
    auto& c = st.add_child(cid, awaited);
    if (const auto* cp = s.image->find(cid); cp != nullptr && is_final(cp->status)) {
      st.child_ended(c, child_result{cid, cp->status, cp->result_json, cp->error});
      collect_subtree(*s.image, cid, &st.finished_subtree);
    }
  }
  return true;
}

} // namespace

void maybe_join(proc_actor* self) {
  auto& st = self->state;
  if (st.stopping || st.failing || st.parked || st.busy || st.status != proc_state::waiting
      || !st.event_key.empty())
    return;
  if (st.waiting_left > 0)
    return;
  st.child_results.clear();
  for (auto w : st.waiting_on)
    st.child_results.push_back(st.child(w)->result);
  schedule(self);
  publish(self);
}

void spawn_child(proc_actor* self, const std::shared_ptr<const tree_image>& image,
                 uint64_t cid) {
  auto& st = self->state;
  auto* c = st.child(cid);
  proc_start cs;
  cs.env = st.env;
  cs.image = image;
  cs.id = cid;
  cs.parent = caf::actor_cast<caf::actor>(self);
  cs.root = st.root;
  cs.ancestors = st.ancestors;
  cs.ancestors.push_back(st.id);
  c->handle = self->spawn<caf::monitored>(procedure_actor, std::move(cs));
  c->restarting = false;
  st.child_addrs[c->handle.address()] = cid;
}

caf::behavior procedure_actor(proc_actor* self, proc_start start) {
  self->set_down_handler([self](caf::down_msg& m) { on_down(self, m); });
  if (start.parent)
    self->monitor(start.parent);  // a child goes down with its parent (see on_down)
  bool announced = start.submitted != nullptr;
  if (!init_from_image(self, start)) {
    self->quit(caf::make_error(errc::quarantined, "cannot recreate procedure"));
    return {};
  }
  auto& st = self->state;
  if (start.rollback) {
    st.failing = true;
    st.failure = start.image->failure;
    run_rollback(self, start.image);
  } else {
    // Children first: a parent's own run may depend on how they end.
    for (auto& c : st.children)
      if (!c.ended)
        spawn_child(self, start.image, c.id);
    for (const auto& c : st.children)
      if (c.ended)
        st.child_results.push_back(c.result);
    switch (st.status) {
      case proc_state::runnable:
        if (!st.event_key.empty() || start.image->find(st.id)->event_delivered) {
          // An event was delivered but the resume step had not run yet.
          st.event_key.clear();
          if (st.event_timed_out && !st.inst->resume_on_timeout()) {
            st.busy = true;
            on_business_failure(self, st.state, "timed out waiting for an event");
            break;
          }
        }
        if (!announced)
          publish(self);
        schedule(self);
        break;
      case proc_state::waiting:
        if (!st.call_service.empty())
          wait_for_call(self, start.image->find(st.id)->deadline_ms);
        else if (!st.event_key.empty())
          wait_for_event(self, start.image->find(st.id)->deadline_ms);
        else
          publish(self, "children");
        break;
      case proc_state::waiting_timeout:
        publish(self, "timer");
        arm_timer(self, start.image->find(st.id)->wake_at_ms, false);
        break;
      default:
        PLOG(warn, self, "started in state {}", to_string(st.status));
        break;
    }
  }
  return {
    [self](run_inline_atom, step_job& job) {
      // Our turn, for a type whose steps never block: run it here, free the slot, go on.
      auto r = worker_pool::run(job);
      if (!job.direct)
        self->send(self->state.env->scheduler, slot_atom::value, job.ctx.id());
      if (r.undo)
        return on_undo_done(self, r);
      on_step_done(self, r);
    },
    [self](step_done_atom, step_result& r) {
      if (r.undo)
        return on_undo_done(self, r);
      on_step_done(self, r);
    },
    [self](subtree_done_atom, subtree_done& d) {
      auto& st = self->state;
      auto* c = st.child(d.result.id);
      if (c == nullptr)
        return;
      st.child_ended(*c, d.result);
      for (auto& u : d.procs)
        st.finished_subtree.push_back(std::move(u));
      maybe_join(self);
    },
    [self](wake_atom, std::string& payload, bool timed_out, uint64_t token) {
      if (timed_out && token != self->state.timer_token)
        return;
      if (timed_out && self->state.hibernating) {
        // Our deadline, while the executor decides on our hibernation: if it agrees, it
        // keeps the deadline itself; if not, we take this again.
        self->delayed_send(self, std::chrono::milliseconds{5}, wake_atom::value,
                           std::move(payload), true, token);
        return;
      }
      on_wake(self, payload, timed_out);
    },
    [self](hibernate_atom, uint64_t token) { try_hibernate(self, token); },
    [self](call_again_atom, uint64_t token) {
      if (token == self->state.timer_token)
        issue_call(self);
    },
    [self](retry_atom, uint64_t token) {
      auto& st = self->state;
      if (token != st.timer_token || st.busy || st.stopping || st.parked)
        return;
      publish(self);
      schedule(self);
    },
    [self](stop_atom) {
      auto rp = self->make_response_promise();
      stop_subtree(self, rp);
      return rp;
    },
    [self](tree_fail_atom, uint64_t proc_id, int32_t state, std::string& error) {
      return begin_tree_failure(self, proc_id, state, error);
    },
    [self](no_return_atom) { self->state.past_no_return = true; },
    [self](lock_wait_atom, const std::string& blocker) {
      publish(self, blocker.empty() ? std::string{} : "lock " + blocker);
    },
    [self](restart_atom, std::vector<uint64_t>& ids) { restart_children(self, std::move(ids)); },
    [self](undo_retry_atom) { run_rollback(self, self->state.rb_image); },
    [self](abort_atom, uint64_t proc_id) -> caf::result<bool> {
      auto& st = self->state;
      if (st.past_no_return)
        return false;
      if (!st.failing)
        begin_tree_failure(self, st.id, st.state,
                           "aborted by operator (procedure " + std::to_string(proc_id) + ")");
      return true;
    },
  };
}

caf::actor spawn_root(caf::event_based_actor* supervisor, proc_start start) {
  return supervisor->spawn<caf::monitored>(procedure_actor, std::move(start));
}

} // namespace proctor
