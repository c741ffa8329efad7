// The executor's operator views: a procedure's tree (with the parts on other nodes), its
// history read from the journal, and the node's resource locks.
#include <memory>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/executor/proc_history.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"

namespace proctor::exec_detail {

namespace {

constexpr auto peer_timeout = std::chrono::milliseconds{5'000};

/// `id` and its descendants held here, depth first in spawn order.
void walk(executor_actor* self, uint64_t id, pb::Response& r) {
  auto i = self->state.procs.find(id);
  if (i == self->state.procs.end())
    return;
  fill_status(i->second, r.add_list());
  for (auto c : i->second.children())
    walk(self, c, r);
}

/// The answer of a tree being gathered: the local part, and the fragments other nodes hold.
struct tree_gather {
  pb::Response local;
  std::map<uint64_t, pb::Response> fragments;  ///< by placeholder id
  size_t pending = 0;
  promise_t rp;

  /// The local part with each placeholder followed by its fragment's procedures (those
  /// say which node they run on).
  std::string finish() {
    pb::Response out;
    for (const auto& s : local.list()) {
      auto f = fragments.find(s.id());
      if (f == fragments.end() || f->second.list_size() == 0) {
        *out.add_list() = s;
        continue;
      }
      for (auto x : f->second.list()) {
        if (x.node().empty())
          x.set_node(s.node());
        if (x.id() == s.id())
          x.set_parent_id(s.parent_id());
        x.set_root_id(s.root_id());
        *out.add_list() = std::move(x);
      }
    }
    return encode(out);
  }
};

}  // namespace

void handle_tree(executor_actor* self, const pb::TreeRequest& req, promise_t rp) {
  auto& st = self->state;
  auto i = st.procs.find(req.id());
  if (i == st.procs.end())
    return reply(rp,
                 error_reply(pb::Response::NOT_FOUND, "no procedure " + std::to_string(req.id())));
  auto g = std::make_shared<tree_gather>();
  g->rp = rp;
  walk(self, i->second.root_id, g->local);
  // Children placed on other nodes: their nodes hold their fragments (asked with the
  // fragment root's id, so each node answers its own part).
  std::vector<std::pair<uint64_t, std::string>> remote;
  for (const auto& s : g->local.list())
    if (!s.node().empty() && st.env->transport && s.id() != i->second.root_id)
      remote.emplace_back(s.id(), s.node());
  if (remote.empty())
    return reply(g->rp, g->finish());
  g->pending = remote.size();
  for (const auto& [id, node] : remote) {
    pb::Request q;
    q.mutable_tree()->set_id(id);
    auto done = [g, id = id](pb::Response r) {
      g->fragments[id] = std::move(r);
      if (--g->pending == 0)
        reply(g->rp, g->finish());
    };
    self
      ->request(st.env->transport, peer_timeout + std::chrono::seconds{1}, peer_request_atom::value,
                node, q.SerializeAsString(), static_cast<uint32_t>(peer_timeout.count()))
      .then(
        [done](std::string& answer) {
          pb::Response r;
          if (!r.ParseFromString(answer) || r.code() != pb::Response::OK)
            r.Clear();
          done(std::move(r));
        },
        [done, id = id, node = node](caf::error&) {
          spdlog::info("[proc {}] tree: node {} did not answer; its part is shown as the "
                       "placeholder",
                       id, node);
          done(pb::Response{});
        });
  }
}

void handle_history(executor_actor* self, const pb::HistoryRequest& req, promise_t rp) {
  auto& st = self->state;
  auto i = st.procs.find(req.id());
  if (i == st.procs.end())
    return reply(rp,
                 error_reply(pb::Response::NOT_FOUND, "no procedure " + std::to_string(req.id())));
  pb::ProcStatus status;
  fill_status(i->second, &status);
  self->request(st.env->journal, std::chrono::seconds{30}, read_tree_atom::value, i->second.root_id)
    .then(
      [self, rp, status](journal_records& recs) mutable {
        pb::Response r;
        *r.mutable_history() = history_of(status.id(), recs, *self->state.env->types);
        *r.mutable_history()->mutable_status() = status;
        // A child on another node is asked there (forward_to_owner); this is what is left
        // without a transport (a node outside any cluster holds none).
        if (!status.node().empty() && r.history().note().empty())
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
