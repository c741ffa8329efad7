// The root's rollback of a failed tree: stop every actor of the tree at a step boundary,
// read the tree back from the journal, then undo what remains in exact reverse order, one
// journaled undo at a time, so that a crash resumes where it stopped.
#include "actors/base/errors.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/keys.hpp"

namespace proctor {

namespace {

/// The tree (or this node's fragment of it) ended: the scheduler releases the locks its
/// procedures hold, if any may (node_env::locks_taken).
void unlock_tree(proc_actor* self) {
  auto& st = self->state;
  if (st.env->locks_taken->load(std::memory_order_acquire))
    self->send(st.env->scheduler, unlock_tree_atom::value, st.root_id);
}

}  // namespace

bool proc_actor_state::parent_lost() const noexcept {
  return is_fragment() && env->cluster->lost(parent_node, fragment_lsn);
}

bool begin_tree_failure(proc_actor* self, uint64_t proc_id, int32_t state,
                        const std::string& error) {
  auto& st = self->state;
  if (st.rollback.past_no_return)
    return false;
  if (st.rollback.failing)
    return true;
  st.rollback.failing = true;
  st.rollback.failure = error;
  PLOG(info, self, "tree fails (procedure {}: {}); stopping it to roll back", proc_id, error);
  pb::JournalRecord rec;
  auto* f = rec.mutable_failed();
  f->set_proc_id(proc_id);
  f->set_failed_state(state);
  f->set_error(error);
  const auto at = wall_ms();
  f->set_at_ms(at);
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  st.rollback.busy_failure_record = true;
  journal_append(self, std::move(batch), [self, at] {
    auto& st = self->state;
    st.rollback.busy_failure_record = false;
    for (auto& rp : st.rollback.failure_acks)
      rp.deliver(true);
    st.rollback.failure_acks.clear();
    st.rollback.failed_at_ms = at;
    set_status(self, proc_state::failed, at);
    publish_rollback(self, {});
    stop_subtree(self);
  });
  return true;
}

void rollback_after_stop(proc_actor* self) {
  auto& st = self->state;
  if (st.rollback.image || st.rollback.busy_failure_record)
    return;  // already reading / rolling back, or the Failed record is not durable yet
  st.rollback.image = std::make_shared<const tree_image>();  // marks "reading"
  auto clean = stopped_clean(self);
  self->request(st.env->journal, caf::infinite, read_tree_atom::value, st.root_id)
    .then(
      [self, clean](journal_records& recs) {
        auto& st = self->state;
        auto image = std::make_shared<tree_image>(fold_tree(st.root_id, recs));
        if (!image->corrupt.empty()) {
          PLOG(error, self, "cannot roll back: tree damaged: {}", image->corrupt);
          self->quit(caf::make_error(errc::quarantined, image->corrupt));
          return;
        }
        auto batch = never_started_undos(self, *image, clean, {});
        st.rollback.plan.clear();
        if (batch.entries.empty())
          return run_rollback(self, image);
        st.busy = true;
        journal_append(self, std::move(batch), [self, image] {
          self->state.busy = false;
          run_rollback(self, image);
        });
      },
      [self](caf::error& e) {
        PLOG(critical, self, "journal read failed: {}", error_text(self->system(), e));
        self->quit(caf::make_error(errc::journal_failed));
      });
}

journal_batch never_started_undos(proc_actor* self, tree_image& image,
                                  const std::vector<uint64_t>& clean,
                                  const std::function<bool(uint64_t)>& in_scope) {
  journal_batch batch;
  for (auto id : clean) {
    auto* p = image.find(id);
    if (p == nullptr || (in_scope && !in_scope(id)) || is_final(p->status) || p->partial_undone
        || p->steps_ended || (p->failed && p->failed_state != 0))
      continue;
    pb::JournalRecord rec;
    auto* u = rec.mutable_undone();
    u->set_proc_id(id);
    u->set_state(p->state);
    u->set_never_started(true);
    u->set_at_ms(wall_ms());
    batch.entries.push_back(make_entry(self->state.root_id, rec));
    p->partial_undone = true;
  }
  return batch;
}

void publish_rollback(proc_actor* self, std::string waiting_for) {
  auto& st = self->state;
  if (st.cancel_running)
    return publish_cancellation(self, waiting_for);  // a parent cancelling children
  auto u = current_update(self);
  u.state = proc_state::failed;
  u.error = st.rollback.failure;
  u.waiting_for = std::move(waiting_for);
  // FAILED since its tree failed (its Failed record), whatever the rollback's progress.
  u.since_ms = st.rollback.failed_at_ms;
  self->send(st.env->executor, update_atom::value, std::move(u));
}

std::string rollback_progress(const proc_actor_state& st) {
  return "rolling back: " + std::to_string(st.rollback.undone_before + st.rollback.plan_pos)
         + " of " + std::to_string(st.rollback.undone_before + st.rollback.plan.size()) + " undone";
}

void run_rollback(proc_actor* self, std::shared_ptr<const tree_image> image) {
  auto& st = self->state;
  if (st.cancel_running && (st.stopping || st.rollback.failing)) {
    // A parent's cancellation (proc_cancel.cpp) stops at this boundary: the tree stops.
    abandon_cancellation(self);
    return maybe_finish_stop(self);
  }
  if (!image)
    return;  // a stale undo retry of a cancellation given up
  if (st.rollback.image != image) {
    st.rollback.image = image;
    st.rollback.plan = rollback_plan(*image);
    st.rollback.plan_pos = 0;
    st.rollback.undo_attempt = 1;
    st.rollback.undone_before = undos_done(*image);
    st.rollback.failure = image->failure;
    st.rollback.task_key.clear();  // a task an earlier plan waited for: found in `image` again
    PLOG(info, self, "rolling back: {} undo(s) to run, {} done before", st.rollback.plan.size(),
         st.rollback.undone_before);
    // The ends of fragments on other nodes come here from now on (their placeholders
    // stopped).
    for (const auto& item : st.rollback.plan)
      if (item.remote)
        self->send(st.env->executor, remote_route_atom::value, item.proc_id,
                   caf::actor_cast<caf::actor>(self));
    self->send(st.env->executor, rollback_atom::value, st.root_id, true);
  }
  if (!st.rollback.task_key.empty())
    return;  // the undo under way waits for a worker's task (undo_tasks.cpp)
  publish_rollback(self, rollback_progress(st));
  if (st.rollback.plan_pos == st.rollback.plan.size() && st.cancel_running)
    return finish_cancellation(self);
  if (st.rollback.plan_pos == st.rollback.plan.size()) {
    std::vector<proc_update> procs;
    std::string not_undone;
    for (const auto& [id, p] : image->procs) {
      auto u = update_from_image(*image, p);
      if (auto f = st.rollback.remote_failed.find(id);
          p.remote() && f != st.rollback.remote_failed.end()) {
        u.state = proc_state::failed;  // its end came during the rollback
        u.error = f->second;
        u.since_ms = u.ended_at_ms = 0;  // finish_tree stamps the time
      }
      if (p.remote() && u.state == proc_state::failed) {
        // Its part could not be undone there (its node was forgotten, or it is past its
        // point of no return there): it stays FAILED, saying why, never ROLLEDBACK.
        not_undone += (not_undone.empty() ? "" : ", ") + std::to_string(id) + " on node " + p.node;
        u.ended = true;
        procs.push_back(std::move(u));
        continue;
      }
      if (p.status != proc_state::rolledback)
        u.since_ms = u.ended_at_ms = 0;  // rolled back now: finish_tree stamps the time
      u.state = proc_state::rolledback;
      u.ended = true;
      if (u.error.empty())
        u.error = st.rollback.failure;
      u.result_json.clear();
      procs.push_back(std::move(u));
    }
    if (!not_undone.empty())
      for (auto& u : procs)
        if (u.id == st.root_id)
          u.error += " (not undone: procedure " + not_undone + ")";
    PLOG(info, self, "ROLLEDBACK ({} procedure(s){})", procs.size(),
         not_undone.empty() ? "" : "; not undone: " + not_undone);
    return finish_tree(self, std::move(procs), true);
  }
  const auto& item = st.rollback.plan[st.rollback.plan_pos];
  const auto* p = image->find(item.proc_id);
  if (item.remote && p != nullptr)
    return order_remote_rollback(self, *p);
  std::string err;
  auto inst = p == nullptr
                ? nullptr
                : st.env->types->make_from_journal(p->type, item.data_version, item.data, &err);
  if (!inst) {
    // Without the procedure we cannot undo its step; never skip silently.
    PLOG(critical, self, "cannot recreate procedure {} to undo state {}: {}; tree quarantined",
         item.proc_id, item.state, err);
    self->quit(caf::make_error(errc::quarantined, err));
    return;
  }
  st.rollback.undo_state_name = inst->state_name(item.state);
  if (resume_undo_task(self, item))
    return;  // a worker's task, dispatched before: waited for again (undo_tasks.cpp)
  step_job job;
  job.proc = caf::actor_cast<caf::actor>(self);
  job.inst = std::move(inst);
  job.ctx.id_ = p->id;
  job.ctx.root_id_ = st.tree_root_id;
  job.ctx.parent_id_ = p->parent_id;
  job.ctx.node_ = &st.env->node_name;
  job.nodes = st.env->cluster->node_names();
  job.ctx.nodes_ = job.nodes.get();
  job.state = item.state;
  job.ctx.undo_committed_ = item.committed();
  job.ctx.fencing_.epoch = st.env->epoch;
  job.undo = true;
  job.tag = st.rollback.plan_pos;
  job.priority = st.priority;
  job.type = p->type;
  job.run_inline = runs_on_actor(st.env->types->find(p->type), *job.inst, item.state, true);
  st.busy = true;
  self->send(st.env->scheduler, ready_atom::value, std::move(job));
}

void on_undo_done(proc_actor* self, step_result& r) {
  auto& st = self->state;
  st.busy = false;
  if (r.tag != st.rollback.plan_pos || st.rollback.plan_pos >= st.rollback.plan.size())
    return;
  const bool ok = r.what == step_result::kind::ok;
  if (ok && r.out && r.out->what() == outcome::kind::dispatch)
    return dispatch_undo_task(self, r);  // a worker runs it (undo_tasks.cpp)
  self->send(st.env->executor, undo_atom::value, ok);
  if (!ok)
    return retry_undo(self, r.error);
  const auto& item = st.rollback.plan[st.rollback.plan_pos];
  finish_undo(self, std::move(r.data), undone_data_version(st, item), 0);
}

uint32_t undone_data_version(const proc_actor_state& st, const undo_item& item) {
  return st.env->types->find(st.rollback.image->find(item.proc_id)->type)->version;
}

void retry_undo(proc_actor* self, const std::string& error) {
  auto& st = self->state;
  const auto& item = st.rollback.plan[st.rollback.plan_pos];
  // A rollback cannot itself be rolled back: retry it until it succeeds, with back-off,
  // and say so where an operator looks.
  retry_policy backoff;
  backoff.kind = retry_policy::backoff::exponential;
  backoff.delay = st.ptype->supervision.backoff_min;
  backoff.max_delay = std::max(st.ptype->supervision.backoff_max, std::chrono::milliseconds{1});
  backoff.max_attempts = 0;  // never gives up
  auto delay = retry_delay(backoff, st.rollback.undo_attempt + 1);
  auto why = "undo of state " + st.rollback.undo_state_name + " of procedure "
             + std::to_string(item.proc_id) + " failing: " + error + ", attempt "
             + std::to_string(st.rollback.undo_attempt);
  PLOG(warn, self, "{}; again in {} ms", why, delay.count());
  publish_rollback(self, std::move(why));
  ++st.rollback.undo_attempt;
  arm_timeout(self, st.env->timeout, st.id, timeout_kind::undo_retry, wall_ms() + delay.count(),
              undo_retry_atom::value);
}

void finish_undo(proc_actor* self, std::string data, uint32_t data_version, uint64_t event_lsn) {
  auto& st = self->state;
  const auto& item = st.rollback.plan[st.rollback.plan_pos];
  st.rollback.undo_attempt = 1;
  pb::JournalRecord rec;
  auto* u = rec.mutable_undone();
  u->set_undone_lsn(item.lsn);
  u->set_proc_id(item.proc_id);
  u->set_state(item.state);
  u->set_data(std::move(data));
  u->set_data_version(data_version);
  u->set_at_ms(wall_ms());
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  // The end of its task goes with it: a crash leaves the task's end kept and the undo to
  // finish, or neither (as a delivered event's, proc_waiting.cpp).
  if (event_lsn != 0)
    batch.deletes.push_back({journal_keys::meta_root, event_lsn, event_lsn + 1});
  st.busy = true;
  journal_append(self, std::move(batch), [self, event_lsn, id = item.proc_id] {
    auto& st = self->state;
    st.busy = false;
    if (event_lsn != 0)
      self->send(st.env->executor, event_taken_atom::value, event_lsn, id);
    ++st.rollback.plan_pos;
    run_rollback(self, st.rollback.image);
  });
}

void release_remote_children(const cluster_view& cluster, const std::vector<proc_update>& procs,
                             journal_batch& batch, outbox_staging& staged) {
  // The tree ended: its fragments on other nodes can go (nothing can order them undone).
  // A part lost with its node (FAILED there, the node forgotten) has nothing to release.
  for (const auto& u : procs) {
    if (u.node.empty())
      continue;
    if (u.state == proc_state::failed) {
      auto s = cluster.get(u.node);
      if (s && s->forgotten_lsn != 0)
        continue;
    }
    pb::PeerMessage m;
    m.mutable_release()->set_proc_id(u.id);
    staged.add(batch, u.node, m);
  }
}

void finish_fragment(proc_actor* self, pb::JournalRecord step, std::string result_json,
                     std::function<void()> after_commit) {
  auto& st = self->state;
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, step));
  pb::JournalRecord fin;
  fin.mutable_finished()->set_proc_id(st.id);
  fin.mutable_finished()->set_state(pb::SUCCESS);
  fin.mutable_finished()->set_result_json(result_json);
  const auto at = wall_ms();
  fin.mutable_finished()->set_at_ms(at);
  batch.entries.push_back(make_entry(st.root_id, fin));
  pb::PeerMessage m;
  auto* e = m.mutable_end();
  e->set_proc_id(st.id);
  e->set_state(pb::SUCCESS);
  e->set_result_json(result_json);
  auto staged = std::make_shared<outbox_staging>();
  if (!st.parent_lost())
    staged->add(batch, st.parent_node, m);
  st.finishing = true;
  journal_append_lsn(
    self, std::move(batch),
    [self, staged, after_commit, result = std::move(result_json), at](uint64_t lsn, size_t n) {
      auto& st = self->state;
      staged->hand_over(st.env->outbox, lsn, n);
      after_commit();
      st.busy = false;
      set_status(self, proc_state::success, at);
      PLOG(debug, self, "SUCCESS (fragment of a tree on node {})", st.parent_node);
      auto procs = std::move(st.finished_subtree);
      auto u = current_update(self);
      u.state = proc_state::success;
      u.result_json = result;
      u.ended = true;
      u.since_ms = u.ended_at_ms = at;
      procs.push_back(std::move(u));
      unlock_tree(self);
      self->send(st.env->executor, fragment_done_atom::value,
                 tree_done{st.root_id, std::move(procs), {}});
      self->quit();
    });
}

void finish_tree(proc_actor* self, std::vector<proc_update> procs, bool rolled_back) {
  auto& st = self->state;
  pb::JournalRecord rec;
  auto* s = rec.mutable_summary();
  // The tree ends now: so do the procedures whose end no record of theirs holds (the root,
  // and every procedure a rollback ended). What the executor shows is what the summary says.
  const auto at = wall_ms();
  s->set_finished_at_ms(at);
  for (auto& u : procs) {
    if (u.ended_at_ms == 0)
      u.ended_at_ms = at;
    u.since_ms = u.ended_at_ms;
  }
  for (const auto& u : procs) {
    auto* ps = s->add_procs();
    ps->set_proc_id(u.id);
    ps->set_parent_id(u.parent_id);
    ps->set_type(u.type);
    ps->set_state(to_pb(u.state));
    // An empty string is what an unset field reads and writes as; setting one allocates a
    // string all the same (protobuf 3.21), and most of these are empty.
    if (!u.result_json.empty())
      ps->set_result_json(u.result_json);
    if (!u.error.empty())
      ps->set_error(u.error);
    for (auto c : u.children)
      ps->add_children(c);
    if (!u.nonce.empty())
      ps->set_nonce(u.nonce);
    if (!u.node.empty())
      ps->set_node(u.node);
    ps->set_bypassed(u.bypassed);
    ps->set_started_at_ms(u.started_at_ms);
    ps->set_ended_at_ms(u.ended_at_ms);
    if (u.id == st.id && !st.is_fragment()) {
      if (!st.args.empty())
        ps->set_args(st.args);
      ps->set_type_version(st.args_version);
      ps->set_priority(st.priority);
      ps->set_resubmitted_from(st.resubmitted_from);
      ps->set_placement_slot(st.placement_slot);
    }
  }
  // Only the summary is written: the fold lets it supersede the tree's earlier records, and
  // the executor deletes those soon, together with its neighbours' (collect_finished in
  // executor_retention.cpp; a range delete here per tree made RocksDB stall).
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  auto summary = batch.entries.back().record;
  auto staged = std::make_shared<outbox_staging>();
  release_remote_children(*st.env->cluster, procs, batch, *staged);
  st.finishing = true;
  if (st.is_fragment() && !st.parent_lost()) {
    // The parent's node learns that this fragment rolled back (it failed here, or its
    // parent ordered it); it stays, as this summary, until released.
    pb::PeerMessage m;
    auto* e = m.mutable_end();
    e->set_proc_id(st.id);
    e->set_state(rolled_back ? pb::ROLLEDBACK : pb::SUCCESS);
    e->set_error(st.rollback.failure);
    staged->add(batch, st.parent_node, m);
  }
  st.busy = true;
  journal_append_lsn(
    self, std::move(batch),
    [self, procs = std::move(procs), rolled_back, summary = std::move(summary),
     staged](uint64_t lsn, size_t n) mutable {
      auto& st = self->state;
      staged->hand_over(st.env->outbox, lsn, n);
      st.busy = false;
      PLOG(debug, self, "tree finished ({})", rolled_back ? "ROLLEDBACK" : "SUCCESS");
      unlock_tree(self);
      self->send(st.env->executor, tree_done_atom::value,
                 tree_done{st.root_id, std::move(procs), std::move(summary), st.parent_lost(),
                           st.tree_records ? st.tree_records->records.load() : 0});
      self->quit();
    });
}

}  // namespace proctor
