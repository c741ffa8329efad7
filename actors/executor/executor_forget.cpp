// `proctor node forget NAME --confirm-lost` (docs/cluster.md, "Forgetting a node"): an
// operator declares a peer lost for good, as HBase's HBCK2 lets one declare a dead server's
// procedures lost. The NodeForgotten record is journaled before anything acts on it or the
// operator hears back; then
//   - every procedure this node placed there before the record is lost: its placeholder (or
//     the root rolling its tree back) finds so (cluster_view::lost) and asks for its end,
//     which is journaled as lost (declare_lost) — its tree fails and undoes everything that
//     is elsewhere, the lost part named "not undone: node b forgotten ...";
//   - every fragment here whose parent ran there rolls back (nothing is sent back there);
//   - the messages for it in the outbox are dropped;
//   - its link refuses the incarnation forgotten for good, and takes the next other one (a
//     new journal under the old name) as a new node.
// Recovery reads the record back (actors/node/node.cpp), so all of it holds across restarts.
// Every node says in its heartbeat answers which peers it forgot (NodeInfo.forgotten); a node
// hearing that forgets them too, journaled the same way, once they are down here (one still
// up here is a partition, not a loss: it waits, and keyed submits are refused meanwhile as
// the nodes' members differ). So `node forget` run on one node is acted on by all.
#include <functional>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/wire/json/cluster_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

namespace {

/// The fragments here whose parent ran on `node` (the node that handed out their ids), that
/// have not ended rolled back: every one there is now, as the node is forgotten (it is down,
/// so no new one came from it meanwhile).
std::vector<uint64_t> orphans_of(executor_actor* self, const std::string& node) {
  auto& st = self->state;
  std::vector<uint64_t> out;
  for (const auto& [id, re] : st.roots) {
    auto p = st.procs.find(id);
    if (p == st.procs.end() || p->second.parent_id == 0)
      continue;  // a root of this node's own
    if (st.env->cluster->peer_of_number(owner_of(id)) != node)
      continue;
    if (re.finished && p->second.state != proc_state::success)
      continue;  // ended, and not kept to be undone
    out.push_back(id);
  }
  return out;
}

/// What a forgetting sets going at once; the counts for the answer.
std::pair<size_t, size_t> apply_forget(executor_actor* self, const std::string& node) {
  auto& st = self->state;
  size_t lost = 0;
  for (const auto& [id, p] : st.procs)
    if (p.node() == node && !p.ended)
      ++lost;
  if (auto s = st.env->cluster->get(node))
    tell_waiting_for(self, *s);
  auto orphans = orphans_of(self, node);
  for (auto id : orphans)
    st.remote.orphans.emplace_back(node, id);
  roll_back_orphans(self);
  return {lost, orphans.size()};
}

/// Journals that `name` (its incarnation `incarnation`) is forgotten, then acts on it; `done`
/// gets the text an operator reads. `who`: "by an operator", or "as node a did at T".
void forget_node(executor_actor* self, const std::string& name, uint64_t incarnation,
                 const std::string& who, std::function<void(std::string)> done) {
  auto s = self->state.env->cluster->get(name);
  // Forgotten before: journaled again all the same, for what was placed there since (its
  // LSN is the line between lost and not).
  const auto before = s ? s->forgotten_at_ms : 0;
  const auto at = wall_ms();
  pb::JournalRecord rec;
  auto* f = rec.mutable_node_forgotten();
  f->set_peer(name);
  f->set_incarnation(incarnation);
  f->set_at_ms(at);
  journal_batch b;
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  append(self, std::move(b),
         [self, name, incarnation, at, before, who, done = std::move(done)](uint64_t lsn) {
           auto& st = self->state;
           st.env->cluster->forget(name, lsn, incarnation, at);
           if (st.env->transport)
             caf::anon_send(st.env->transport, peer_forget_atom::value, name, incarnation);
           if (st.env->outbox)
             caf::anon_send(st.env->outbox, outbox_forget_atom::value, name, lsn);
           auto [lost, orphans] = apply_forget(self, name);
           spdlog::warn("node {} (incarnation {}) forgotten {}: {} procedure(s) placed there are "
                        "lost, {} fragment(s) here whose parent ran there roll back",
                        name, incarnation_hex(incarnation), who, lost, orphans);
           done("node " + name + " forgotten"
                + (before != 0 ? " again (before: at " + utc_text(before) + ")" : std::string{})
                + " (incarnation " + incarnation_hex(incarnation) + "): " + std::to_string(lost)
                + " procedure(s) placed there are lost (their trees fail and undo what is "
                  "elsewhere), "
                + std::to_string(orphans)
                + " fragment(s) here whose parent ran there roll back; that journal is refused "
                  "from now on; every other node forgets it too once it is down there");
         });
}

/// A node of the cluster group records the forgetting there too (docs/cluster-group.md):
/// every node forgets that incarnation as the group says, and it never takes work again.
/// Answered once the group decided, with both outcomes.
void record_forget_in_group(executor_actor* self, const std::string& name, uint64_t incarnation,
                            std::string here, promise_t rp) {
  pb::Request req;
  req.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  auto* f = req.mutable_cluster()->mutable_command()->mutable_forget();
  f->set_name(name);
  f->set_incarnation(incarnation);
  self
    ->request(self->state.env->cluster_member, std::chrono::seconds{30}, rpc_atom::value,
              req.SerializeAsString())
    .then(
      [rp, here](const std::string& bytes) mutable {
        pb::Response g;
        if (!g.ParseFromString(bytes))
          g.set_code(pb::Response::INTERNAL);
        if (g.code() == pb::Response::OK) {
          pb::Response r;
          r.set_text(here + "; the cluster group: " + g.text());
          return reply(rp, encode(r));
        }
        reply(rp, error_reply(g.code() == pb::Response::REFUSED ? pb::Response::REFUSED
                                                                : pb::Response::UNREACHABLE,
                              here + "; but the cluster group did not record it (" + g.error()
                                + "): run it again (it is safe)"));
      },
      [self, rp, here](caf::error& e) mutable {
        reply(rp, error_reply(pb::Response::UNREACHABLE,
                              here + "; but the cluster group did not record it ("
                                + error_text(self->system(), e) + "): run it again (it is safe)"));
      });
}

}  // namespace

void roll_back_orphans(executor_actor* self) {
  auto& st = self->state;
  if (st.remote.orphan_in_flight || st.remote.orphans.empty())
    return;
  // Copies, not structured bindings: a lambda may not capture those before C++20's clang.
  std::string node = st.remote.orphans.front().first;
  uint64_t id = st.remote.orphans.front().second;
  st.remote.orphan_in_flight = true;
  roll_back_orphan(self, node, id, [self, node, id](bool taken, std::string why) {
    auto& st = self->state;
    st.remote.orphan_in_flight = false;
    if (!taken) {
      // Restarting, or not known yet: tried again in a second (its wake-up), others first;
      // for a minute (a quarantined tree is never taken: an operator sees to it).
      auto tries = ++st.remote.orphan_tries[id];
      auto entry = st.remote.orphans.front();
      st.remote.orphans.pop_front();
      if (tries >= 60) {
        spdlog::error("[proc {} root {}] its parent's node {} was forgotten, but the fragment "
                      "cannot be rolled back: {} (tried for a minute; restart the node to try "
                      "again)",
                      id, id, node, why);
        st.remote.orphan_tries.erase(id);
        return roll_back_orphans(self);
      }
      spdlog::info(
        "[proc {} root {}] rollback of a fragment of forgotten node {}: {}; again in 1 s", id, id,
        node, why);
      st.remote.orphans.push_back(std::move(entry));
      if (!st.remote.orphan_retry_armed) {
        st.remote.orphan_retry_armed = true;
        self->delayed_send(self, std::chrono::seconds{1}, orphan_retry_atom::value);
      }
      return;
    }
    spdlog::info("[proc {} root {}] its parent's node {} was forgotten: the fragment rolls back",
                 id, id, node);
    st.remote.orphans.pop_front();
    st.remote.orphan_tries.erase(id);
    roll_back_orphans(self);
  });
}

void handle_forget(executor_actor* self, const pb::NodeForgetRequest& req, promise_t rp) {
  auto& st = self->state;
  const std::string name = req.name();
  auto refuse = [&rp](pb::Response::Code code, std::string why) {
    reply(rp, error_reply(code, std::move(why)));
  };
  const auto peer_numbers = st.env->cluster->peer_numbers();
  if (st.env->node_name.empty() || peer_numbers.empty())
    return refuse(pb::Response::BAD_REQUEST,
                  "this node has no peers (--name and --peers): there is no node to forget");
  if (name == st.env->node_name)
    return refuse(pb::Response::BAD_REQUEST,
                  "node " + name + " is the node asked: forget a lost node from one of its peers");
  if (!st.env->is_peer(name)) {
    std::string peers;
    for (const auto& [num, peer] : peer_numbers)
      peers += (peers.empty() ? "" : ", ") + peer;
    return refuse(pb::Response::BAD_REQUEST, "node '" + name + "' is not a peer of node '"
                                               + st.env->node_name + "' (its peers: " + peers
                                               + ")");
  }
  auto s = st.env->cluster->get(name);
  if (s && s->up)
    return refuse(pb::Response::REFUSED,
                  "node " + name + " is up (it answers its heartbeats at " + s->address
                    + "): only a node that is lost can be forgotten; nothing was changed");
  if (!req.confirm())
    return refuse(pb::Response::BAD_REQUEST,
                  "forgetting node " + name
                    + " declares everything it holds lost: the trees with parts there fail and "
                      "undo what is elsewhere, not what it did, and that node's journal is "
                      "refused for good; say --confirm-lost to do so");
  // The incarnation it answered with last; not heard from since an earlier forgetting: the
  // one forgotten then (still refused).
  const uint64_t incarnation = !s                    ? 0
                               : s->incarnation != 0 ? s->incarnation
                                                     : s->forgotten_incarnation;
  forget_node(self, name, incarnation, "by an operator",
              [self, rp, name, incarnation](std::string text) mutable {
                if (!self->state.env->cluster_member) {
                  pb::Response r;
                  r.set_text(std::move(text));
                  return reply(rp, encode(r));
                }
                record_forget_in_group(self, name, incarnation, std::move(text), rp);
              });
}

void adopt_forgotten(executor_actor* self, const std::string& by, const std::string& name,
                     uint64_t incarnation, int64_t at_ms) {
  auto& st = self->state;
  if (name == st.env->node_name || !st.env->is_peer(name) || st.remote.forgetting.count(name) > 0)
    return;
  auto mine = st.env->cluster->get(name);
  const uint64_t known = mine ? mine->incarnation : 0;
  if (mine && mine->forgotten_at_ms != 0
      && (mine->forgotten_incarnation == incarnation || incarnation == 0))
    return;  // forgotten here too
  // Another incarnation known here (incarnations have no order: a newer one taken after
  // the forgetting, or one node a step behind): left to the operator, as is one up here.
  const bool other = known != 0 && incarnation != 0 && known != incarnation;
  if (other) {
    if (st.remote.forget_deferred.insert(name + "@" + std::to_string(incarnation)).second)
      spdlog::info("{} forgot node {}'s incarnation {} (at {}); this node knows it as "
                   "incarnation {}: not forgotten here",
                   by, name, incarnation_hex(incarnation), utc_text(at_ms), incarnation_hex(known));
    return;
  }
  if (mine && mine->up) {
    if (st.remote.forget_deferred.insert(name + "@" + std::to_string(incarnation)).second)
      spdlog::warn("{} forgot node {} (at {}), which is up here: not forgotten here until it "
                   "is down here; keyed submits are refused while the nodes' members differ",
                   by, name, utc_text(at_ms));
    return;
  }
  st.remote.forgetting.insert(name);
  forget_node(self, name, incarnation != 0 ? incarnation : known,
              "as " + by + " did at " + utc_text(at_ms),
              [self, name](std::string) { self->state.remote.forgetting.erase(name); });
}

void adopt_forgotten(executor_actor* self, const peer_status& s) {
  for (const auto& f : s.forgotten)
    adopt_forgotten(self, "node " + s.name, f.name, f.incarnation, f.at_ms);
}

}  // namespace proctor::exec_detail
