// The executor's operator views: a procedure's tree (with the parts on other nodes), its
// history read from the journal, and the node's resource locks.
//
// A tree spread over nodes is gathered at its root's node: a node asked about a procedure of
// a fragment (a child placed on it, or one of that child's descendants), or about an id
// another node handed out, asks the node towards the root (the one that handed out the
// fragment's root id: it holds the child's placeholder), which answers the whole tree. The
// node gathering asks each node that holds fragments for all of their parts at once
// (TreeRequest.fragments); such a request is answered from what the node holds, never
// passed on (a view of an ended tree once had the nodes ask each other for the released
// fragments without end: past 1,024 such requests on a link, the node asked refused the
// next one untagged and closed the connection, and the link, taking that for an unreadable
// answer, called its peer down: issue 32). A node that does not answer, or answers something
// unreadable, only leaves its placeholders: the view says so (Response.unreachable), the
// log at a falling rate; the link's heartbeats alone decide whether the peer is down.
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/log_rate.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/proc_history.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor::exec_detail {

namespace {

using std::chrono::milliseconds;

/// How long a view waits for the parts other nodes hold (when the asker set no bound).
constexpr milliseconds parts_timeout{5'000};
/// How long a node waits for the whole tree from the node towards the root.
constexpr milliseconds root_timeout{8'000};
/// Nodes a view may be passed on through towards the root (a tree's fragments nest as deep
/// as its placements do; a longer chain is a loop).
constexpr uint32_t max_hops = 16;

/// What of the asker's bound `timeout_ms` (0: none, then `otherwise`) is left for this node
/// to ask further nodes: a second less, so that its answer reaches the asker in time.
milliseconds budget(uint32_t timeout_ms, milliseconds otherwise) {
  if (timeout_ms == 0)
    return otherwise;
  return std::clamp(milliseconds{timeout_ms} - milliseconds{1'000}, milliseconds{200}, otherwise);
}

/// `id` and its descendants held here, depth first in spawn order.
void walk(executor_actor* self, uint64_t id, pb::Response& r) {
  auto i = self->state.procs.find(id);
  if (i == self->state.procs.end())
    return;
  fill_status(i->second, r.add_list());
  for (auto c : i->second.children())
    walk(self, c, r);
}

/// A view being gathered: the procedures held here, and the parts other nodes hold in place
/// of the placeholders among them.
struct tree_gather {
  std::string self_name;  ///< this node's name
  pb::Response local;
  std::map<uint64_t, std::vector<pb::ProcStatus>> parts;  ///< by placeholder id
  std::vector<std::string> unreachable;                   ///< one line per node
  size_t pending = 0;
  std::function<void(pb::Response)> then;

  /// The local part with each placeholder replaced by its part (those entries say which
  /// node they run on, as seen from here).
  pb::Response finish() {
    pb::Response out;
    for (const auto& s : local.list()) {
      auto f = parts.find(s.id());
      if (f == parts.end() || f->second.empty()) {
        *out.add_list() = s;
        continue;
      }
      for (auto& x : f->second) {
        if (x.node().empty())
          x.set_node(s.node());
        else if (x.node() == self_name)
          x.clear_node();
        if (x.id() == s.id())
          x.set_parent_id(s.parent_id());
        x.set_root_id(s.root_id());
        *out.add_list() = std::move(x);
      }
    }
    for (auto& u : unreachable)
      out.add_unreachable(std::move(u));
    return out;
  }

  void part_done() {
    if (--pending == 0)
      then(finish());
  }
};

/// A view of `about` lacks parts (`what`): logged at a falling rate (a console or a `watch`
/// polls the same view again and again), counted in proctor_tree_views_incomplete_total.
void note_incomplete(executor_actor* self, uint64_t about, const std::string& what) {
  auto n = ++self->state.incomplete_views;
  if (log_nth(n))
    spdlog::info("[proc {}] tree: {} ({} incomplete view(s) so far; logged at a falling rate)",
                 about, what, n);
}

/// The procedures under `starts` held here (each with its descendants), with the parts
/// other nodes hold of them, asked within `wait`; `then` gets the view.
void gather(executor_actor* self, uint64_t about, const std::vector<uint64_t>& starts,
            milliseconds wait, std::function<void(pb::Response)> then) {
  auto& st = self->state;
  auto g = std::make_shared<tree_gather>();
  g->self_name = st.env->node_name;
  g->then = [self, about, then = std::move(then)](pb::Response r) {
    if (r.unreachable_size() > 0) {
      std::string all;
      for (const auto& u : r.unreachable())
        all += (all.empty() ? "" : "; ") + u;
      note_incomplete(self, about, all + "; shown as their placeholders");
    }
    then(std::move(r));
  };
  for (auto id : starts)
    walk(self, id, g->local);
  // Children placed on other nodes: each node is asked once, for all of its fragments.
  std::map<std::string, std::vector<uint64_t>> remote;
  std::unordered_set<uint64_t> tops(starts.begin(), starts.end());
  for (const auto& s : g->local.list()) {
    if (s.node().empty() || !st.env->transport || tops.count(s.id()) > 0)
      continue;
    // A node an operator forgot is not asked (it would not answer): what was placed there is
    // shown as its placeholder says (FAILED, "not undone: node b forgotten ...", once lost).
    if (auto ps = st.env->cluster->get(s.node()); ps && ps->forgotten_lsn != 0 && !ps->up)
      continue;
    remote[s.node()].push_back(s.id());
  }
  if (remote.empty())
    return g->then(g->finish());
  g->pending = remote.size();
  for (auto& [node, ids] : remote) {
    pb::Request q;
    for (auto id : ids)
      q.mutable_tree()->add_fragments(id);
    q.mutable_tree()->set_timeout_ms(static_cast<uint32_t>(wait.count()));
    self
      ->request(st.env->transport, wait + std::chrono::seconds{1}, peer_request_atom::value, node,
                q.SerializeAsString(), static_cast<uint32_t>(wait.count()))
      .then(
        [g, node = node,
         ids = std::unordered_set<uint64_t>(ids.begin(), ids.end())](std::string& answer) {
          pb::Response r;
          if (!r.ParseFromString(answer)) {
            g->unreachable.push_back("node " + node + " sent an unreadable answer ("
                                     + std::to_string(answer.size()) + " bytes)");
          } else if (r.code() != pb::Response::OK) {
            g->unreachable.push_back("node " + node + " answered "
                                     + pb::Response::Code_Name(r.code()) + ": " + r.error());
          } else {
            // Each fragment's entries start with its root.
            std::vector<pb::ProcStatus>* part = nullptr;
            for (auto& x : *r.mutable_list()) {
              if (ids.count(x.id()) > 0)
                part = &g->parts[x.id()];
              if (part != nullptr)
                part->push_back(std::move(x));
            }
            for (auto& u : *r.mutable_unreachable())
              g->unreachable.push_back(std::move(u));
          }
          g->part_done();
        },
        [self, g, node = node](caf::error& e) {
          g->unreachable.push_back("node " + node + " did not answer ("
                                   + error_text(self->system(), e) + ")");
          g->part_done();
        });
  }
}

/// The peer named for node number `number`, or none.
std::optional<std::string> peer_named(executor_actor* self, uint16_t number) {
  auto& st = self->state;
  if (number == 0 || number == st.env->node_number || !st.env->transport)
    return std::nullopt;
  auto peer = st.env->cluster->peer_of_number(number);
  return peer.empty() ? std::nullopt : std::optional<std::string>{std::move(peer)};
}

/// Asks node `peer` for the whole tree of `id` (towards the tree's root); `then` gets its
/// view as seen from here (its own procedures say `peer`, this node's say nothing), or
/// nullopt and why not.
void ask_towards_root(executor_actor* self, const std::string& peer, uint64_t id,
                      const pb::TreeRequest& req,
                      std::function<void(std::optional<pb::Response>, std::string)> then) {
  auto& st = self->state;
  auto wait = budget(req.timeout_ms(), root_timeout);
  pb::Request q;
  q.mutable_tree()->set_id(id);
  q.mutable_tree()->set_timeout_ms(static_cast<uint32_t>(wait.count()));
  q.mutable_tree()->set_hops(req.hops() + 1);
  self
    ->request(st.env->transport, wait + std::chrono::seconds{1}, peer_request_atom::value, peer,
              q.SerializeAsString(), static_cast<uint32_t>(wait.count()))
    .then(
      [self, peer, then](std::string& answer) {
        pb::Response r;
        if (!r.ParseFromString(answer))
          return then(std::nullopt, "node " + peer + " sent an unreadable answer ("
                                      + std::to_string(answer.size()) + " bytes)");
        if (r.code() != pb::Response::OK)
          return then(std::move(r), "");
        const auto& me = self->state.env->node_name;
        for (auto& x : *r.mutable_list()) {
          if (x.node().empty())
            x.set_node(peer);
          else if (x.node() == me)
            x.clear_node();
        }
        then(std::move(r), "");
      },
      [self, peer, then](caf::error& e) { then(std::nullopt, error_text(self->system(), e)); });
}

}  // namespace

void handle_tree(executor_actor* self, const pb::TreeRequest& req, promise_t rp) {
  auto& st = self->state;
  // Another node gathering a tree asks for the parts held here: answered from here.
  if (req.fragments_size() > 0) {
    std::vector<uint64_t> held;
    for (auto id : req.fragments())
      if (auto i = st.procs.find(id); i != st.procs.end() && i->second.node().empty())
        held.push_back(id);
    return gather(self, req.fragments(0), held, budget(req.timeout_ms(), parts_timeout),
                  [rp](pb::Response r) mutable { reply(rp, encode(r)); });
  }
  auto i = st.procs.find(req.id());
  if (i == st.procs.end()) {
    // The node that handed the id out holds it (a root there, or a child its parent spawned
    // there).
    const auto owner = req.hops() < max_hops ? peer_named(self, owner_of(req.id())) : std::nullopt;
    if (!owner)
      return reply(
        rp, error_reply(pb::Response::NOT_FOUND, "no procedure " + std::to_string(req.id())));
    return ask_towards_root(
      self, *owner, req.id(), req,
      [rp, name = *owner](std::optional<pb::Response> r, std::string why) mutable {
        if (r)
          return reply(rp, encode(*r));
        // "node a unreachable since T (why)" reads as "... is unreachable since T (why)".
        auto prefix = "node " + name + " unreachable ";
        why = why.rfind(prefix, 0) == 0 ? " " + why.substr(prefix.size()) : ": " + why;
        reply(rp,
              error_reply(pb::Response::UNREACHABLE,
                          "node " + name + ", which holds the procedure, is unreachable" + why));
      });
  }
  auto root = i->second.root_id;
  auto here = [self, about = req.id(), root,
               wait = budget(req.timeout_ms(), parts_timeout)](promise_t rp, std::string missing) {
    gather(self, about, {root}, wait, [self, about, rp, missing](pb::Response r) mutable {
      if (!missing.empty()) {
        note_incomplete(self, about, missing);
        r.add_unreachable(missing);
      }
      reply(rp, encode(r));
    });
  };
  // A fragment: its parent's node (the one that handed out the fragment's root id) holds
  // the placeholder, and gathers the whole tree (or passes the question on to its root).
  const auto parent_node = is_fragment(self, root) && req.hops() < max_hops
                             ? peer_named(self, owner_of(root))
                             : std::nullopt;
  if (!parent_node)
    return here(rp, {});
  ask_towards_root(self, *parent_node, root, req,
                   [rp, here, name = *parent_node, self_name = st.env->node_name](
                     std::optional<pb::Response> r, std::string why) mutable {
                     if (r && r->code() == pb::Response::OK && r->list_size() > 0)
                       return reply(rp, encode(*r));
                     if (r)
                       why = pb::Response::Code_Name(r->code()) + ": " + r->error();
                     auto line = "node " + name + ", towards the tree's root, gave no view (" + why
                                 + "): this is node " + self_name + "'s part only";
                     here(rp, line);
                   });
}

void handle_history(executor_actor* self, const pb::HistoryRequest& req, promise_t rp) {
  auto& st = self->state;
  auto i = st.procs.find(req.id());
  if (i == st.procs.end())
    return reply(rp,
                 error_reply(pb::Response::NOT_FOUND, "no procedure " + std::to_string(req.id())));
  pb::ProcStatus status;
  fill_status(i->second, &status);
  fill_links(self, &status);
  self->request(st.env->journal, std::chrono::seconds{30}, read_tree_atom::value, i->second.root_id)
    .then(
      [self, rp, status](journal_records& recs) mutable {
        pb::Response r;
        *r.mutable_history() = history_of(status.id(), recs, *self->state.env->types);
        *r.mutable_history()->mutable_status() = status;
        if (auto as = status.resubmitted_as(); as != 0) {
          // Journaled in the new root's tree (its Submitted names this one).
          auto* e = r.mutable_history()->add_entries();
          e->set_kind("resubmitted");
          auto n = self->state.procs.find(as);
          if (n != self->state.procs.end())
            e->set_at_ms(n->second.started_at_ms);
          if (auto l = self->state.resubmit_lsn.find(as); l != self->state.resubmit_lsn.end())
            e->set_lsn(l->second);  // the new root's Submitted record
          e->set_detail("by an operator as procedure " + std::to_string(as));
        }
        // Who asked for what of it (docs/security.md, "Audit"): among the others, by LSN.
        add_audit_history(self, status.id(), r.mutable_history());
        // A child on another node is asked there (forward_to_owner); this is what is left
        // without a transport (a node outside any cluster holds none).
        auto node = status.node().empty() ? std::optional<peer_status>{}
                                          : self->state.env->cluster->get(status.node());
        if (node && node->forgotten_lsn != 0 && status.state() == pb::FAILED)
          r.mutable_history()->set_note(
            "node " + status.node() + ", where it ran, was forgotten by an operator at "
            + utc_text(node->forgotten_at_ms)
            + ": what it did there is lost and not undone, its own history with it; these are "
              "its records here");
        else if (!status.node().empty() && r.history().note().empty())
          r.mutable_history()->set_note("it runs on node " + status.node()
                                        + ": its steps are in that node's journal (ask it there)");
        reply(rp, encode(r));
      },
      [self, rp](caf::error& e) mutable {
        reply(rp, error_reply(pb::Response::INTERNAL,
                              "journal read failed: " + error_text(self->system(), e)));
      });
}

void handle_locks(executor_actor* self, promise_t rp) {
  self->request(self->state.env->scheduler, std::chrono::seconds{10}, locks_atom::value)
    .then([rp](std::string& bytes) mutable { reply(rp, std::move(bytes)); },
          [self, rp](caf::error& e) mutable {
            reply(rp, error_reply(pb::Response::INTERNAL,
                                  "scheduler did not answer: " + error_text(self->system(), e)));
          });
}

}  // namespace proctor::exec_detail
