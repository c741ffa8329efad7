// The executor's recovery: the trees read back from the journal at start-up are started,
// rolled back, passivated, retained (finished) or quarantined; locks held at the crash are
// taken again first.
#include <chrono>

#include <spdlog/spdlog.h>

#include "actors/base/task_spec.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/tree_types.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"
#include "actors/scheduling/step_scheduler.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

/// A tree whose records cannot be read is neither run nor deleted: it is listed for an
/// operator, and what could be read of it stays visible in status.
void quarantine(executor_actor* self, const tree_image& t, const std::string& reason) {
  auto& st = self->state;
  spdlog::error("[root {}] quarantined: {} ({} journal records kept)", t.root_id, reason,
                t.records);
  pb::Quarantined q;
  q.set_root_id(t.root_id);
  q.set_reason(reason);
  q.set_records(t.records);
  st.quarantined.push_back(std::move(q));
  for (const auto& [id, p] : t.procs) {
    // Out of service until an operator acts: nothing wakes it, and its calls stop (a
    // caller waiting on a service that never answers would stay until the node stops).
    stop_call(self, id);
    forget_event_wait(self, id);
    auto u = update_from_image(t, p);
    u.waiting_for = "operator (tree quarantined: " + reason + ")";
    u.ended = false;
    record_update(self, std::move(u));
  }
  if (!t.procs.count(t.root_id)) {
    proc_update u;
    u.id = u.root_id = t.root_id;
    u.state = proc_state::failed;
    u.error = "quarantined: " + reason;
    u.waiting_for = "operator (tree quarantined)";
    record_update(self, std::move(u));
  }
}

/// Locks held when the node stopped are taken again before anything of the tree runs: by
/// every procedure that had started (or whose tree is rolling back) and had not ended.
void restore_locks(executor_actor* self, const tree_image& t) {
  auto& st = self->state;
  for (const auto& [id, p] : t.procs) {
    if (is_final(p.status) || (!p.has_committed() && !t.failed))
      continue;
    if (const auto* type = st.env->types->find(p.type); type && !type->declares_locks)
      continue;
    std::string err;
    auto inst = st.env->types->make_from_journal(p.type, p.data_version, p.data, &err);
    if (!inst)
      continue;  // the tree's own start reports it
    auto locks = inst->locks();
    if (locks.empty())
      continue;
    // Before the tree's actors start: its end must tell the scheduler (node_env::locks_taken).
    st.env->locks_taken->store(true, std::memory_order_release);
    self->send(st.env->scheduler, restore_locks_atom::value, id, t.root_id, std::move(locks));
  }
}

namespace {

/// A wait an event can end: an event's, or a task's (its end is journaled as an event under
/// its key: executor_tasks.cpp); not a call's (its reply is not journaled until delivered).
bool waits_for_event(const proc_image& p) {
  return p.call_service.empty() || is_task_service(p.call_service);
}

/// The events read back that `t` consumed (its EventDelivered records name them): recovery
/// does not keep them for later waiters.
void note_event_consumers(executor_state& st, const tree_image& t) {
  if (st.events.kept.empty())
    return;
  for (auto lsn : t.consumed_events)
    st.recovery.consumed.insert(lsn);
}

/// The procedures of `t` that wait for the key of an event read back, with the LSN of their
/// wait (match_recovered_events).
void note_event_waiters(executor_state& st, const tree_image& t) {
  if (st.events.kept.empty())
    return;
  for (const auto& [id, p] : t.procs)
    if (p.status == proc_state::waiting && !p.event_key.empty() && waits_for_event(p)
        && !p.event_delivered && !p.remote()
        && st.events.kept.find(p.event_key) != st.events.kept.end())
      st.recovery.waiters[p.event_key].emplace_back(p.wait_lsn, id);
}

/// The event waiters of `t`, a tree that starts with its actors, wait from now on (without
/// an actor until theirs registers): an event that comes before their actors do wakes them
/// (held for them), as it would have before the restart.
void await_recovered_events(executor_actor* self, const tree_image& t) {
  for (const auto& [id, p] : t.procs)
    if (p.status == proc_state::waiting && !p.event_key.empty() && waits_for_event(p)
        && !p.event_delivered && !p.remote())
      await_event(self, p.event_key, id, caf::actor{});
}

}  // namespace

void recover_begin(executor_actor* self) {
  auto& st = self->state;
  st.recovery.active = true;
  st.recovery.tally = {};
  st.recovery.tally.since = std::chrono::steady_clock::now();
}

void recover_part(executor_actor* self, recovered_state& part) {
  auto& st = self->state;
  auto& n = st.recovery.tally;
  // Events first: a tree that waits for one that arrived while the node was down wakes.
  // Their expiry is armed at the end, with everything else the take-over arms.
  n.events += part.events.size();
  for (auto& ev : part.events)
    st.events.kept[ev.key].push_back(
      pending_event{ev.lsn, std::move(ev.payload_json), ev.arrived_at_ms, std::move(ev.failure)});
  for (auto& [type, l] : part.limits) {
    st.limits.records[type] = l;
    if (is_queue_limit_name(type))  // a task queue's (the scheduler has the types')
      set_queue_limit(self, task_queue_of(type), l.limits, l.at_ms);
  }
  for (auto& [name, s] : part.schedules)
    recover_schedule(self, s);
  progress_recovered(self, part.peer_progress);
  event_ids_recovered(self, part.event_ids);
  nonces_taken_recovered(self, part.nonces_taken);
  tasks_recovered(self, part.tasks);
  recover_audit(self, part.audit);
  auto& trees = part.trees;
  // Sized by the first part (all of it, from recover()): rehashing tables of a million
  // entries at once is most of a large recovery. A scan's later parts let the tables grow
  // as they do (incremental_map.hpp); a reserve per part would rehash them every time.
  size_t procs = 0, waiting_roots = 0;
  // Whether each tree only waits, found once (a walk of all of its procedures).
  std::vector<char> sleeps_at(trees.size());
  for (size_t i = 0; i < trees.size(); ++i) {
    const auto& t = trees[i];
    procs += t.procs.size();
    sleeps_at[i] =
      st.cfg.passivate_after.count() >= 0 && t.corrupt.empty() && only_waits(t, *st.env->cluster);
    waiting_roots += sleeps_at[i] ? 1 : 0;
  }
  if (st.procs.empty()) {
    st.procs.reserve(procs);
    st.roots.reserve(trees.size());
    st.events.waiters.reserve(waiting_roots);
    st.events.waiting_key.reserve(waiting_roots);
  }
  for (size_t i = 0; i < trees.size(); ++i) {
    auto image = std::make_shared<const tree_image>(std::move(trees[i]));
    if (!image->corrupt.empty()) {
      ++n.quarantined;
      quarantine(self, *image, image->corrupt);
      continue;
    }
    note_event_consumers(st, *image);
    bool sleeps = sleeps_at[i] != 0;
    // One reading of the clocks for the tree's procedures (they were read back together).
    update_clock clock{wall_ms(), steady_ns()};
    for (const auto& [id, p] : image->procs) {
      auto u = update_from_image(*image, p);
      if (image->failed && !is_final(u.state) && id == image->root_id) {
        u.state = proc_state::failed;
        u.since_ms = image->failed_at_ms;  // FAILED since its tree failed
      }
      // What it waits for, as the journal says: a live actor publishes its own, but a
      // passivated child (held by its parent without an actor, proc_passivated_children.cpp)
      // never does until it is woken, and showed WAITING for nothing.
      if (!is_final(u.state)
          && (sleeps || u.state == proc_state::waiting || u.state == proc_state::waiting_timeout))
        u.waiting_for = waiting_reason(p);
      record_update(self, std::move(u), clock);
    }
    const auto* root = image->root();
    if (!root->nonce.empty()) {
      st.nonces[root->nonce] = image->root_id;
      if (root->placement_slot != 0)
        root_nonce_slot(self, root->nonce, root->placement_slot - 1);
    }
    // A fragment whose parent's node an operator forgot after it came: rolled back (again:
    // the order may not have been journaled before the node went down) once recovery ends;
    // rolled back, nothing will release it: it expires as a root's result does.
    const bool orphan =
      !root->parent_node.empty()
      && st.env->cluster->lost(root->parent_node,
                               root->submitted_lsn != 0 ? root->submitted_lsn : image->last_lsn);
    if (orphan && !image->rolled_back)
      st.remote.orphans.emplace_back(root->parent_node, image->root_id);
    if (root->resubmitted_from != 0)
      note_resubmit(self, root->resubmitted_from, image->root_id, root->submitted_lsn);
    // A fragment that succeeded and was then ordered rolled back: its rollback resumes.
    bool fragment_rolls_back = !root->parent_node.empty() && image->failed && !image->rolled_back;
    if (image->finished && !root->parent_node.empty() && !fragment_rolls_back) {
      // A fragment of a tree on another node, ended: kept as it is until released.
      ++n.done;
      st.roots[image->root_id].finished = true;
      if (orphan && image->rolled_back)
        expire_after(self, image->root_id,
                     st.cfg.result_ttl
                       - std::chrono::milliseconds{wall_ms() - image->finished_at_ms});
      continue;
    }
    if (image->finished && !fragment_rolls_back) {
      ++n.done;
      auto& re = st.roots[image->root_id];
      re.finished = true;
      re.nonce = root->nonce;
      auto finished_at = image->finished_at_ms;
      if (!image->summarized || image->records > 1) {
        // The node went down before its records were collected (or before it was even
        // folded into a summary): they go soon, with the summary written in their place.
        if (!image->summarized)
          finished_at = wall_ms();
        pb::JournalRecord rec;
        *rec.mutable_summary() = summarize(*image, finished_at);
        keep_history(self, image->root_id, make_entry(image->root_id, rec).record, image->records);
      }
      auto left = st.cfg.result_ttl - std::chrono::milliseconds{wall_ms() - finished_at};
      expire_after(self, image->root_id, left);
      continue;
    }
    // A tree another version of the program wrote runs only if its data can be upgraded.
    if (auto why = tree_type_problem(*st.env->types, *image); !why.empty()) {
      ++n.quarantined;
      quarantine(self, *image, why);
      continue;
    }
    bool rb = image->failed && !image->rolled_back;
    if (!rb)
      note_event_waiters(st, *image);
    // Before anything of any tree runs (at the end).
    restore_locks(self, *image);
    if (sleeps) {
      ++n.passivated;
      recover_passivated(self, *image);
      continue;
    }
    (rb ? n.rolling : n.running)++;
    if (!rb)
      await_recovered_events(self, *image);
    st.recovery.to_start.emplace_back(std::move(image), rb);
  }
}

void recover_end(executor_actor* self) {
  auto& st = self->state;
  // Before anything is started or woken: the events go to their waiters as before the restart.
  match_recovered_events(self);
  st.recovery.active = false;
  tasks_recovery_end(self);  // after the events: a task whose end was journaled is not queued
  for (auto& [key, evs] : st.events.kept)
    for (const auto& ev : evs)
      arm_event_ttl(self, key, ev);
  for (const auto& a : std::exchange(st.recovery.to_arm, {}))
    arm_timeout(self, st.env->timeout, a.root_id, timeout_kind::tree_wake, a.deadline_ms,
                wake_root_atom::value, a.root_id, a.token);
  for (auto& [image, rb] : std::exchange(st.recovery.to_start, {}))
    start_root(self, std::move(image), rb);
  for (auto id : std::exchange(st.recovery.to_wake, {}))
    wake_root(self, id);
  roll_back_orphans(self);
  // Fire times that came while the node was down: the catch-up policy of each schedule.
  schedules_recovered(self);
  progress_start(self);  // a new journal: ids wait for the peers' answers
  // Results that expired while the node was down go now; the rest when due.
  on_expiry_timer(self, st.retention.expiry_token);
  if (!st.retention.collectable.empty())
    collect_soon(self);
  const auto& n = st.recovery.tally;
  spdlog::info("recovery: {} tree(s) resumed, {} passivated (they only wait), {} rolling "
               "back, {} finished (retained), {} quarantined, {} pending event(s), in {} ms",
               n.running, n.passivated, n.rolling, n.done, n.quarantined, n.events,
               std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - n.since)
                 .count());
}

void recover(executor_actor* self, recovered_state& rec) {
  recover_begin(self);
  recover_part(self, rec);
  recover_end(self);
}

}  // namespace proctor::exec_detail
