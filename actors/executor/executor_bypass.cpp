// `proctor bypass` at the executor: decides whether the procedure is stuck (or the bypass
// forced), wakes a passivated root, and sends the order down its tree (proc_bypass.cpp).
#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"

namespace proctor::exec_detail {

namespace {

/// Why `p` is not stuck ("" when it is).
std::string not_stuck(executor_actor* self, const proc_record& p) {
  auto& st = self->state;
  auto me =
    "procedure " + std::to_string(p.id) + " is not stuck: it is " + std::string(to_string(p.state));
  auto waited_ms = wall_ms() - p.since_ms;
  auto waits = p.state == proc_state::waiting || p.state == proc_state::waiting_timeout
               || !p.waiting_for.empty();
  if (p.state == proc_state::failed)
    return {};  // past its point of no return, out of retries: it waits for an operator
  if (p.waiting_for == "children")
    return me + " waiting for its children (bypass a stuck child instead)";
  if (!waits)
    return me + " and running";
  if (waited_ms < st.cfg.stuck_after.count())
    return me + " (waiting for " + p.waiting_for + ") for " + std::to_string(waited_ms / 1000)
           + " s, less than the " + std::to_string(st.cfg.stuck_after.count() / 1000)
           + " s after which a waiting or retrying procedure counts as stuck";
  return {};
}

}  // namespace

std::vector<uint64_t> path_to(executor_actor* self, const proc_record& p) {
  std::vector<uint64_t> path{p.id};
  auto id = p.id;
  while (id != p.root_id) {
    auto i = self->state.procs.find(id);
    if (i == self->state.procs.end() || i->second.parent_id == 0)
      return {};
    id = i->second.parent_id;
    path.insert(path.begin(), id);
  }
  return path;
}

void handle_bypass(executor_actor* self, const pb::BypassRequest& req, promise_t rp) {
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
  // Past its point of no return and out of retries, a procedure stays FAILED "until an
  // operator intervenes": its actor lives on, its tree waits.
  bool failed_for_good = exec_detail::failed_for_good(self, p);
  if (p.ended && !failed_for_good)
    return refuse(me + " already ended " + std::string(to_string(p.state)));
  if (!p.node().empty())
    return refuse(me + " runs on node " + p.node() + ": bypass it there");
  auto root = st.procs.find(p.root_id);
  if (root != st.procs.end() && root->second.state == proc_state::failed && !root->second.ended)
    return refuse(me + ": its tree is rolling back; bypass does not skip a rollback");
  if (p.waiting_for.rfind("operator (tree quarantined", 0) == 0)
    return refuse(me + ": its tree is quarantined and does not run");
  if (!req.force())
    if (auto why = not_stuck(self, p); !why.empty())
      return refuse(why + "; use --force to bypass it anyway");
  if (r != st.roots.end() && r->second.passivated)
    return wake_root(self, p.root_id, [self, req, rp]() mutable { handle_bypass(self, req, rp); });
  if (r == st.roots.end() || !r->second.handle)
    return refuse("the tree of " + me + " is restarting; retry");
  auto path = path_to(self, p);
  if (path.empty())
    return refuse("the tree of " + me + " is not fully known here; retry");
  spdlog::warn("[proc {} root {}] bypass asked by an operator{}", p.id, p.root_id,
               req.force() ? " (forced)" : "");
  // No passivation while the order is on its way (it would reach no actor).
  ++r->second.requests_in_flight;
  auto done = [self, root_id = p.root_id] {
    auto r = self->state.roots.find(root_id);
    if (r != self->state.roots.end())
      --r->second.requests_in_flight;
  };
  bypass_order order{std::move(path), p.waiting_for, req.force()};
  self->request(r->second.handle, std::chrono::seconds{30}, bypass_atom::value, std::move(order))
    .then(
      [self, rp, done, id = p.id, failed_for_good](std::string& why) mutable {
        done();
        if (!why.empty())
          return reply(rp, error_reply(pb::Response::REFUSED, std::move(why)));
        spdlog::warn("[proc {}] bypassed: its Bypassed record is durable", id);
        auto i = self->state.procs.find(id);
        if (i == self->state.procs.end())
          return reply(rp, encode(pb::Response{}));
        auto u = i->second.to_update();
        u.state = proc_state::success;  // its own update may still be on its way
        u.ended = true;
        u.waiting_for.clear();
        u.error.clear();
        u.bypassed = true;
        // A FAILED one counted as ended already: its waiters must not see FAILED again.
        if (failed_for_good)
          record_update(self, u);
        proc_record shown;  // the status as answered, whether recorded or not
        shown.assign(std::move(u), self->state.type_names);
        reply(rp, status_reply(shown));
      },
      [self, rp, done](caf::error& e) mutable {
        done();
        reply(rp, error_reply(pb::Response::INTERNAL,
                              "bypass failed: " + error_text(self->system(), e)));
      });
}

}  // namespace proctor::exec_detail
