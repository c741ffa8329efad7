#include "actors/node/replica_front.hpp"

#include "actors/base/rpc.hpp"
#include "actors/executor/executor.hpp"

namespace proctor {

namespace {

struct front_state {
  front_answers answers;
  caf::actor executor;  ///< set once this replica leads
  static inline const char* name = "replica_front";
};

/// Adds the group's part to a leader's answer to `req` (see the request handler).
void add_group(const front_answers& answers, const pb::Request& req, pb::Response* r) {
  if (req.has_ping()) {
    *r->mutable_pong()->mutable_group() = answers.replicas();
  } else if (req.has_nodes()) {
    for (auto& n : *r->mutable_nodes())
      if (n.self())
        *n.mutable_group() = answers.replicas();
  } else if (req.has_metrics() && answers.metrics) {
    r->set_text(r->text() + answers.metrics());
  }
}

caf::behavior replica_front(caf::stateful_actor<front_state>* self, front_answers answers) {
  self->state.answers = std::move(answers);
  return {
    [self](rpc_atom a, std::string& bytes) -> caf::result<std::string> {
      pb::Request req;
      bool parsed = req.ParseFromString(bytes);
      if (parsed && req.has_replicas()
          && (!req.replicas().add().empty() || !req.replicas().remove().empty())) {
        if (!self->state.executor || !self->state.answers.change)
          return not_leader_response(bytes, self->state.answers.why_not());
        // The change waits for Raft (a new replica's catch-up: up to its timeout): on a
        // thread of its own, not on the front's.
        auto change = self->state.answers.change;
        auto worker =
          self->spawn<caf::detached>([change](caf::event_based_actor* w) -> caf::behavior {
            return {
              [w, change](rpc_atom, std::string& request) -> std::string {
                pb::Request rq;
                rq.ParseFromString(request);
                auto r = change(rq.replicas());
                r.set_tag(rq.tag());
                w->quit();
                return r.SerializeAsString();
              },
            };
          });
        // Journaled with who asked before it is done, and its outcome before the client hears
        // it, as the node's other acts (docs/security.md, "Audit"): the executor audits it
        // and has the worker do it.
        if (req.has_actor()) {
          self->delegate(self->state.executor, audit_outside_atom::value, std::move(bytes), worker);
          return caf::delegated<std::string>{};
        }
        self->delegate(worker, a, std::move(bytes));
        return caf::delegated<std::string>{};
      }
      if (parsed && req.has_replicas()) {
        pb::Response r;
        r.set_tag(req.tag());
        *r.mutable_replicas() = self->state.answers.replicas();
        return r.SerializeAsString();
      }
      if (self->state.executor && parsed
          && (req.has_metrics() || req.has_nodes() || req.has_ping())) {
        // The node's answer, with the group's part added: its gauges to `metrics`, the group
        // to this node's entry of `nodes` and to the answer to a peer's heartbeat.
        auto rp = self->make_response_promise();
        self->request(self->state.executor, caf::infinite, a, std::move(bytes))
          .then(
            [self, rp, req](std::string& reply) mutable {
              pb::Response r;
              if (r.ParseFromString(reply) && r.code() == pb::Response::OK) {
                add_group(self->state.answers, req, &r);
                reply = r.SerializeAsString();
              }
              rp.deliver(std::move(reply));
            },
            [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return caf::delegated<std::string>{};
      }
      if (self->state.executor) {
        self->delegate(self->state.executor, a, std::move(bytes));
        return caf::delegated<std::string>{};
      }
      if (parsed && req.has_metrics() && self->state.answers.metrics) {
        // A follower's own: its role and the group's gauges as it sees them (a scrape of
        // every replica finds each up; the leader's answer has the node's metrics too).
        pb::Response r;
        r.set_tag(req.tag());
        r.set_text(self->state.answers.metrics());
        return r.SerializeAsString();
      }
      return not_leader_response(bytes, self->state.answers.why_not());
    },
    [self](front_lead_atom, caf::actor& executor) { self->state.executor = std::move(executor); },
  };
}

}  // namespace

std::string not_leader_response(const std::string& request, const not_leader_answer& why) {
  pb::Request req;
  pb::Response r;
  if (req.ParseFromString(request))
    r.set_tag(req.tag());
  r.set_code(pb::Response::NOT_LEADER);
  r.set_error(why.error);
  r.set_leader(why.leader);
  r.set_leader_http(why.leader_http);
  return r.SerializeAsString();
}

caf::actor spawn_replica_front(caf::actor_system& sys, front_answers answers) {
  return sys.spawn(replica_front, std::move(answers));
}

}  // namespace proctor
