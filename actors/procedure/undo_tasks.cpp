// Undos run by external workers (context::dispatch_undo; docs/workers.md, "Undos run by
// workers"). A rollback handler may hand its undo to a task queue: the root (or a parent
// cancelling children) journals an UndoDispatched record, then waits for the task as a
// procedure waits for a dispatch's, under the undone procedure's id and the task's key (the
// executor queues it, leases it, and journals its end as an event). Its result ends the undo:
// the RollbackStepDone is journaled with the delete of that event, in one batch. Its failure
// is an undo that threw: the handler runs again after a back-off (and may dispatch again, under
// a new key). After a restart the plan comes back to the same undo, finds its UndoDispatched
// in the tree's records, and waits for the same task again (a lease keeps its token; an end
// journaled meanwhile is handed to it at once).
#include "actors/base/task_spec.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/keys.hpp"

namespace proctor {

namespace {

/// Waits for task `key` of `queue` (its TaskSpec `spec`) for the undo at plan_pos.
void await_undo_task(proc_actor* self, const std::string& key, const std::string& queue,
                     const std::string& spec, std::string data, uint32_t data_version) {
  auto& st = self->state;
  const auto& item = st.rollback.plan[st.rollback.plan_pos];
  st.rollback.task_key = key;
  st.rollback.task_data = std::move(data);
  st.rollback.task_data_version = data_version;
  // The executor queues it (executor_tasks.cpp) and hands its end here: this actor waits for
  // it on behalf of the undone procedure, whose own actor is gone.
  register_wait(self, item.proc_id, false, key, task_service_prefix + queue, spec);
  publish_rollback(self, rollback_progress(st) + "; undo of state " + st.rollback.undo_state_name
                           + " of procedure " + std::to_string(item.proc_id) + ": task on queue "
                           + queue);
}

/// An UndoDispatched record of the undo `item` and its task `key`, stamped now: a dispatch
/// adds the task's spec and the handler's data, a failure for good why it failed.
pb::JournalRecord undo_dispatched(const undo_item& item, const std::string& key) {
  pb::JournalRecord rec;
  auto* u = rec.mutable_undo_dispatched();
  u->set_undone_lsn(item.lsn);
  u->set_proc_id(item.proc_id);
  u->set_state(item.state);
  u->set_task_key(key);
  u->set_at_ms(wall_ms());
  return rec;
}

}  // namespace

bool resume_undo_task(proc_actor* self, const undo_item& item) {
  auto& st = self->state;
  const auto* t = undo_task_of(*st.rollback.image, item);
  if (t == nullptr || t->key == st.rollback.task_failed)
    return false;
  pb::TaskSpec spec;
  if (!spec.ParseFromString(t->spec) || task_queue_refusal(spec.queue()) != "")
    return false;  // damaged: its handler runs again and dispatches anew
  PLOG(info, self, "undo of state {} of procedure {} waits for its task {} on queue '{}' again",
       st.rollback.undo_state_name, item.proc_id, t->key, spec.queue());
  await_undo_task(self, t->key, spec.queue(), t->spec, t->data, t->data_version);
  return true;
}

void dispatch_undo_task(proc_actor* self, step_result& r) {
  auto& st = self->state;
  const auto& out = *r.out;
  auto why = task_queue_refusal(out.service());
  if (why.empty())
    why = task_input_refusal(out.request());
  if (!why.empty()) {  // the author's mistake: shown, and retried as an undo that threw
    self->send(st.env->executor, undo_atom::value, false);
    return retry_undo(self, "its dispatch_undo: " + why);
  }
  const auto& item = st.rollback.plan[st.rollback.plan_pos];
  auto key = new_call_key(item.proc_id, true);
  auto spec = task_spec_of(out).SerializeAsString();
  auto version = undone_data_version(st, item);
  auto rec = undo_dispatched(item, key);
  auto* u = rec.mutable_undo_dispatched();
  u->set_task_spec(spec);
  u->set_data(r.data);
  u->set_data_version(version);
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  st.busy = true;
  PLOG(info, self, "undo of state {} of procedure {} handed to queue '{}' as task {}",
       st.rollback.undo_state_name, item.proc_id, out.service(), key);
  journal_append(self, std::move(batch),
                 [self, key, queue = out.service(), spec, data = std::move(r.data), version] {
                   self->state.busy = false;
                   await_undo_task(self, key, queue, spec, data, version);
                 });
}

void on_undo_task_end(proc_actor* self, const std::string& payload, const std::string& failure,
                      uint64_t event_lsn, bool consume) {
  auto& st = self->state;
  const auto& item = st.rollback.plan[st.rollback.plan_pos];
  auto key = std::exchange(st.rollback.task_key, {});
  const uint64_t taken = consume ? event_lsn : 0;
  self->send(st.env->executor, undo_atom::value, failure.empty());
  if (failure.empty()) {
    PLOG(info, self, "undo of state {} of procedure {}: task {} completed: {}",
         st.rollback.undo_state_name, item.proc_id, key, payload.substr(0, 200));
    return finish_undo(self, std::move(st.rollback.task_data), st.rollback.task_data_version,
                       taken);
  }
  // Failed for good: the handler runs again (after a back-off) rather than wait for this
  // task again. That it failed is journaled first, with the delete of its end: a restart
  // then runs the handler again too, rather than wait for the same key, whose token the
  // worker that failed it still holds.
  st.rollback.task_failed = key;
  auto rec = undo_dispatched(item, key);
  rec.mutable_undo_dispatched()->set_failed(failure);
  journal_batch batch;
  batch.entries.push_back(make_entry(st.root_id, rec));
  if (taken != 0)
    batch.deletes.push_back({journal_keys::meta_root, taken, taken + 1});
  st.busy = true;
  journal_append(self, std::move(batch), [self, event_lsn, id = item.proc_id, key, failure] {
    auto& st = self->state;
    st.busy = false;
    if (event_lsn != 0)
      self->send(st.env->executor, event_taken_atom::value, event_lsn, id);
    retry_undo(self, "its task " + key + " failed: " + failure);
  });
}

}  // namespace proctor
