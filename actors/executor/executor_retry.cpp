// `proctor retry` at the executor: decides whether the procedure's step may be retried (it is
// FAILED past its point of no return and out of attempts, its tree waiting for an operator,
// or it backs off before its next attempt), wakes a passivated root, and sends the order
// down its tree (proc_retry.cpp). Answered with the procedure's status once its Retried
// record is durable.
#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/procedure_actor.hpp"

namespace proctor::exec_detail {

void handle_retry(executor_actor* self, const pb::RetryRequest& req, promise_t rp) {
  auto& st = self->state;
  auto refuse = [&rp](std::string why) {
    reply(rp, error_reply(pb::Response::REFUSED, std::move(why)));
  };
  auto i = st.procs.find(req.id());
  if (i == st.procs.end())
    return reply(rp,
                 error_reply(pb::Response::NOT_FOUND, "no procedure " + std::to_string(req.id())));
  const auto& p = i->second;
  auto me = "procedure " + std::to_string(p.id);
  auto r = st.roots.find(p.root_id);
  bool failed_for_good = exec_detail::failed_for_good(self, p);
  if (p.ended && !failed_for_good)
    return refuse(
      me + " already ended " + std::string(to_string(p.state))
      + (p.state == proc_state::rolledback && p.parent_id == 0
           ? "; a ROLLEDBACK tree is run again with `proctor resubmit " + std::to_string(p.id) + "`"
           : ""));
  if (!p.node().empty())
    return refuse(me + " runs on node " + p.node() + ": retry it there");
  auto root = st.procs.find(p.root_id);
  if (root != st.procs.end() && root->second.state == proc_state::failed && !root->second.ended)
    return refuse(me + ": its tree is rolling back; a rollback is not retried");
  if (p.waiting_for.rfind("operator (tree quarantined", 0) == 0)
    return refuse(me + ": its tree is quarantined and does not run");
  if (!failed_for_good && p.waiting_for != "retry")
    return refuse(me + " is " + std::string(to_string(p.state))
                  + (p.waiting_for.empty() ? "" : " (waiting for " + p.waiting_for + ")")
                  + ": only a procedure FAILED past its point of no return, or one backing off "
                    "before its step's next attempt, can be retried");
  if (r != st.roots.end() && r->second.passivated)
    return wake_root(self, p.root_id, [self, req, rp]() mutable { handle_retry(self, req, rp); });
  if (r == st.roots.end() || !r->second.handle)
    return refuse("the tree of " + me + " is restarting; retry");
  auto path = path_to(self, p);
  if (path.empty())
    return refuse("the tree of " + me + " is not fully known here; retry");
  spdlog::warn("[proc {} root {}] retry asked by an operator ({}{})", p.id, p.root_id,
               to_string(p.state), p.waiting_for.empty() ? "" : ", " + p.waiting_for);
  // No passivation while the order is on its way (it would reach no actor).
  ++r->second.requests_in_flight;
  auto done = [self, root_id = p.root_id] {
    auto r = self->state.roots.find(root_id);
    if (r != self->state.roots.end())
      --r->second.requests_in_flight;
  };
  self
    ->request(r->second.handle, std::chrono::seconds{30}, op_retry_atom::value,
              retry_order{std::move(path)})
    .then(
      [self, rp, done, id = p.id](std::string& why) mutable {
        done();
        if (!why.empty())
          return reply(rp, error_reply(pb::Response::REFUSED, std::move(why)));
        ++self->state.retries;
        spdlog::warn("[proc {}] retried: its Retried record is durable", id);
        // Its RUNNABLE update came first: the procedure sent it straight here before its
        // answer went up the tree.
        auto i = self->state.procs.find(id);
        if (i == self->state.procs.end())
          return reply(rp, encode(pb::Response{}));
        reply(rp, status_reply(self, i->second));
      },
      [self, rp, done](caf::error& e) mutable {
        done();
        reply(rp, error_reply(pb::Response::INTERNAL,
                              "retry failed: " + error_text(self->system(), e)));
      });
}

}  // namespace proctor::exec_detail
