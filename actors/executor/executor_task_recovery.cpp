// The task queues at a node's start (docs/workers.md, tasks_part.hpp): the TaskState records
// the journal's scan found, kept by task until each procedure that waits for its task claims
// its own (task_awaited, executor_tasks.cpp: a lease goes on where it was), and at the end of
// the recovery the records no procedure will claim deleted, in one write.
#include "actors/base/task_spec.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/internal/task_ops.hpp"

namespace proctor::exec_detail {

void tasks_recovered(executor_actor* self, std::vector<recovered_task>& tasks) {
  auto& rec = self->state.tasks.recovered;
  for (auto& t : tasks) {
    auto& slot = rec[t.rec.task_key()];
    if (t.lsn >= slot.lsn)
      slot = std::move(t);
  }
}

namespace {

/// True while the tree of `root_id` rolls back: a task of it may be an undo's
/// (context::dispatch_undo), whose procedure does not wait itself.
bool rolls_back(executor_actor* self, uint64_t root_id) {
  auto r = self->state.procs.find(root_id);
  return r != self->state.procs.end() && r->second.state == proc_state::failed && !r->second.ended;
}

}  // namespace

void tasks_recovery_end(executor_actor* self) {
  auto& st = self->state;
  auto& tp = st.tasks;
  journal_batch b;  // every record deleted here, in one write
  // A task whose end came (kept, or handed again at recovery) is not handed out again.
  for (auto i = tp.tasks.begin(); i != tp.tasks.end();) {
    if (still_waits(self, i->second)) {
      ++i;
      continue;
    }
    delete_meta(b, i->second.state_lsn);
    auto key = (i++)->first;
    drop_task(self, key);
  }
  // Records whose procedure no longer waits (it ended, or its wait was cut short before the
  // record's delete was durable). A waiting procedure's is claimed when it queues its task;
  // so is an undo's (a rollback's, or a cancellation's of a procedure that has not ended).
  for (auto r = tp.recovered.begin(); r != tp.recovered.end();) {
    auto p = st.procs.find(r->second.rec.proc_id());
    if (p != st.procs.end()
        && (p->second.state == proc_state::waiting || rolls_back(self, p->second.root_id)
            || (is_undo_task_key(r->first) && !p->second.ended))) {
      ++r;
      continue;
    }
    delete_meta(b, r->second.lsn);
    r = tp.recovered.erase(r);
  }
  if (!b.deletes.empty())
    append(self, std::move(b));
}

}  // namespace proctor::exec_detail
