// A child placed on another node, on its parent's side: the records its spawn writes here,
// and its placeholder actor. For its parent the placeholder is a child like any other (it
// reports the child's end with subtree_done, answers a stop, fails the tree when the child
// failed there); underneath it waits for the executor to tell it the child's end, which the
// executor journaled in this tree before (executor_remote.cpp).
//
// While its node is up it only waits, so it gives up its actor as a waiting leaf does
// (proc_passivate_waiter.cpp): resumed after its tree could not passivate, it offers its parent to
// go; told yes, it asks the executor to route the child's messages to the parent
// (remote_passivate_via_atom), which it does unless the child's end is here already (then on its
// way to this actor, which stays), and quits with errc::passivated. The parent holds it passivated
// (proc_passivated_children.cpp) and spawns it again when the executor says the end came or the
// node went down; the new placeholder registers itself and is told the end. An end that comes while
// it offers is held, and it takes the offer back.
#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/cluster/peer_link.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

struct remote_child_state {
  static inline const char* name = "proctor.remote_child";
  env_ptr env;
  uint64_t id = 0;
  uint64_t root_id = 0;
  uint64_t parent_id = 0;
  std::string type;
  std::string node;
  caf::actor parent;
  caf::actor root;
  bool ended = false;
  /// The parent's type's policy while the node cannot be reached, and the token of the
  /// armed deadline (stale deadlines carry an older one).
  node_loss_policy node_loss;
  uint64_t loss_token = 0;
  bool failing = false;  ///< the node-loss deadline failed the tree
  /// Its entry as the journal holds it: the image it sleeps in when it gives up its actor.
  proc_image entry;
  /// Its parent's join policy contains its failure (proc_start::failure_contained).
  bool contained = false;
  bool passivate_offered = false;  ///< it offered its parent to give up its actor
  bool lost = false;               ///< its node was forgotten after its spawn: its end is asked for
  /// Ends that came while it offered (each with its Finished record's time).
  std::vector<std::pair<std::string, int64_t>> held_ends;
};

using remote_child = caf::stateful_actor<remote_child_state>;

#define RLOG(level, self, fmt_, ...)                                                               \
  spdlog::level("[proc {} root {}] " fmt_, (self)->state.id, (self)->state.root_id, ##__VA_ARGS__)

proc_update status_of(remote_child* self, proc_state s) {
  auto& st = self->state;
  proc_update u;
  u.id = st.id;
  u.root_id = st.root_id;
  u.parent_id = st.parent_id;
  u.type = st.type;
  u.state = s;
  u.node = st.node;
  u.started_at_ms = u.since_ms = st.entry.submitted_at_ms;  // waits for it since its spawn
  return u;
}

using node_loss_atom = caf::atom_constant<caf::atom("nodeloss")>;

/// Shows what the child waits for (its node, or since when that node is unreachable) and
/// arms the node-loss deadline while the node is down. While it is up the placeholder only
/// waits: its root is told, to try to passivate the tree (or resumed, to let the placeholder
/// give up its actor) after passivate_after.
void watch_node(remote_child* self) {
  auto& st = self->state;
  if (!st.ended && (st.lost || st.env->cluster->lost(st.node, st.entry.submitted_lsn))) {
    // An operator forgot its node: its part is lost. The executor journals its end as such
    // and tells it here (take_end), and the tree fails.
    if (!std::exchange(st.lost, true)) {
      RLOG(warn, self, "node {} was forgotten by an operator: this child's part is lost", st.node);
      self->send(st.env->executor, remote_lost_atom::value, st.id);
    }
    return;
  }
  auto u = status_of(self, proc_state::waiting);
  u.waiting_for = st.env->cluster->waiting_text(st.node);
  auto s = st.env->cluster->get(st.node);
  if (s && !s->up)
    u.since_ms = 0;  // waiting for a node that is down: the executor times that
  self->send(st.env->executor, update_atom::value, std::move(u));
  auto token = ++st.loss_token;
  if (s && s->up && !st.ended && !st.failing && st.env->passivate_after.count() >= 0)
    self->send(st.root, passivate_hint_atom::value);
  if (st.node_loss.waits() || !s || s->up || st.failing)
    return;
  auto left = s->since_ms + st.node_loss.deadline.count() - wall_ms();
  arm_timeout(self, st.env->timeout, st.id, timeout_kind::node_loss, wall_ms() + left,
              node_loss_atom::value, token);
}

/// The node-loss deadline passed: if the node is still down, the tree fails (and rolls
/// back; the order to undo this child waits in the outbox until the node is back).
void on_node_loss(remote_child* self, uint64_t token) {
  auto& st = self->state;
  auto s = st.env->cluster->get(st.node);
  if (token != st.loss_token || st.ended || st.failing || !s || s->up)
    return;
  if (wall_ms() < s->since_ms + st.node_loss.deadline.count())
    return watch_node(self);  // it came back and went down again meanwhile
  st.failing = true;
  auto why = s->unreachable_text() + ", longer than the node-loss deadline of "
             + std::to_string(st.node_loss.deadline.count()) + " ms";
  RLOG(warn, self, "{}: the tree fails", why);
  self->request(st.root, caf::infinite, tree_fail_atom::value, st.id, int32_t{0}, why)
    .then(
      [self](bool rolls_back) {
        if (!rolls_back)
          RLOG(error, self,
               "the tree is past its point of no return; it keeps waiting for "
               "node {}",
               self->state.node);
      },
      [self](caf::error& e) { self->quit(e); });
}

void fail_tree(remote_child* self, const std::string& why);

/// The child's end, journaled here by the executor already (at `at_ms`): act on it.
void on_end(remote_child* self, const pb::RemoteEnd& end, int64_t at_ms) {
  auto& st = self->state;
  st.ended = true;
  if (end.state() == pb::SUCCESS) {
    RLOG(debug, self, "SUCCESS on node {}", st.node);
    auto u = status_of(self, proc_state::success);
    u.result_json = end.result_json();
    u.ended = true;
    u.since_ms = u.ended_at_ms = at_ms;
    subtree_done d;
    d.result = child_result{st.id, proc_state::success, end.result_json(), {}, false};
    d.procs.push_back(std::move(u));
    self->send(st.parent, subtree_done_atom::value, std::move(d));
    self->quit();
    return;
  }
  // It failed there (its fragment is rolled back, or cannot be): the tree fails, unless
  // its parent's join policy contains a failure that was undone (proc_cancel.cpp).
  auto why = "on node " + st.node + ": " + end.error();
  RLOG(info, self, "{} {}", to_string(from_pb(end.state())), why);
  if (st.contained && end.state() == pb::ROLLEDBACK) {
    self->request(st.parent, caf::infinite, child_failed_atom::value, st.id, int32_t{0}, why, true)
      .then(
        [self, why, at_ms](bool contained) {
          if (!contained)
            return fail_tree(self, why);
          auto& st = self->state;
          auto u = status_of(self, proc_state::rolledback);
          u.error = why;
          u.ended = true;
          u.since_ms = u.ended_at_ms = at_ms;
          subtree_done d;
          d.result = child_result{st.id, proc_state::failed, {}, why, false};
          d.procs.push_back(std::move(u));
          self->send(st.parent, subtree_done_atom::value, std::move(d));
          self->quit();
        },
        [self](caf::error& e) { self->quit(e); });
    return;
  }
  fail_tree(self, why);
}

/// Its child failed on its node: the tree fails.
void fail_tree(remote_child* self, const std::string& why) {
  auto& st = self->state;
  self->request(st.root, caf::infinite, tree_fail_atom::value, st.id, int32_t{0}, why)
    .then(
      [self](bool rolls_back) {
        if (!rolls_back)
          RLOG(error, self,
               "the tree is past its point of no return but its part on node "
               "{} failed; it stays FAILED until an operator intervenes",
               self->state.node);
      },
      [self](caf::error& e) { self->quit(e); });
}

void take_end(remote_child* self, const std::string& bytes, int64_t at_ms) {
  pb::RemoteEnd end;
  if (self->state.ended || !end.ParseFromString(bytes))
    return;
  if (self->state.passivate_offered) {
    self->state.held_ends.emplace_back(bytes, at_ms);
    return;
  }
  on_end(self, end, at_ms);
}

/// True while it only waits for the child's end: not ended, not failing its tree, the node
/// up (a node that is down has a node-loss deadline this actor keeps), nothing held (an end
/// held while it offers would go with its actor, or with its tree's).
bool only_waits(remote_child* self) {
  auto& st = self->state;
  return !st.ended && !st.failing && !st.lost && st.held_ends.empty()
         && st.env->cluster->is_up(st.node);
}

/// It only waits, and passivation is on: it may give up its actor.
bool may_go(remote_child* self) {
  return self->state.env->passivate_after.count() >= 0 && only_waits(self);
}

void offer_parent_passivation(remote_child* self) {
  auto& st = self->state;
  if (st.passivate_offered || !may_go(self))
    return;
  st.passivate_offered = true;
  auto image = std::make_shared<tree_image>();
  image->root_id = st.root_id;
  image->procs[st.id] = st.entry;
  self->send(st.parent, passivate_offer_atom::value, st.id,
             std::shared_ptr<const tree_image>(std::move(image)));
}

/// Told yes, but it cannot go (or was told no): it keeps its actor, and takes what it held.
void take_back(remote_child* self, bool accepted) {
  auto& st = self->state;
  st.passivate_offered = false;
  if (accepted)
    self->send(st.parent, passivate_undo_atom::value, st.id);
  for (auto& [bytes, at_ms] : std::exchange(st.held_ends, {}))
    take_end(self, bytes, at_ms);
}

void on_passivate_reply(remote_child* self, bool accepted) {
  auto& st = self->state;
  if (!st.passivate_offered)
    return;
  if (!accepted || !may_go(self))
    return take_back(self, accepted);
  self->request(st.env->executor, caf::infinite, remote_passivate_via_atom::value, st.id, st.parent)
    .then(
      [self](bool switched) {
        auto& st = self->state;
        if (switched && may_go(self)) {
          RLOG(debug, self, "gives up its actor until its end on node {}", st.node);
          ++st.loss_token;  // (none is armed: the node is up)
          self->quit(caf::make_error(errc::passivated));
          return;
        }
        if (switched)  // something came meanwhile: its own route back
          self->send(st.env->executor, remote_route_atom::value, st.id,
                     caf::actor_cast<caf::actor>(self));
        take_back(self, true);
      },
      // The executor is going down, and the node with it: the actor stays as it was.
      [self](caf::error&) { take_back(self, true); });
}

caf::behavior remote_child_fn(remote_child* self, proc_start s) {
  auto& st = self->state;
  const auto* p = s.image->find(s.id);
  st.env = s.env;
  st.id = s.id;
  st.root_id = s.image->root_id;
  st.parent_id = p->parent_id;
  st.type = p->type;
  st.node = p->node;
  st.entry = *p;
  st.parent = s.parent;
  st.root = s.root;
  st.contained = s.failure_contained;
  // Its parent sends it a down_msg when it goes down (watch_children).
  self->set_down_handler([self](caf::down_msg& m) {
    if (m.source == self->state.parent.address())
      self->quit(m.reason);  // a child goes down with its parent
  });
  if (s.parent_type != nullptr)
    st.node_loss = s.parent_type->node_loss;
  self->send(st.env->executor, remote_route_atom::value, st.id, caf::actor_cast<caf::actor>(self));
  watch_node(self);
  return {
    [self](peer_status_atom, const peer_status&) { watch_node(self); },
    [self](node_loss_atom, uint64_t token) { on_node_loss(self, token); },
    // Its tree is asked to passivate (proc_passivate_tree.cpp).
    [self](passivate_query_atom, uint64_t tag) {
      auto& st = self->state;
      passivation_answer a;
      a.idle = only_waits(self);
      if (a.idle)
        a.remote_nodes.push_back(st.node);
      self->send(caf::actor_cast<caf::actor>(self->current_sender()), passivate_answer_atom::value,
                 tag, st.id, std::move(a));
    },
    // Its tree could not passivate: it may still give up its own actor.
    [self](passivation_refused_atom) { offer_parent_passivation(self); },
    [self](passivate_reply_atom, bool accepted) { on_passivate_reply(self, accepted); },
    [self](remote_end_atom, const std::string& bytes, int64_t at_ms) {
      take_end(self, bytes, at_ms);
    },
    // The parent stops its subtree (the tree fails, or a restart): the child on the other
    // node is left as it is; a rollback orders it undone from the root.
    [self](stop_atom) {
      auto& st = self->state;
      self->send(st.parent, stopped_atom::value, st.id, std::vector<uint64_t>{});
      self->quit();
    },
  };
}

}  // namespace

std::string stage_remote_child(proc_actor* self, const child_spec& c, uint64_t cid,
                               pb::JournalRecord* sub, pb::PeerMessage* msg) {
  auto& st = self->state;
  // That node checks the type and the data; here the child is only a placeholder.
  if (st.env->node_name.empty())
    return "child " + c.type + " placed on node " + c.node
           + ", but this node has no name (start it with --name)";
  if (!st.env->is_peer(c.node))
    return "child " + c.type + " placed on unknown node '" + c.node
           + "' (not among this node's peers)";
  if (auto s = st.env->cluster->get(c.node); s && s->forgotten_now())
    return "child " + c.type + " placed on node '" + c.node
           + "', which an operator forgot (proctor node forget): it takes no new work";
  auto priority = c.priority != 0 ? c.priority : st.priority;
  auto* s = sub->mutable_submitted();
  s->set_proc_id(cid);
  s->set_parent_id(st.id);
  s->set_type(c.type);
  s->set_priority(priority);
  s->set_submitted_at_ms(wall_ms());
  s->set_node(c.node);
  auto* rs = msg->mutable_spawn();
  rs->set_proc_id(cid);
  rs->set_parent_id(st.id);
  rs->set_parent_root_id(st.root_id);
  rs->set_tree_root_id(st.tree_root_id);
  // The child's node restarts the fragment's root after a crash as this parent would.
  if (st.ptype != nullptr)
    *rs->mutable_parent_supervision() = to_pb(st.ptype->supervision);
  rs->set_parent_node(st.env->node_name);
  rs->set_type(c.type);
  rs->set_data(c.data);
  rs->set_priority(priority);
  if (const auto* t = st.env->types->find(c.type))
    rs->set_type_version(t->version);
  return {};
}

pb::Supervision to_pb(const supervision_policy& p) {
  pb::Supervision out;
  out.set_max_restarts(p.max_restarts);
  out.set_period_ms(p.period.count());
  out.set_backoff_min_ms(p.backoff_min.count());
  out.set_backoff_max_ms(p.backoff_max.count());
  out.set_jitter(p.jitter);
  return out;
}

supervision_policy from_pb(const pb::Supervision& p) {
  supervision_policy out;
  out.max_restarts = p.max_restarts();
  out.period = std::chrono::milliseconds{p.period_ms()};
  out.backoff_min = std::chrono::milliseconds{p.backoff_min_ms()};
  out.backoff_max = std::chrono::milliseconds{p.backoff_max_ms()};
  out.jitter = p.jitter();
  return out;
}

std::string place_on_any_node(proc_actor* self, child_spec& c,
                              std::map<std::string, uint64_t>& placed) {
  auto& st = self->state;
  c.any_node = false;
  bool here = st.env->types->find(c.type) != nullptr;
  if (st.env->node_name.empty()) {
    c.node.clear();  // no cluster: here (an unknown type fails as for any local child)
    return {};
  }
  c.node = st.env->cluster->pick(c.type, st.env->node_name, here, placed);
  if (c.node.empty()) {
    std::string known;
    for (const auto& s : st.env->cluster->all())
      if (!s.types_known)
        known += (known.empty() ? "" : ", ") + s.name;
    return "child " + c.type
           + " placed on any node, but no node of the cluster is known to have "
             "the type registered"
           + (known.empty() ? "" : " (not heard from yet: " + known + ")");
  }
  ++placed[c.node];
  PLOG(debug, self, "child {} placed on node {}", c.type, c.node);
  return {};
}

caf::actor spawn_remote_child(caf::event_based_actor* parent, proc_start start) {
  return parent->spawn(remote_child_fn, std::move(start));  // watched by spawn_child
}

}  // namespace proctor
