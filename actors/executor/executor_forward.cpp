// Any node answers (docs/cluster.md, "Any node answers"): a status, wait, abort, release, history,
// bypass, retry or resubmit of a procedure another node holds goes to that node, and its answer
// comes back unchanged; a child placed on another node is asked where it runs (its status and its
// history). A worker's heartbeat, complete or fail goes to the node that holds its task, which
// its token names (the procedure's id; docs/workers.md, "Any node takes a report"). (A tree is
// gathered across nodes by executor_views.cpp.)
#include "actors/base/errors.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/internal/task_ops.hpp"
#include "actors/procedure/remote.hpp"

namespace proctor::exec_detail {

namespace {

/// The procedure whose task a worker's report names, if the task is not here (0: it is, or
/// the request is no report: answered here, a malformed token too).
uint64_t report_elsewhere(executor_actor* self, const pb::TaskRequest& t) {
  if (t.op() != pb::TaskRequest::HEARTBEAT && t.op() != pb::TaskRequest::COMPLETE
      && t.op() != pb::TaskRequest::FAIL)
    return 0;
  std::string key;
  uint32_t attempt = 0;
  if (!parse_token(t.token(), &key, &attempt))
    return 0;
  const auto& tp = self->state.tasks;
  if (tp.tasks.count(key) != 0 || tp.ended.count(key) != 0)
    return 0;
  return call_key_proc(key);
}

/// Sends the request to node `name`, which holds its procedure, and its answer back unchanged.
void pass_on(executor_actor* self, const std::string& name, const std::string& bytes,
             std::chrono::milliseconds timeout, promise_t& rp) {
  self
    ->request(self->state.env->transport, timeout + std::chrono::seconds{1},
              peer_request_atom::value, name, bytes, static_cast<uint32_t>(timeout.count()))
    .then([rp](std::string& answer) mutable { reply(rp, std::move(answer)); },
          [self, rp, name](caf::error& e) mutable {
            // "node a unreachable since T (why)" reads as "... is unreachable since T (why)".
            auto why = error_text(self->system(), e);
            auto prefix = "node " + name + " unreachable ";
            why = why.rfind(prefix, 0) == 0 ? " " + why.substr(prefix.size()) : ": " + why;
            reply(rp, error_reply(pb::Response::UNREACHABLE,
                                  "node " + name + ", which holds the procedure, is unreachable"
                                    + why));
          });
}

}  // namespace

bool forward_to_owner(executor_actor* self, const pb::Request& req, const std::string& in_bytes,
                      promise_t& rp) {
  auto& st = self->state;
  // A request a peer passed on carries a tag (its link's; or the one set below, which a link
  // replaces with its own). It goes at most one hop further, to where a child placed here
  // runs: never back by the id's owner, which is how a node holding a placeholder of a
  // fragment released since and the fragment's node sent a status to each other for ever.
  const bool from_peer = req.tag() != 0;
  std::string marked;
  if (!from_peer) {
    pb::Request copy = req;
    copy.set_tag(1);
    marked = copy.SerializeAsString();
  }
  const std::string& bytes = from_peer ? in_bytes : marked;
  uint64_t id = 0;
  auto timeout = std::chrono::milliseconds{30'000};
  switch (req.body_case()) {
    case pb::Request::kStatus:
      id = req.status().id();
      break;
    case pb::Request::kAbort:
      id = req.abort().id();
      break;
    case pb::Request::kRelease:
      id = req.release().id();
      break;
    case pb::Request::kHistory:
      id = req.history().id();
      break;
    case pb::Request::kBypass:
      id = req.bypass().id();
      break;
    case pb::Request::kRetry:
      id = req.retry().id();
      break;
    case pb::Request::kResubmit:
      id = req.resubmit().id();
      break;
    case pb::Request::kTask:
      id = report_elsewhere(self, req.task());
      if (id == 0)
        return false;
      break;
    case pb::Request::kWait:
      id = req.wait().id();
      // The client's bound on a wait is its timeout plus a grace (client_server.hpp).
      timeout = std::chrono::milliseconds{std::min<uint64_t>(req.wait().timeout_ms(), 600'000)}
                + std::chrono::seconds{4};
      break;
    default:
      return false;
  }
  auto held = st.procs.find(id);
  if (held != st.procs.end()) {
    // Held here. A child placed on another node is only a placeholder here: its status is
    // asked where it runs, and answered from the placeholder if that node does not answer;
    // its history too, which the placeholder does not have (its node's journal has the
    // steps), so a node that does not answer is said to be unreachable.
    if (held->second.node().empty() || !st.env->transport)
      return false;  // (a report of a task not here: refused here, its task has ended)
    // Its node was forgotten and it ended here as lost: what is known of it is here.
    if (held->second.ended) {
      auto s = st.env->cluster->get(held->second.node());
      if (s && s->forgotten_lsn != 0 && !s->up)
        return false;
    }
    if (req.has_history()) {
      auto where = "procedure " + std::to_string(id) + " runs on node " + held->second.node();
      self
        ->request(st.env->transport, timeout + std::chrono::seconds{1}, peer_request_atom::value,
                  held->second.node(), bytes, static_cast<uint32_t>(timeout.count()))
        .then(
          [self, rp, where, h = req.history()](std::string& answer) mutable {
            pb::Response r;
            if (!r.ParseFromString(answer))
              return reply(
                rp, error_reply(pb::Response::INTERNAL, where + ", which sent a malformed answer"));
            if (r.code() == pb::Response::NOT_FOUND)
              return handle_history(self, h, rp);  // released there: what is here
            if (r.code() != pb::Response::OK)
              return reply(rp, error_reply(r.code(), where + ", which says: " + r.error()));
            reply(rp, std::move(answer));
          },
          [self, rp, where](caf::error& e) mutable {
            reply(rp, error_reply(pb::Response::UNREACHABLE,
                                  where + " (unreachable): " + error_text(self->system(), e)
                                    + "; its history is in that node's journal"));
          });
      return true;
    }
    if (req.has_task()) {
      pass_on(self, held->second.node(), bytes, timeout, rp);
      return true;
    }
    if (!req.has_status())
      return false;
    auto local = status_reply(held->second);
    self
      ->request(st.env->transport, timeout + std::chrono::seconds{1}, peer_request_atom::value,
                held->second.node(), bytes, static_cast<uint32_t>(timeout.count()))
      .then(
        [rp, local](std::string& answer) mutable {
          pb::Response r;
          if (!r.ParseFromString(answer) || r.code() != pb::Response::OK)
            return reply(rp, std::move(local));
          reply(rp, std::move(answer));
        },
        [rp, local](caf::error&) mutable { reply(rp, std::move(local)); });
    return true;
  }
  auto owner = owner_of(id);
  // Ids this node handed out are answered here.
  if (owner == 0 || owner == st.env->node_number)
    return false;
  if (from_peer && req.has_task())
    return false;  // refused here: no open task (a second hop would be a loop)
  if (from_peer) {
    reply(rp, error_reply(pb::Response::NOT_FOUND,
                          "no procedure " + std::to_string(id) + " on node " + st.env->node_name));
    return true;
  }
  auto name = st.env->cluster->peer_of_number(owner);
  if (name.empty() || !st.env->transport) {
    reply(rp, error_reply(pb::Response::NOT_FOUND, "no procedure " + std::to_string(id)
                                                     + " (its node number " + std::to_string(owner)
                                                     + " is not among this node's peers)"));
    return true;
  }
  pass_on(self, name, bytes, timeout, rp);
  return true;
}

}  // namespace proctor::exec_detail
