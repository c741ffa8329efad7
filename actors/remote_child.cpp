// The placeholder of a child that runs on another node: for its parent it is a child like
// any other (it reports the child's end with subtree_done, answers a stop, fails the tree
// when the child failed there); underneath it waits for the child's node to report the end
// (a RemoteEnd, routed here by the executor) and journals it before acting on it.
#include <spdlog/spdlog.h>

#include "actors/outbox.hpp"
#include "actors/procedure_actor_state.hpp"
#include "actors/remote.hpp"

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
  std::vector<std::pair<uint64_t, std::function<void()>>> appends;
  uint64_t tag = 0;
};

using remote_child = caf::stateful_actor<remote_child_state>;

#define RLOG(level, self, fmt_, ...)                                                          \
  spdlog::level("[proc {} root {}] " fmt_, (self)->state.id, (self)->state.root_id,              \
                ##__VA_ARGS__)

proc_update status_of(remote_child* self, proc_state s) {
  auto& st = self->state;
  proc_update u;
  u.id = st.id;
  u.root_id = st.root_id;
  u.parent_id = st.parent_id;
  u.type = st.type;
  u.state = s;
  u.node = st.node;
  return u;
}

void on_end(remote_child* self, const pb::RemoteEnd& end,
            caf::typed_response_promise<bool> rp) {
  auto& st = self->state;
  pb::JournalRecord rec;
  auto* f = rec.mutable_finished();
  f->set_proc_id(st.id);
  f->set_state(end.state());
  f->set_result_json(end.result_json());
  f->set_error(end.error());
  rec.set_format(1);
  journal_batch b;
  b.entries.push_back(journal_entry{st.root_id, rec.SerializeAsString()});
  if (end.state() != pb::SUCCESS) {
    // The tree fails with it, in the same write: a restart must not find the child ended
    // and its tree carrying on.
    pb::JournalRecord fail;
    fail.set_format(1);
    fail.mutable_failed()->set_proc_id(st.id);
    fail.mutable_failed()->set_error("on node " + st.node + ": " + end.error());
    b.entries.push_back(journal_entry{st.root_id, fail.SerializeAsString()});
  }
  st.ended = true;
  auto tag = ++st.tag;
  st.appends.emplace_back(tag, [self, end, rp]() mutable {
    rp.deliver(true);
    auto& st = self->state;
    if (end.state() == pb::SUCCESS) {
      RLOG(debug, self, "SUCCESS on node {}", st.node);
      auto u = status_of(self, proc_state::success);
      u.result_json = end.result_json();
      u.ended = true;
      self->send(st.env->executor, update_atom::value, u);
      subtree_done d;
      d.result = child_result{st.id, proc_state::success, end.result_json(), {}};
      d.procs.push_back(std::move(u));
      self->send(st.parent, subtree_done_atom::value, std::move(d));
      self->quit();
      return;
    }
    // It failed there (and its fragment is rolled back, or cannot be): the tree fails.
    auto why = "on node " + st.node + ": " + end.error();
    RLOG(info, self, "{} {}", to_string(from_pb(end.state())), why);
    auto u = status_of(self, from_pb(end.state()));
    u.error = end.error();
    self->send(st.env->executor, update_atom::value, u);
    self->request(st.root, caf::infinite, tree_fail_atom::value, st.id, int32_t{0}, why)
      .then(
        [self](bool rolls_back) {
          if (!rolls_back)
            RLOG(error, self, "the tree is past its point of no return but its part on node "
                              "{} failed; it stays FAILED until an operator intervenes",
                 self->state.node);
        },
        [self](caf::error& e) { self->quit(e); });
  });
  self->send(st.env->journal, append_atom::value, std::move(b), tag);
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
  st.parent = s.parent;
  st.root = s.root;
  self->monitor(st.parent);
  self->set_down_handler([self](caf::down_msg& m) {
    if (m.source == self->state.parent.address())
      self->quit(m.reason);  // a child goes down with its parent
  });
  self->send(st.env->executor, remote_route_atom::value, st.id,
             caf::actor_cast<caf::actor>(self));
  auto u = status_of(self, proc_state::waiting);
  u.waiting_for = "node " + st.node;
  self->send(st.env->executor, update_atom::value, std::move(u));
  return {
    [self](appended_atom, uint64_t tag, uint64_t) {
      auto& a = self->state.appends;
      for (auto i = a.begin(); i != a.end(); ++i)
        if (i->first == tag) {
          auto then = std::move(i->second);
          a.erase(i);
          then();
          return;
        }
    },
    [self](remote_end_atom, const std::string& bytes) -> caf::result<bool> {
      pb::RemoteEnd end;
      if (!end.ParseFromString(bytes))
        return true;  // nothing to act on; do not ask for it again
      if (self->state.ended)
        return true;  // delivered again
      auto rp = self->make_response_promise<bool>();
      on_end(self, end, rp);
      return rp;
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

} // namespace

caf::actor spawn_remote_child(caf::event_based_actor* parent, proc_start start) {
  return parent->spawn<caf::monitored>(remote_child_fn, std::move(start));
}

} // namespace proctor
