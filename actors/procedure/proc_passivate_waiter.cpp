// A procedure that only waits for its timer or its event gives up its actor while its tree runs
// (passivation at any depth, not only of trees that wholly wait). Its parent holds it passivated,
// as it holds the children a tree woken from its image does not spawn
// (proc_passivated_children.cpp): the timer or the event's deadline is armed under the child's
// name, its event comes through the parent, and the child is spawned from its image when either
// comes, or earlier for a stop, a bypass or a restart.
//
// When: a root tries to passivate its tree passivate_after after the tree last began to wait
// (proc_passivate_tree.cpp). An attempt that finds something running resumes the procedures that
// only wait; a leaf among them waiting for its timer or event (its deadline, if any, a second
// away at least) then offers to go. A tree that wholly waits passivates as one and costs
// nothing more.
//
// The hand-over, child C and parent P (each step ordered by its sender):
//   1. C offers (passivate_offer_atom, with its image) and holds what would wake it meanwhile.
//   2. P accepts unless the slot is busy with something else (a stop, a restart, a query of
//      a passivation attempt, P's own stop): the slot is `passivate_pending`; P answers.
//   3. C, told yes, checks that nothing came meanwhile (its timer, a bypass, a stop);
//      otherwise it takes the offer back (passivate_undo_atom) and runs what it held. Waiting for
//      an event, it first asks the executor to route the event through P (passivate_via_atom),
//      which it does only if C's registration is still there: else the event is on its way
//      to C, which then stays. Then C cancels its deadlines and quits with errc::passivated.
//   4. P, seeing C's actor down with errc::passivated while `passivate_pending`, holds it
//      passivated: it arms the deadline under C's name (after C's cancel: the cancel was sent
//      before C went down) and registers C's event through itself (an event the executor
//      routed to P before that is held for C's next actor, and sent again). A timer that
//      fired into C while it offered is armed again already past, and so fires at once. A
//      stop P sent C after its yes finds C passivated.
// The image C sends is what its journal holds: it waits, has no children, and its current
// state never started (it commits nothing while it offers).
//
// A parent waiting for its children goes the same way once each of them has ended or gone (a parent
// resumed while they were going or running offers when the last one went or ended:
// procedure_actor.cpp's subtree_done handler). Its image holds its own entry, the images its
// passivated children sleep in, and its ended children's subtrees as their ends reported them; so
// its parent holds the whole subtree passivated (proc_passivated_children.cpp). Its passivated
// children's registrations with the executor are taken over by its parent's (a wake-up routed to it
// as it went is held by the executor and sent again), and their deadlines go with it, its parent
// arming the earliest. A wake-up for one of them that comes while it offers is held, and it takes
// the offer back.
#include "actors/base/errors.hpp"
#include "actors/base/task_spec.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

namespace {

bool waits_for_event(const proc_actor_state& st) {
  return st.status == proc_state::waiting && !st.event_key.empty();
}

/// A parent waiting for children of its last spawn that have not all ended.
bool waits_for_children(const proc_actor_state& st) {
  return st.status == proc_state::waiting && st.event_key.empty() && st.waiting_left > 0;
}

/// True for a parent waiting for its children, each of which has ended (successfully) or
/// gave up its actor, none of them due within passivation_min_sleep_ms. A parent that
/// restarted a crashed child keeps its actor: its restart intensity would go with it.
bool children_all_gone(proc_actor* self) {
  auto& st = self->state;
  if (!waits_for_children(st) || st.restarts.recent() > 0
      || st.ended_children + st.passivation.passivated_children != st.children.size())
    return false;  // (counted first: the loop below runs once per offer, not per child gone)
  auto soon = wall_ms() + passivation_min_sleep_ms;
  for (const auto& c : st.children) {
    if (c.ended ? c.result.state != proc_state::success
                : !c.passivated || c.passivate_pending || c.stop_pending || c.restarting
                    || (c.wake_at_ms > 0 && c.wake_at_ms < soon))
      return false;
  }
  return true;
}

/// True when this procedure only waits — a leaf for its timer or its event (its deadline,
/// if any, a second away at least: as it would answer a passivation attempt), a parent for
/// children that all gave up their actors — with nothing held or offered.
bool may_go(proc_actor* self) {
  auto& st = self->state;
  return !st.is_root && st.env->passivate_after.count() >= 0
         && (st.children.empty() || children_all_gone(self)) && st.passivation.held.empty()
         && !st.passivation.holding && !st.passivation.offered && !st.ran_partly
         && (!waits_for_event(st) || st.event_payload.empty()) && own_answer(self).idle;
}

/// Copies `q` and what of its subtree has not ended from `from` into `to`.
void copy_unended(const tree_image& from, const proc_image& q, tree_image& to) {
  to.procs[q.id] = q;
  for (auto gc : q.children)
    if (const auto* g = from.find(gc); g != nullptr && !is_final(g->status))
      copy_unended(from, *g, to);
}

/// Adds this parent's children to its image `t`: those that gave up their actors as their
/// images hold them, the ended ones (and their subtrees) as they reported their ends.
void add_children(proc_actor* self, tree_image& t, proc_image& p) {
  auto& st = self->state;
  p.last_spawned = st.waiting_on;
  for (const auto& c : st.children) {
    p.children.push_back(c.id);
    if (c.passivated)
      copy_unended(*passivated_image_of(st, c), *c.passivated_entry, t);
  }
  for (const auto& u : st.finished_subtree)
    t.procs[u.id] = image_from_update(u);
  for (const auto& c : st.children) {  // an end reported without its subtree's statuses
    if (!c.ended || t.find(c.id) != nullptr)
      continue;
    auto& e = t.procs[c.id];
    e.id = c.id;
    e.parent_id = st.id;
    e.status = c.result.state;
    e.result_json = c.result.result_json;
    e.error = c.result.error;
    e.since_ms = e.ended_at_ms = c.ended_at_ms;
  }
}

/// This procedure as its journal holds it: all that init_from_image reads of a waiting leaf,
/// or of a parent waiting for children that gave up their actors, with their images (the
/// ended children as their ends were reported: the journal holds the same).
std::shared_ptr<const tree_image> own_image(proc_actor* self) {
  auto& st = self->state;
  auto t = std::make_shared<tree_image>();
  t->root_id = st.root_id;
  t->past_no_return = st.rollback.past_no_return;
  auto& p = t->procs[st.id];
  p.id = st.id;
  p.parent_id = st.parent_id;
  p.type = st.type;
  p.type_version = st.ptype->version;
  p.priority = st.priority;
  p.nonce = st.nonce;
  p.status = st.status;
  p.since_ms = st.since_ms;
  p.submitted_at_ms = st.submitted_at_ms;
  p.state = st.state;
  p.data = st.committed_data;
  p.data_version = st.ptype->version;
  if (st.status == proc_state::waiting_timeout) {
    p.wake_at_ms = st.timer_at_ms;
  } else {
    p.event_key = st.event_key;
    p.deadline_ms = st.deadline_ms;
    p.timeout_state = st.timeout_state;
    p.call_service = st.call_service;
    p.call_request = st.call_request;
  }
  if (!st.children.empty())
    add_children(self, *t, p);
  return t;
}

void run_held(proc_actor* self) {
  if (self->state.passivation.holding)
    return;  // its tree is being asked: resumed, it runs them
  for (auto& f : std::exchange(self->state.passivation.held, {}))
    f();
}

void go(proc_actor* self) {
  auto& st = self->state;
  if (!st.children.empty())
    PLOG(debug, self, "gives up its actor with its {} passivated children, until one is due",
         st.passivation.passivated_children);
  else
    PLOG(debug, self, "gives up its actor until its {}",
         st.event_key.empty()      ? "timer"
         : st.call_service.empty() ? "event " + st.event_key
                                   : call_wait_reason(st.call_service));
  release_timers(self);
  self->quit(caf::make_error(errc::passivated));
}

/// Told yes, but it cannot go: the parent keeps its actor.
void take_back(proc_actor* self) {
  auto& st = self->state;
  self->send(st.parent, passivate_undo_atom::value, st.id);
  run_held(self);
}

}  // namespace

void offer_parent_passivation(proc_actor* self) {
  auto& st = self->state;
  if (!may_go(self)) {
    // A parent whose children are giving up their actors after the same resume (or still
    // run) offers once they all went or ended (on_passivating_child_down, subtree_done): so parents
    // follow their children only after their root's passivation attempts failed, not at
    // every end of a child of a parent never resumed.
    st.passivation.wanted = !st.is_root && waits_for_children(st);
    return;
  }
  st.passivation.wanted = false;
  st.passivation.offered = true;
  self->send(st.parent, passivate_offer_atom::value, st.id, own_image(self));
}

void on_passivate_reply(proc_actor* self, bool accepted) {
  auto& st = self->state;
  if (!std::exchange(st.passivation.offered, false))
    return;
  if (!accepted)
    return run_held(self);
  if (!may_go(self))
    return take_back(self);
  if (!waits_for_event(st))
    return go(self);
  // Its event must come through the parent from now on: the executor switches the
  // registration unless the event is on its way here already.
  st.passivation.offered = true;  // what wakes it is still held
  self
    ->request(st.env->executor, caf::infinite, passivate_via_atom::value, st.event_key, st.id,
              st.parent)
    .then(
      [self](bool switched) {
        auto& st = self->state;
        st.passivation.offered = false;
        if (switched && may_go(self))
          return go(self);
        if (switched)  // something came meanwhile: its own registration back
          register_wait(self);
        take_back(self);
      },
      [self](caf::error&) {
        // The executor is going down, and the node with it: the actor stays as it was.
        self->state.passivation.offered = false;
        take_back(self);
      });
}

void on_passivate_offer(proc_actor* self, uint64_t cid, std::shared_ptr<const tree_image> image) {
  auto& st = self->state;
  auto from = caf::actor_cast<caf::actor>(self->current_sender());
  auto* c = st.child(cid);
  bool yes = c != nullptr && c->handle && c->handle == from && !c->ended && !c->restarting
             && !c->stop_pending && !c->passivated && !c->passivate_pending && !st.stopping
             && !st.rollback.failing && !st.parked && !st.passivation.holding
             && !st.passivation.query && !st.bypassing && image != nullptr
             && image->find(cid) != nullptr;
  if (yes) {
    c->passivate_pending = true;
    st.passivation.images[cid] = std::move(image);
  }
  self->send(from, passivate_reply_atom::value, yes);
}

void on_passivate_undo(proc_actor* self, uint64_t cid) {
  auto& st = self->state;
  auto* c = st.child(cid);
  if (c == nullptr || !c->passivate_pending)
    return;
  c->passivate_pending = false;
  st.passivation.images.erase(cid);
}

bool on_passivating_child_down(proc_actor* self, child_slot& c, const caf::error& reason) {
  auto& st = self->state;
  c.passivate_pending = false;
  auto i = st.passivation.images.find(c.id);
  if (i == st.passivation.images.end())
    return false;
  auto image = std::move(i->second);
  st.passivation.images.erase(i);
  if (!is(reason, errc::passivated))
    return false;  // it crashed meanwhile: supervised as any crash
  if (c.stop_pending) {
    // Asked to stop after its yes: it stopped, and the waiting state of none of what it
    // stood for started.
    std::vector<uint64_t> clean;
    unended_subtree(*image, *image->find(c.id), &clean);
    child_stopped(self, c, &clean);
    return true;
  }
  put_to_sleep(self, c, image, true);
  if (st.passivation.wanted)
    offer_parent_passivation(self);  // maybe the last of its children to go
  return true;
}

}  // namespace proctor
