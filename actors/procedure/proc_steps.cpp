// The step side of a procedure actor: once a step ran, its outcome is journaled and acted
// on (next state, done, children, suspend, call), or its failure is retried, rolled back, or
// retried forward past a point of no return.
#include "actors/base/errors.hpp"
#include "actors/base/task_spec.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

/// A step that spawned nothing committed: the next step sees no children (ctx.children() holds
/// those of the step just before it only) and none is awaited, as its journal reads back
/// (tree_image.cpp, StepCommitted without children).
void forget_last_spawn(proc_actor_state& st) {
  st.child_results.clear();
  st.waiting_on.clear();
  st.join_at_least = 0;
  st.join_wait = false;
}

/// Its end SUCCESS at `at_ms` (its Finished record's time; 0: its tree's end, stamped by
/// finish_tree).
proc_update final_update(proc_actor* self, const std::string& result, int64_t at_ms) {
  auto u = current_update(self);
  u.state = proc_state::success;
  u.result_json = result;
  u.ended = true;
  u.since_ms = u.ended_at_ms = at_ms;
  return u;
}

/// Runs the failed step again after the policy's back-off.
void retry_step(proc_actor* self, int32_t state, const std::string& error, int max_attempts) {
  auto& st = self->state;
  auto policy = st.ptype->retry;
  policy.max_attempts = max_attempts;
  // Like a restart, a retry starts from the last committed data, not from whatever the
  // failed attempt left in the instance.
  if (!st.inst->data().ParseFromString(st.committed_data)) {
    PLOG(error, self, "cannot reload the committed data for a retry; restarting instead");
    self->quit(caf::make_error(errc::step_crashed, "committed data does not parse"));
    return;
  }
  ++st.attempt;
  auto delay = retry_delay(policy, st.attempt);
  PLOG(info, self, "retrying {} in {} ms (attempt {}): {}", st.inst->state_name(state),
       delay.count(), st.attempt, error);
  st.busy = false;
  st.backing_off = true;  // an operator's retry may run it before its back-off ends
  publish(self, "retry", true);
  arm_timer(self, wall_ms() + delay.count(), false);
}

}  // namespace

/// After a commit: carry on, or stop if a stop was requested meanwhile.
void proceed(proc_actor* self) {
  auto& st = self->state;
  st.busy = false;
  // A failing root runs no further step: its tree stops (once the Failed record is durable)
  // and rolls back.
  if (st.stopping || st.rollback.failing)
    return maybe_finish_stop(self);
  schedule(self, true);
}

/// A business failure of this procedure's step: retry it while the type's policy allows,
/// then ask the root whether the tree rolls back (it does not past a point of no return:
/// then the step is retried forward).
void on_business_failure(proc_actor* self, int32_t state, const std::string& error) {
  auto& st = self->state;
  PLOG(info, self, "step {} failed (attempt {}): {}", st.inst->state_name(state), st.attempt,
       error);
  st.last_failure = error;
  const auto& policy = st.ptype->retry;
  if (policy.max_attempts == 0 || st.attempt < policy.max_attempts)
    return retry_step(self, state, error, policy.max_attempts);
  auto retry_forward = [self, state, error] {
    auto& st = self->state;
    auto limit = st.ptype->retry.max_attempts_past_no_return;
    if (limit > 0 && st.attempt >= limit) {
      PLOG(error, self,
           "past the point of no return and out of retries: {}; it stays "
           "FAILED until an operator intervenes",
           error);
      set_status(self, proc_state::failed, 0);  // nothing journals it: it ends here
      st.busy = false;
      auto u = final_update(self, {}, st.since_ms);
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
  // A join policy of the parent's may contain the failure (proc_cancel.cpp): it decides.
  auto asked =
    st.failure_contained
      ? self->request(st.parent, caf::infinite, child_failed_atom::value, st.id, state, error,
                      false)
      : self->request(st.root, caf::infinite, tree_fail_atom::value, st.id, state, error);
  std::move(asked).then(
    [self, retry_forward](bool rolls_back) {
      if (!rolls_back)
        return retry_forward();
      auto& st = self->state;
      st.busy = false;
      st.parked = true;
      maybe_finish_stop(self);
    },
    [self](caf::error& e) {
      PLOG(warn, self, "root unreachable while failing: {}", error_text(self->system(), e));
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
  step->set_data_version(st.ptype->version);
  // The step's time is that of the whole batch: a status it leads to starts then.
  const auto at = wall_ms();
  step->set_committed_at_ms(at);
  step->set_took_us(static_cast<uint64_t>(r.took.count()));
  journal_batch batch;
  auto after_commit = [self, no_return, data = r.data, executed, next = out.state()] {
    auto& st = self->state;
    st.ran_partly = false;  // the next state has not started
    st.started = true;
    // No progress: the step leads back to itself with its data unchanged.
    bool same = next == executed && data == st.committed_data;
    st.same_state_commits = same ? st.same_state_commits + 1 : 0;
    st.committed_data = data;
    if (no_return && !st.rollback.past_no_return) {
      st.rollback.past_no_return = true;
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
        forget_last_spawn(st);
        st.event_payload.clear();
        st.event_timed_out = false;
        st.event_failure.clear();
        proceed(self);
      });
      return;
    }
    case outcome::kind::done: {
      if (st.is_root && st.rollback.failing) {
        // The tree failed while its last step ran (an abort, a child's failure): the tree
        // rolls back, so the step is committed for its undo but does not end the tree.
        step->set_ended(true);
        batch.entries.push_back(make_entry(st.root_id, rec));
        journal_append(self, std::move(batch), [self, after_commit] {
          after_commit();
          proceed(self);  // stops (failing): nothing runs after it
        });
        return;
      }
      if (st.is_fragment())
        return finish_fragment(self, std::move(rec), out.result_json(), after_commit);
      if (st.is_root) {
        // The tree's summary says all the last step's records would: one write ends it.
        auto procs = std::move(st.finished_subtree);
        procs.push_back(final_update(self, out.result_json(), 0));
        return finish_tree(self, std::move(procs), false);
      }
      batch.entries.push_back(make_entry(st.root_id, rec));
      pb::JournalRecord fin;
      fin.mutable_finished()->set_proc_id(st.id);
      fin.mutable_finished()->set_state(pb::SUCCESS);
      fin.mutable_finished()->set_result_json(out.result_json());
      fin.mutable_finished()->set_at_ms(at);
      batch.entries.push_back(make_entry(st.root_id, fin));
      journal_append(self, std::move(batch), [self, after_commit, result = out.result_json(), at] {
        after_commit();
        auto& st = self->state;
        st.busy = false;
        set_status(self, proc_state::success, at);
        PLOG(debug, self, "SUCCESS");
        auto procs = std::move(st.finished_subtree);
        procs.push_back(final_update(self, result, at));
        self->send(st.env->executor, update_atom::value, procs.back());
        if (!st.locks.empty())
          self->send(st.env->scheduler, unlock_atom::value, st.id);
        subtree_done d;
        d.result = child_result{st.id, proc_state::success, result, {}, false};
        d.procs = std::move(procs);
        self->send(st.parent, subtree_done_atom::value, std::move(d));
        self->quit();
      });
      return;
    }
    case outcome::kind::spawn: {
      std::vector<uint64_t> ids;
      std::vector<pb::JournalRecord> subs;
      std::vector<pb::PeerMessage> remote;  // spawns for other nodes, in the same batch
      std::vector<std::string> remote_nodes;
      std::map<std::string, uint64_t> placed;  // children each node got from this step
      for (auto& c : out.children()) {
        if (c.any_node) {
          auto err = place_on_any_node(self, c, placed);
          if (!err.empty())
            return on_business_failure(self, executed, err);
        }
        if (!c.node.empty() && c.node != st.env->node_name) {
          auto cid = st.env->next_id->fetch_add(1);
          pb::JournalRecord sub;
          pb::PeerMessage m;
          auto err = stage_remote_child(self, c, cid, &sub, &m);
          if (!err.empty())
            return on_business_failure(self, executed, err);
          ids.push_back(cid);
          subs.push_back(std::move(sub));
          remote.push_back(std::move(m));
          remote_nodes.push_back(c.node);
          continue;
        }
        const auto* t = st.env->types->find(c.type);
        if (t == nullptr)
          return on_business_failure(self, executed,
                                     "spawn of unknown procedure type '" + c.type + "'");
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
        s->set_submitted_at_ms(at);
        subs.push_back(std::move(sub));
      }
      const auto join_k = out.join_of().at_least;
      const bool join_wait = out.on_child_failure_of() == child_failure::wait_for_siblings;
      if (join_k > ids.size())
        return on_business_failure(self, executed,
                                   "join::at_least(" + std::to_string(join_k) + ") of only "
                                     + std::to_string(ids.size()) + " children spawned");
      for (auto cid : ids)
        step->add_children(cid);
      step->set_join_at_least(join_k);
      step->set_join_wait_for_siblings(join_wait);
      batch.entries.push_back(make_entry(st.root_id, rec));
      for (auto& sub : subs)
        batch.entries.push_back(make_entry(st.root_id, sub));
      auto staged = std::make_shared<outbox_staging>();
      for (size_t i = 0; i < remote.size(); ++i)
        staged->add(batch, remote_nodes[i], remote[i]);
      journal_append_lsn(self, std::move(batch),
                         [self, after_commit, ids, subs = std::move(subs), next = out.state(),
                          staged, at, join_k, join_wait](uint64_t last_lsn, size_t batch_size) {
                           staged->hand_over(self->state.env->outbox, last_lsn, batch_size);
                           after_commit();
                           auto& st = self->state;
                           // The executor knows each child on another node from now on (their ends
                           // arrive there, also while this tree stops and no placeholder runs).
                           for (const auto& sub : subs)
                             if (!sub.submitted().node().empty()) {
                               proc_update u;
                               u.id = sub.submitted().proc_id();
                               u.root_id = st.root_id;
                               u.parent_id = st.id;
                               u.type = sub.submitted().type();
                               u.state = proc_state::waiting;
                               u.node = sub.submitted().node();
                               u.waiting_for = "node " + u.node;
                               u.started_at_ms = u.since_ms = sub.submitted().submitted_at_ms();
                               self->send(st.env->executor, update_atom::value, std::move(u));
                             }
                           st.busy = false;
                           st.state = next;
                           st.attempt = 1;
                           st.child_results.clear();
                           st.waiting_on = ids;
                           st.join_at_least = ids.empty() ? 0 : join_k;
                           st.join_wait = !ids.empty() && join_wait;
                           for (auto& c : st.children)
                             c.awaited = false;
                           st.waiting_left = 0;
                           for (auto cid : ids)
                             st.add_child(cid, true);
                           if (st.stopping) {
                             // Journaled but never started: their rollback has no partly run state
                             // to undo.
                             st.stopped_clean.insert(st.stopped_clean.end(), ids.begin(),
                                                     ids.end());
                             return maybe_finish_stop(self);
                           }
                           if (ids.empty())
                             return proceed(self);  // nothing to wait for
                           set_status(self, proc_state::waiting, at);
                           // The children's images: fresh submits, folded like any journal records
                           // (at the batch's last LSN: none of the batch's own is known here, and
                           // a node forgotten after this batch is forgotten after every one).
                           auto img = std::make_shared<tree_image>();
                           img->root_id = st.root_id;
                           for (size_t i = 0; i < ids.size(); ++i) {
                             tree_folder f(st.root_id);
                             f.add(last_lsn, subs[i]);
                             auto one = f.finish();
                             img->procs.emplace(ids[i], std::move(one.procs.at(ids[i])));
                           }
                           std::shared_ptr<const tree_image> cimg = img;
                           for (auto cid : ids)
                             spawn_child(self, cimg, cid, true);
                           publish(self, "children");
                           offer_passivation(self);
                         });
      return;
    }
    case outcome::kind::suspend:
    case outcome::kind::call:
    case outcome::kind::dispatch: {
      // Suspended until event `key`; a call waits for the reply to its request, which
      // comes as an event of a key of its own; a dispatch, for its task's end, likewise
      // (its service names the queue, its request is the task: docs/workers.md).
      bool call = out.what() != outcome::kind::suspend;
      if (!call && is_call_key(out.event_key()))
        return on_business_failure(self, executed, call_key_refusal(out.event_key()));
      std::string svc = out.service(), req = out.request();
      if (out.what() == outcome::kind::call && is_task_service(svc))
        return on_business_failure(self, executed, task_service_refusal(svc));
      if (out.what() == outcome::kind::dispatch) {
        if (auto why = task_queue_refusal(out.service()); !why.empty())
          return on_business_failure(self, executed, why);
        if (auto why = task_input_refusal(out.request()); !why.empty())
          return on_business_failure(self, executed, why);
        svc = task_service_prefix + out.service();
        req = task_spec_of(out).SerializeAsString();
      }
      int64_t deadline = out.duration().count() > 0 ? wall_ms() + out.duration().count() : 0;
      auto key = call ? new_call_key(st.id) : out.event_key();
      batch.entries.push_back(make_entry(st.root_id, rec));
      pb::JournalRecord sus;
      auto* s = sus.mutable_suspended();
      s->set_proc_id(st.id);
      s->set_event_key(key);
      s->set_deadline_ms(deadline);
      s->set_resume_state(out.state());
      std::optional<int32_t> timeout_state;
      if (out.has_timeout_state()) {
        timeout_state = out.timeout_state();
        s->set_timeout_state(out.timeout_state());
      }
      if (call) {
        s->set_call_service(svc);
        s->set_call_request(req);
      }
      batch.entries.push_back(make_entry(st.root_id, sus));
      journal_append(self, std::move(batch),
                     [self, after_commit, call, key, svc = std::move(svc), req = std::move(req),
                      next = out.state(), deadline, at, timeout_state] {
                       after_commit();
                       auto& st = self->state;
                       st.busy = false;
                       st.state = next;
                       st.attempt = 1;
                       st.event_key = key;
                       st.timeout_state = timeout_state;
                       if (call) {
                         st.call_service = svc;
                         st.call_request = req;
                       }
                       forget_last_spawn(st);  // its resume step follows this one
                       st.event_payload.clear();
                       st.event_timed_out = false;
                       st.event_failure.clear();
                       if (st.stopping)
                         return maybe_finish_stop(self);
                       set_status(self, proc_state::waiting, at);
                       if (call)
                         wait_for_call(self, deadline);
                       else
                         wait_for_event(self, deadline);
                     });
      return;
    }
    case outcome::kind::wait: {
      int64_t wake_at = wall_ms() + out.duration().count();
      batch.entries.push_back(make_entry(st.root_id, rec));
      pb::JournalRecord tr;
      tr.mutable_timer()->set_proc_id(st.id);
      tr.mutable_timer()->set_wake_at_ms(wake_at);
      tr.mutable_timer()->set_resume_state(out.state());
      batch.entries.push_back(make_entry(st.root_id, tr));
      journal_append(self, std::move(batch), [self, after_commit, next = out.state(), wake_at, at] {
        after_commit();
        auto& st = self->state;
        st.busy = false;
        st.state = next;
        st.attempt = 1;
        forget_last_spawn(st);  // its wake-up step follows this one
        if (st.stopping)
          return maybe_finish_stop(self);
        set_status(self, proc_state::waiting_timeout, at);
        publish(self, "timer");
        arm_timer(self, wake_at, false);
        offer_passivation(self);
      });
      return;
    }
    case outcome::kind::yield:
    case outcome::kind::fail:
      break;  // handled by the caller
  }
}

}  // namespace

void on_step_done(proc_actor* self, step_result& r) {
  auto& st = self->state;
  st.job_queued = false;
  if (r.took > st.env->stuck_after)
    PLOG(warn, self, "stuck step: {} ran {} ms", st.inst->state_name(r.state),
         r.took.count() / 1000);
  switch (r.what) {
    case step_result::kind::crashed:
      PLOG(warn, self, "step {} crashed (attempt {}): {}", st.inst->state_name(r.state), st.attempt,
           r.error);
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

}  // namespace proctor
