// The executor's side of trees across nodes (actors/procedure/remote.hpp): what another node's
// outbox delivers (wire.proto PeerDeliver). Each message is made durable here before the batch is
// acknowledged; a message this node cannot take yet (its tree is restarting) makes the whole batch
// "later", and the sender delivers it again. Each message is safe twice: a spawn of a child held
// already, an end already journaled, a rollback of a fragment rolled back, a release of a fragment
// gone — each is acknowledged and does nothing more.

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/procedure/tree_status.hpp"
#include "actors/wire/incarnation_hex.hpp"

namespace proctor::exec_detail {

namespace {

using done_fn = std::function<void(bool taken, std::string why)>;

/// Journals `batch` with its outbox records, hands those over, then `then`.
void append_with_outbox(executor_actor* self, journal_batch batch,
                        std::shared_ptr<outbox_staging> staged,
                        std::function<void(uint64_t last_lsn)> then) {
  auto n = batch.entries.size();
  append(self, std::move(batch), [self, staged, n, then = std::move(then)](uint64_t lsn) {
    staged->hand_over(self->state.env->outbox, lsn, n);
    if (then)
      then(lsn);
  });
}

/// Tells `peer` that fragment `id` ended (`state`), durably here first. `orphan`: `peer` was
/// forgotten by an operator, nothing there waits for it: nothing is sent.
void send_end(executor_actor* self, const std::string& peer, uint64_t id, pb::ProcState state,
              const std::string& error, done_fn done, bool orphan = false) {
  if (orphan)
    return done(true, {});
  pb::PeerMessage m;
  auto* e = m.mutable_end();
  e->set_proc_id(id);
  e->set_state(state);
  e->set_error(error);
  journal_batch b;
  auto staged = std::make_shared<outbox_staging>();
  staged->add(b, peer, m);
  append_with_outbox(self, std::move(b), staged, [done](uint64_t) { done(true, {}); });
}

/// A run of consecutive spawns, in one journal write: a wide remote fan-out arrives in
/// batches of hundreds, and one synced write each made it some 1,200 children/s.
void on_spawns(executor_actor* self, const std::string& from,
               std::vector<const pb::RemoteSpawn*> run, done_fn done) {
  auto& st = self->state;
  struct started {
    uint64_t id;
    pb::JournalRecord rec;  ///< its Submitted, folded once its LSN is known
    std::shared_ptr<procedure> inst;
  };
  auto fresh = std::make_shared<std::vector<started>>();
  journal_batch b;
  auto staged = std::make_shared<outbox_staging>();
  for (const auto* m : run)
    if (st.submitting.count(m->proc_id()) > 0)
      return done(false, "procedure " + std::to_string(m->proc_id()) + " is being journaled");
  for (const auto* m : run) {
    auto id = m->proc_id();
    if (st.procs.find(id) != st.procs.end() || st.submitting.count(id) > 0)
      continue;  // delivered again (or twice in this run)
    std::string err;
    auto inst = st.env->types->make_from_bytes(m->type(), m->data(), &err);
    if (!inst) {
      // Never started: nothing to undo here; the parent's tree fails.
      auto why =
        st.env->types->find(m->type()) == nullptr
          ? "procedure type '" + m->type() + "' is not registered on node " + st.env->node_name
          : err;
      spdlog::warn("[proc {} root {}] refused child from node {}: {}", id, id, from, why);
      pb::PeerMessage e;
      e.mutable_end()->set_proc_id(id);
      e.mutable_end()->set_state(pb::ROLLEDBACK);
      e.mutable_end()->set_error(why);
      staged->add(b, from, e);
      continue;
    }
    const auto* t = st.env->types->find(m->type());
    pb::JournalRecord rec;
    auto* s = rec.mutable_submitted();
    s->set_proc_id(id);
    s->set_parent_id(m->parent_id());
    s->set_type(m->type());
    s->set_type_version(t->version);
    s->set_data(inst->data().SerializeAsString());
    s->set_state(inst->initial_state());
    s->set_priority(m->priority());
    s->set_submitted_at_ms(wall_ms());
    s->set_parent_node(from);  // the node that sent it, whatever the message says
    s->set_parent_root_id(m->parent_root_id());
    s->set_tree_root_id(m->tree_root_id() != 0 ? m->tree_root_id() : m->parent_root_id());
    if (m->has_parent_supervision())
      *s->mutable_parent_supervision() = m->parent_supervision();
    b.entries.push_back(make_entry(id, rec));
    st.submitting.insert(id);
    fresh->push_back({id, std::move(rec), std::move(inst)});
  }
  if (b.entries.empty())
    return done(true, {});
  append_with_outbox(self, std::move(b), staged, [self, fresh, done](uint64_t last_lsn) {
    auto& st = self->state;
    for (auto& c : *fresh) {
      st.submitting.erase(c.id);
      // At the batch's last LSN (each one's own is not known here): a parent's node
      // forgotten after this batch is forgotten after each of them (cluster_view::lost).
      tree_folder f(c.id);
      f.add(last_lsn, c.rec);
      auto image = std::make_shared<const tree_image>(f.finish());
      const auto& p = *image->root();
      spdlog::debug("[proc {} root {}] child of {} on node {} starts here", c.id, c.id, p.parent_id,
                    p.parent_node);
      proc_update u{c.id, c.id, p.parent_id, p.type, proc_state::runnable, {}, {}, {}, {}, {}};
      u.started_at_ms = u.since_ms = p.submitted_at_ms;  // as its Submitted says
      record_update(self, std::move(u));
      start_root(self, image, false, std::move(c.inst));
    }
    done(true, {});
  });
}

/// A run of consecutive ends, in one journal write. Each is journaled here, in its tree,
/// before anything acts on it; then whoever stands for the child (its placeholder, or the
/// root rolling the tree back) is told, now or when it asks for the child's messages
/// (remote_route_atom): a placeholder respawned from an older image of the tree still
/// learns of it.
void on_ends(executor_actor* self, std::vector<const pb::RemoteEnd*> run, done_fn done) {
  auto& st = self->state;
  auto taken = std::make_shared<std::vector<pb::RemoteEnd>>();
  const auto at = wall_ms();  // each end's Finished record's time
  journal_batch b;
  for (const auto* m : run) {
    auto id = m->proc_id();
    auto p = st.procs.find(id);
    if (p == st.procs.end())
      continue;  // its tree is gone
    if (p->second.ended && p->second.state == from_pb(m->state()))
      continue;  // delivered again (a success, then a rollback by order: both count)
    if (auto r = st.roots.find(p->second.root_id); r != st.roots.end() && r->second.finished)
      continue;  // its tree ended: nothing acts on it any more
    spdlog::debug("[proc {} root {}] {} on its node", id, p->second.root_id,
                  to_string(from_pb(m->state())));
    pb::JournalRecord rec;
    auto* f = rec.mutable_finished();
    f->set_proc_id(id);
    f->set_state(m->state());
    f->set_result_json(m->result_json());
    f->set_error(m->error());
    f->set_at_ms(at);
    b.entries.push_back(make_entry(p->second.root_id, rec));
    taken->push_back(*m);
  }
  if (b.entries.empty())
    return done(true, {});
  append(self, std::move(b), [self, taken, done, at](uint64_t) {
    auto& st = self->state;
    for (const auto& m : *taken) {
      auto id = m.proc_id();
      auto bytes = m.SerializeAsString();
      st.remote.ends[id] = {bytes, at};
      if (auto p = st.procs.find(id); p != st.procs.end()) {
        auto u = p->second.to_update();
        u.state = from_pb(m.state());
        u.result_json = m.result_json();
        u.error = m.error();
        u.waiting_for.clear();
        u.ended = true;
        u.since_ms = u.ended_at_ms = at;
        record_update(self, std::move(u));
      }
      auto p = st.procs.find(id);
      auto root_id = p == st.procs.end() ? 0 : p->second.root_id;
      if (auto r = st.roots.find(root_id); r != st.roots.end() && r->second.passivated) {
        wake_root(self, root_id);  // its placeholder is told when it registers again
        continue;
      }
      note_wake(self, root_id);
      if (auto r = st.remote.routes.find(id); r == st.remote.routes.end())
        continue;  // told when its placeholder registers
      else if (st.remote.via.count(id) > 0)
        self->send(r->second, wake_child_atom::value, id);  // then told as above
      else
        self->send(r->second, remote_end_atom::value, bytes, at);
    }
    done(true, {});
  });
}

void on_rollback(executor_actor* self, const std::string& from, const pb::RemoteRollback& m,
                 done_fn done, bool orphan = false) {
  auto& st = self->state;
  auto id = m.proc_id();
  auto p = st.procs.find(id);
  if (p == st.procs.end())
    return send_end(self, from, id, pb::ROLLEDBACK, "never ran on node " + st.env->node_name, done,
                    orphan);
  auto r = st.roots.find(id);
  if (r == st.roots.end())
    return done(false, "fragment " + std::to_string(id) + " is not known yet");
  auto& re = r->second;
  if (re.passivated)
    return wake_root(self, id,
                     [self, from, m, done, orphan] { on_rollback(self, from, m, done, orphan); });
  if (re.handle) {
    self->request(re.handle, std::chrono::seconds{30}, remote_rollback_atom::value, m.reason())
      .then(
        [self, from, id, done, orphan](bool rolls_back) {
          if (rolls_back)
            return done(true, {});
          send_end(self, from, id, pb::FAILED,
                   "past its point of no return on node " + self->state.env->node_name, done,
                   orphan);
        },
        [self, id, done](caf::error& e) {
          done(false, "fragment " + std::to_string(id) + ": " + error_text(self->system(), e));
        });
    return;
  }
  if (!re.finished)
    return done(false, "fragment " + std::to_string(id) + " is restarting");
  if (p->second.state != proc_state::success)
    return send_end(self, from, id, pb::ROLLEDBACK, p->second.error(), done, orphan);
  // It succeeded and was kept for this: it fails now and rolls back from its records.
  spdlog::info("[proc {} root {}] rolled back by order of node {}", id, id, from);
  pb::JournalRecord rec;
  auto* f = rec.mutable_failed();
  f->set_proc_id(id);
  f->set_error(m.reason());
  f->set_at_ms(wall_ms());
  journal_batch b;
  b.entries.push_back(make_entry(id, rec));
  re.finished = false;
  append(self, std::move(b), [self, id, done](uint64_t) {
    reload_root(self, id);
    done(true, {});
  });
}

void on_release(executor_actor* self, const pb::RemoteRelease& m, done_fn done) {
  auto& st = self->state;
  auto id = m.proc_id();
  auto p = st.procs.find(id);
  if (p == st.procs.end())
    return done(true, {});
  auto r = st.roots.find(id);
  if (r == st.roots.end() || !r->second.finished)
    return done(false, "fragment " + std::to_string(id) + " has not ended here yet");
  // Its own children on other nodes go too.
  journal_batch b;
  auto staged = std::make_shared<outbox_staging>();
  std::vector<uint64_t> todo{id};
  while (!todo.empty()) {
    auto q = st.procs.find(todo.back());
    todo.pop_back();
    if (q == st.procs.end())
      continue;
    if (!q->second.node().empty()) {
      pb::PeerMessage rm;
      rm.mutable_release()->set_proc_id(q->first);
      staged->add(b, q->second.node(), rm);
    }
    todo.insert(todo.end(), q->second.children().begin(), q->second.children().end());
  }
  auto forget = [self, id, done] { release_trees(self, {id}, [done] { done(true, {}); }); };
  if (b.entries.empty())
    return forget();
  append_with_outbox(self, std::move(b), staged, [forget](uint64_t) { forget(); });
}

/// Takes the messages one after the other; answers once all are durable (or one is not
/// taken: the sender delivers the batch again later).
struct delivery {
  std::string from;
  pb::PeerDeliver msgs;
  int next = 0;
  promise_t rp;
};

void take_next(executor_actor* self, std::shared_ptr<delivery> d) {
  if (d->next == d->msgs.messages_size())
    return reply(d->rp, encode(pb::Response{}));
  const auto& m = d->msgs.messages(d->next);
  if (spdlog::should_log(spdlog::level::debug))
    spdlog::debug("peer message {} of {} from node {}: {}", d->next + 1, d->msgs.messages_size(),
                  d->from, m.ShortDebugString());
  auto done = [self, d](bool taken, std::string why) {
    if (!taken)
      return reply(d->rp, error_reply(pb::Response::REFUSED, "later: " + why));
    ++d->next;
    take_next(self, d);
  };
  // A run of spawns (or of ends) is taken in one write; `done` moves past all of it.
  auto run_of = [&](pb::PeerMessage::BodyCase kind) {
    int k = d->next;
    while (k < d->msgs.messages_size() && d->msgs.messages(k).body_case() == kind)
      ++k;
    auto n = k - d->next;
    return [self, d, n](bool taken, std::string why) {
      if (!taken)
        return reply(d->rp, error_reply(pb::Response::REFUSED, "later: " + why));
      d->next += n;
      take_next(self, d);
    };
  };
  switch (m.body_case()) {
    case pb::PeerMessage::kSpawn: {
      auto after = run_of(pb::PeerMessage::kSpawn);
      std::vector<const pb::RemoteSpawn*> run;
      for (int k = d->next; k < d->msgs.messages_size()
                            && d->msgs.messages(k).body_case() == pb::PeerMessage::kSpawn;
           ++k)
        run.push_back(&d->msgs.messages(k).spawn());
      return on_spawns(self, d->from, std::move(run), after);
    }
    case pb::PeerMessage::kEnd: {
      auto after = run_of(pb::PeerMessage::kEnd);
      std::vector<const pb::RemoteEnd*> run;
      for (int k = d->next;
           k < d->msgs.messages_size() && d->msgs.messages(k).body_case() == pb::PeerMessage::kEnd;
           ++k)
        run.push_back(&d->msgs.messages(k).end());
      return on_ends(self, std::move(run), after);
    }
    case pb::PeerMessage::kRollback:
      return on_rollback(self, d->from, m.rollback(), done);
    case pb::PeerMessage::kRelease:
      return on_release(self, m.release(), done);
    case pb::PeerMessage::BODY_NOT_SET:
      spdlog::warn("empty message from node {} ignored", d->from);
      return done(true, {});
  }
}

}  // namespace

void declare_lost(executor_actor* self, uint64_t id) {
  auto& st = self->state;
  auto p = st.procs.find(id);
  if (p == st.procs.end() || p->second.node().empty())
    return;
  const auto node = p->second.node();
  auto s = st.env->cluster->get(node);
  if (!s || s->forgotten_lsn == 0)
    return;  // the placeholder or root asking checked its own LSN against the forgetting
  auto end = std::make_shared<pb::RemoteEnd>();
  end->set_proc_id(id);
  end->set_state(pb::FAILED);
  end->set_error(st.env->cluster->lost_text(node));
  spdlog::warn("[proc {} root {}] placed on node {}, which an operator forgot: its part is lost",
               id, p->second.root_id, node);
  // As an end from its node: journaled in its tree (a second time is a no-op), then told.
  on_ends(self, {end.get()}, [end](bool, std::string) {});
}

void roll_back_orphan(executor_actor* self, const std::string& from, uint64_t id,
                      std::function<void(bool, std::string)> done) {
  pb::RemoteRollback m;
  m.set_proc_id(id);
  m.set_reason("its parent's node " + from + " was forgotten by an operator: its tree is lost");
  on_rollback(self, from, m, std::move(done), true);
}

void route_remote(executor_actor* self, uint64_t id, caf::actor h, bool via) {
  auto& st = self->state;
  auto end = st.remote.ends.find(id);
  if (!via) {
    if (end != st.remote.ends.end())
      self->send(h, remote_end_atom::value, end->second.bytes, end->second.at_ms);
    if (!st.remote.via.empty())
      st.remote.via.erase(id);
    st.remote.routes[id] = std::move(h);
    return;
  }
  // Its end, or the loss of its node (whose deadline the placeholder keeps), may have come
  // while it went to sleep: the parent spawns it at once.
  auto p = st.procs.find(id);
  bool lost = p != st.procs.end() && !st.env->cluster->is_up(p->second.node());
  if (end != st.remote.ends.end() || lost) {
    if (p != st.procs.end())
      note_wake(self, p->second.root_id);  // a passivation under way holds it: refused
    self->send(h, wake_child_atom::value, id);
  }
  st.remote.via.insert(id);
  st.remote.routes[id] = std::move(h);
}

bool remote_passivate_via(executor_actor* self, uint64_t id, const caf::actor& placeholder,
                          caf::actor parent) {
  auto& st = self->state;
  auto r = st.remote.routes.find(id);
  if (r == st.remote.routes.end() || r->second != placeholder || st.remote.ends.count(id) > 0)
    return false;
  r->second = std::move(parent);
  st.remote.via.insert(id);
  return true;
}

/// Why a delivery from incarnation `inc` of peer `from` is refused ("" if it is not): an
/// incarnation an operator forgot, or another one than this node knows (the peer came back
/// with another journal: docs/cluster.md, "Incarnations"). 0 (unknown) is taken.
std::string not_this_incarnation(executor_actor* self, const std::string& from, uint64_t inc) {
  auto s = self->state.env->cluster->get(from);
  if (inc == 0 || !s)
    return {};
  const auto heard = incarnation_hex(inc);
  if (s->forgotten_incarnation == inc)
    return "node " + from + " incarnation " + heard + " was forgotten by an operator on node "
           + self->state.env->node_name
           + " (proctor node forget): its messages are refused for good";
  if (s->incarnation != 0 && s->incarnation != inc)
    return "node " + self->state.env->node_name + " knows another incarnation of node " + from
           + " than " + heard + " (it came back with another journal): its messages are refused";
  return {};
}

std::string not_a_peer(executor_actor* self, const std::string& from) {
  const auto& env = *self->state.env;
  if (!env.node_name.empty() && env.is_peer(from))
    return {};
  return "node '" + from + "' is not a peer of node '" + env.node_name + "'";
}

void handle_peer_delivery(executor_actor* self, const pb::PeerDeliver& req, promise_t rp) {
  if (auto why = not_a_peer(self, req.from()); !why.empty())
    return reply(rp, error_reply(pb::Response::BAD_REQUEST, why));
  if (auto why = not_this_incarnation(self, req.from(), req.incarnation()); !why.empty())
    return reply(rp, error_reply(pb::Response::BAD_REQUEST, why));
  spdlog::debug("delivery of {} message(s) from node {}", req.messages_size(), req.from());
  auto d = std::make_shared<delivery>();
  d->from = req.from();
  d->msgs = req;
  d->rp = rp;
  take_next(self, d);
}

}  // namespace proctor::exec_detail
