// The parts of a root's rollback on other nodes: each fragment there is ordered to roll
// back (through the outbox, once per incarnation) when the plan reaches it, in causal order,
// and the root waits for its end, showing which node it waits for.
#include "actors/cluster/outbox.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

void show_remote_wait(proc_actor* self) {
  auto& st = self->state;
  if (!st.rollback.image || st.rollback.plan_pos >= st.rollback.plan.size()
      || !st.rollback.plan[st.rollback.plan_pos].remote)
    return;
  const auto* p = st.rollback.image->find(st.rollback.plan[st.rollback.plan_pos].proc_id);
  if (p == nullptr)
    return;
  if (st.env->cluster->lost(p->node, p->submitted_lsn)) {
    // Its node was forgotten while the order waited for it: its end is asked for as lost.
    if (st.rollback.remote_lost_asked.insert(p->id).second) {
      PLOG(warn, self, "procedure {} ran on node {}, which an operator forgot: not undone", p->id,
           p->node);
      self->send(st.env->executor, remote_lost_atom::value, p->id);
    }
    return;
  }
  auto text = rollback_progress(st) + "; waiting for node " + p->node + " to roll back procedure "
              + std::to_string(p->id);
  if (auto s = st.env->cluster->get(p->node); s && !s->up)
    text += " (" + s->unreachable_text() + ")";
  publish_rollback(self, std::move(text));
}

namespace {

/// Journals the order to roll back fragment `p` (through the outbox), once per incarnation.
/// A fragment on a node an operator forgot is not ordered: its end is asked for as lost
/// (the executor journals it and tells this root as any end).
void send_remote_rollback(proc_actor* self, const proc_image& p) {
  auto& st = self->state;
  if (st.rollback.remote_rolled_back.count(p.id) > 0
      || !st.rollback.remote_ordered.insert(p.id).second)
    return;
  if (st.env->cluster->lost(p.node, p.submitted_lsn)) {
    PLOG(warn, self, "procedure {} ran on node {}, which an operator forgot: not undone", p.id,
         p.node);
    self->send(st.env->executor, remote_lost_atom::value, p.id);
    return;
  }
  PLOG(info, self, "ordering procedure {} on node {} rolled back", p.id, p.node);
  pb::PeerMessage m;
  m.mutable_rollback()->set_proc_id(p.id);
  m.mutable_rollback()->set_reason(
    st.cancel_running ? "its parent's subtree is cancelled by procedure " + std::to_string(st.id)
                          + " on node " + st.env->node_name
                      : "its tree (root " + std::to_string(st.root_id) + " on node "
                          + st.env->node_name + ") rolls back: " + st.rollback.failure);
  journal_batch batch;
  auto staged = std::make_shared<outbox_staging>();
  staged->add(batch, p.node, m);
  journal_append_lsn(self, std::move(batch), [self, staged](uint64_t lsn, size_t n) {
    staged->hand_over(self->state.env->outbox, lsn, n);
  });
}

/// True when the parent of fragment `child` (on this node) committed a step between LSNs
/// `lo` (the fragment's end here) and `hi`, undone or not, undoable or not. Only such a step
/// can have seen the fragment's end: a child's result reaches its parent's next step and
/// nothing else, so every step causally after the end follows one of those.
bool parent_step_between(const tree_image& image, uint64_t child, uint64_t lo, uint64_t hi) {
  const auto* c = image.find(child);
  const auto* parent = c == nullptr ? nullptr : image.find(c->parent_id);
  if (parent == nullptr)
    return true;  // cannot tell: keep the plan's order
  for (const auto& s : parent->steps)
    if (s.lsn > lo && s.lsn < hi)
      return true;
  return false;
}

}  // namespace

void order_remote_rollback(proc_actor* self, const proc_image& p) {
  auto& st = self->state;
  if (st.rollback.remote_rolled_back.count(p.id) > 0) {
    ++st.rollback.plan_pos;
    return run_rollback(self, st.rollback.image);
  }
  show_remote_wait(self);
  st.rollback.undo_state_name = "(fragment on node " + p.node + ")";
  st.busy = true;  // until the fragment's end comes (remote_end_atom)
  send_remote_rollback(self, p);
  // The fragments right after it in the plan are ordered now too, as long as none of them
  // can have seen another's effects: a fragment's effects reach this node only as its end,
  // journaled here, and travel on only through its parent's steps after that end; so a
  // fragment whose parent committed no step between its end and the end of the first of
  // the run (the latest) is undone at the same time, on its node, and skipped when its turn
  // comes. Fragments that had not ended (planned first) have no end to see.
  const auto top = st.rollback.plan[st.rollback.plan_pos].lsn;
  for (auto j = st.rollback.plan_pos + 1; j < st.rollback.plan.size() && st.rollback.plan[j].remote;
       ++j) {
    const auto& next = st.rollback.plan[j];
    if (parent_step_between(*st.rollback.image, next.proc_id, next.lsn, top))
      break;
    if (const auto* q = st.rollback.image->find(next.proc_id))
      send_remote_rollback(self, *q);
  }
}

void on_remote_end_in_rollback(proc_actor* self, const std::string& bytes) {
  auto& st = self->state;
  pb::RemoteEnd end;
  if (!end.ParseFromString(bytes) || end.state() == pb::SUCCESS)
    return;  // a success reported before our order: the order's answer comes later
  if (end.state() == pb::FAILED) {
    PLOG(error, self, "procedure {} on another node cannot be rolled back: {}", end.proc_id(),
         end.error());
    st.rollback.remote_failed[end.proc_id()] = end.error();
  }
  // The end is journaled (the executor did, before telling us): the fold counts the
  // fragment as rolled back from now on.
  bool current = st.rollback.image && st.rollback.plan_pos < st.rollback.plan.size()
                 && st.rollback.plan[st.rollback.plan_pos].remote
                 && st.rollback.plan[st.rollback.plan_pos].proc_id == end.proc_id() && st.busy;
  PLOG(debug, self, "procedure {} on another node: {}{}", end.proc_id(),
       to_string(from_pb(end.state())), current ? "" : " (before its turn)");
  if (!current) {
    st.rollback.remote_rolled_back.insert(end.proc_id());
    return;
  }
  st.busy = false;
  ++st.rollback.plan_pos;
  run_rollback(self, st.rollback.image);
}

}  // namespace proctor
