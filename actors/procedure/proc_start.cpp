// A procedure actor's start from its tree's journaled image (the image a submit, a spawn
// step, a wake from passivation, a recovery or a supervisor's restart hands it), and the
// spawning of its children from that image.
#include <unordered_set>

#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"

namespace proctor {

/// Starts from the journaled image: spawn live children, then run, wait or roll back.
bool init_from_image(proc_actor* self, proc_start& s) {
  auto& st = self->state;
  const auto* p = s.entry != nullptr ? s.entry : s.image->find(s.id);
  if (p == nullptr) {
    spdlog::error("[proc {}] not in its tree's image", s.id);
    return false;
  }
  st.env = s.env;
  st.id = p->id;
  st.root_id = s.image->root_id;
  // A child's image may hold only what its parent's step spawned: the root's entry is
  // read by the root, and handed down.
  st.tree_root_id = s.tree_root_id != 0 ? s.tree_root_id : st.root_id;
  if (!s.parent && p->tree_root_id != 0)
    st.tree_root_id = p->tree_root_id;
  st.parent_id = p->parent_id;
  st.type = p->type;
  st.priority = p->priority;
  st.nonce = p->nonce;
  st.parent = s.parent;
  st.is_root = !s.parent;
  if (st.is_root) {
    st.args = p->args;
    st.args_version = p->type_version;
    st.resubmitted_from = p->resubmitted_from;
    st.placement_slot = p->placement_slot;
  }
  st.parent_node = st.is_root ? p->parent_node : std::string{};
  st.fragment_lsn = st.is_root ? p->submitted_lsn : 0;
  st.parent_root_id = p->parent_root_id;
  st.root = st.is_root ? caf::actor_cast<caf::actor>(self) : s.root;
  st.ptype = st.env->types->find(p->type);
  if (st.ptype == nullptr) {
    PLOG(error, self, "unknown procedure type '{}' (not registered in this binary)", p->type);
    return false;
  }
  st.restarts = restart_tracker(st.ptype->supervision);
  if (st.is_root) {
    // The tree's records as journaled: its fold counted them (tree_compaction.cpp).
    st.tree_records = std::make_shared<tree_journal_count>();
    st.tree_records->records = s.image->records;
    st.tree_records->threshold =
      st.ptype->compact_after != 0 ? st.ptype->compact_after : st.env->compact_after;
    st.tree_records->next_at = st.tree_records->threshold;
  } else {
    st.tree_records = s.tree_records ? s.tree_records : std::make_shared<tree_journal_count>();
  }
  bool submitted = s.submitted != nullptr;  // taken over just below
  if (submitted) {
    st.inst = std::move(s.submitted);
  } else {
    std::string err;
    auto inst = st.env->types->make_from_journal(p->type, p->data_version, p->data, &err);
    if (!inst) {
      PLOG(error, self, "cannot load data: {}", err);
      return false;
    }
    st.inst = std::move(inst);
  }
  st.locks = st.inst->locks();
  st.ancestors = s.ancestors;
  // Upgraded data is not what the journal holds: a retry restarts from the upgraded form.
  st.committed_data = p->data_version == st.ptype->version || p->data_version == 0
                        ? p->data
                        : st.inst->data().SerializeAsString();
  if (st.env->on_procedure_start)
    st.env->on_procedure_start(st.id);
  st.state = p->state;
  st.status = p->status;
  st.since_ms = p->since_ms;
  st.submitted_at_ms = p->submitted_at_ms;
  st.started = p->has_committed() || p->committed_at_ms != 0;
  st.rollback.failed_at_ms = s.image->failed_at_ms;
  // Recovered or restarted RUNNABLE, its state may have run before the crash.
  st.ran_partly = !submitted && !s.fresh && st.status == proc_state::runnable;
  st.event_key = p->event_key;
  st.call_service = p->call_service;
  st.call_request = p->call_request;
  st.event_payload = p->event_payload;
  st.event_timed_out = p->event_timed_out;
  st.event_failure = p->event_failure;
  st.timeout_state = p->timeout_state;
  st.rollback.past_no_return = s.image->past_no_return;
  st.waiting_on = p->last_spawned;
  st.join_at_least = p->join_at_least;
  st.join_wait = p->join_wait;
  st.failure_contained = s.failure_contained;
  // Which children its last spawn step awaits: a set, not a search of that list for each
  // child (quadratic: a woken parent of 100,000 children took 10^10 comparisons).
  std::unordered_set<uint64_t> awaited_ids(p->last_spawned.begin(), p->last_spawned.end());
  for (auto cid : p->children) {
    bool awaited = awaited_ids.contains(cid);
    auto& c = st.add_child(cid, awaited);
    const auto* cp = s.image->find(cid);
    if (cp != nullptr && cp->cancel_pending) {
      // Its cancellation was journaled and had not ended: it is carried on (run_cancellations),
      // and the child never runs again.
      c.cancelling = true;
      c.cancel_journaled = true;
      c.cancel_failed = cp->cancel_failed;
      c.cancel_reason = cp->cancel_reason;
      continue;
    }
    // A child on another node whose fragment rolled back there, with a join policy that
    // contains its failure: it counts as failed, and the tree runs on.
    bool contained = cp != nullptr && cp->remote() && cp->status == proc_state::rolledback
                     && awaited && p->joins_tolerantly() && !s.image->failed;
    if (cp != nullptr && cp->remote() && is_final(cp->status) && cp->status != proc_state::success
        && !s.image->failed && !contained) {
      // Failed on its node, and the tree had not failed yet when this node stopped: it
      // fails now (the child stays unended: nothing runs on as if it had succeeded).
      st.remote_failed.emplace_back(cid, "on node " + cp->node + ": " + cp->error);
      c.ended = true;  // no placeholder to spawn
      ++st.ended_children;
      c.awaited = false;
      if (awaited && st.waiting_left > 0)
        --st.waiting_left;
      st.parked = !st.is_root;
      continue;
    }
    if (cp != nullptr && is_final(cp->status)) {
      auto state = cp->status;
      if (contained || (cp->cancelled && cp->cancel_failed))
        state = proc_state::failed;  // failed, and undone
      st.child_ended(
        c,
        child_result{cid, state, cp->result_json, cp->error, cp->cancelled && !cp->cancel_failed},
        cp->ended_at_ms);
      collect_subtree(*s.image, cid, &st.finished_subtree);
    }
  }
  return true;
}

void spawn_child(proc_actor* self, const std::shared_ptr<const tree_image>& image, uint64_t cid,
                 bool fresh, bool timer_due, const proc_image* entry) {
  auto& st = self->state;
  auto* c = st.child(cid);
  if (c->passivated)
    stop_passivated(self, *c);  // spawned otherwise than by its wake-up (a restart)
  if (std::exchange(c->passivate_pending, false))
    st.passivation.images.erase(cid);
  proc_start cs;
  cs.env = st.env;
  cs.image = image;
  cs.id = cid;
  cs.fresh = fresh;
  cs.timer_due = timer_due;
  cs.parent = caf::actor_cast<caf::actor>(self);
  cs.root = st.root;
  cs.ancestors = st.ancestors;
  cs.ancestors.push_back(st.id);
  cs.parent_type = st.ptype;
  cs.tree_root_id = st.tree_root_id;
  cs.tree_records = st.tree_records;
  cs.failure_contained = c->awaited && joins_tolerantly(st);
  const auto* cp = entry != nullptr ? entry : image->find(cid);
  cs.entry = cp;
  c->handle = cp != nullptr && cp->remote() ? spawn_remote_child(self, std::move(cs))
                                            : self->spawn(procedure_actor, std::move(cs));
  watch_child(self, c->handle);
  c->restarting = false;
  c->stopped_clean.clear();
  if (!st.child_addrs)
    watch_children(self);
  (*st.child_addrs)[c->handle.address()] = cid;
}

}  // namespace proctor
