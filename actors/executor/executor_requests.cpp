// The executor's wire requests: submit, status, list, wait, abort, event, release, metrics,
// quarantine, and calls from other nodes' procedures to this node's services.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/placement.hpp"
#include "actors/base/rpc.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/tree_status.hpp"
#include "actors/scheduling/step_scheduler.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

namespace {

/// The procedure `id`, or nullptr after answering NOT_FOUND.
proc_record* find_or_reply(executor_actor* self, uint64_t id, promise_t& rp) {
  auto i = self->state.procs.find(id);
  if (i != self->state.procs.end())
    return &i->second;
  reply(rp, error_reply(pb::Response::NOT_FOUND, "no procedure " + std::to_string(id)));
  return nullptr;
}

void handle_submit(executor_actor* self, const pb::SubmitRequest& req, promise_t rp) {
  auto& st = self->state;
  if (req.args_json().size() > st.cfg.max_args_bytes)
    return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                 "args JSON is " + std::to_string(req.args_json().size())
                                   + " bytes, more than the limit of "
                                   + std::to_string(st.cfg.max_args_bytes)));
  if (!req.nonce().empty()) {
    if (auto i = st.nonces.find(req.nonce()); i != st.nonces.end()) {
      pb::Response r;
      r.set_id(i->second);
      return reply(rp, encode(r));
    }
    if (auto i = st.nonce_pending.find(req.nonce()); i != st.nonce_pending.end()) {
      i->second.push_back(rp);
      return;
    }
    // Accepted by another node before its slot moved here (executor_handoff.cpp).
    if (auto id = nonce_taken_id(self, req.nonce())) {
      pb::Response r;
      r.set_id(*id);
      return reply(rp, encode(r));
    }
  }
  if (st.procs.size() >= st.cfg.max_procedures)
    return reply(rp, error_reply(pb::Response::REFUSED,
                                 "node is at capacity (" + std::to_string(st.procs.size())
                                   + " procedures); release finished ones or retry later"));
  if (const auto* t = st.env->types->find(req.type()); t != nullptr && t->child_only)
    return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                 "type '" + t->name
                                   + "' is child-only: only a parent procedure can spawn it"));
  std::string err;
  auto inst = st.env->types->make_from_json(req.type(), req.args_json(), &err);
  if (!inst) {
    auto code = st.env->types->find(req.type()) == nullptr ? pb::Response::UNKNOWN_TYPE
                                                           : pb::Response::BAD_REQUEST;
    return reply(rp, error_reply(code, err));
  }
  submit_root(self, req.type(), std::move(inst), req.nonce(), req.priority(), 0, std::move(rp), {},
              {}, req.key());
}

}  // namespace

void submit_root(executor_actor* self, const std::string& type, std::unique_ptr<procedure> inst,
                 const std::string& nonce, int32_t priority, uint64_t resubmitted_from,
                 promise_t rp, std::function<void(uint64_t id, uint64_t last_lsn)> on_durable,
                 std::function<void(journal_batch&, uint64_t id)> extend, const std::string& key) {
  auto& st = self->state;
  auto id = st.env->next_id->fetch_add(1);
  pb::JournalRecord rec;
  auto* s = rec.mutable_submitted();
  s->set_proc_id(id);
  s->set_type(type);
  s->set_type_version(st.env->types->find(type)->version);
  s->set_data(inst->data().SerializeAsString());
  s->set_state(inst->initial_state());
  if (!nonce.empty())  // (an empty string set is an allocation all the same)
    s->set_nonce(nonce);
  s->set_priority(priority);
  s->set_submitted_at_ms(wall_ms());
  s->set_resubmitted_from(resubmitted_from);
  // The slot its nonce is handed over with when slots move: its key's (executor_handoff.cpp).
  const bool by_key = !key.empty() && key != nonce;
  const uint32_t slot =
    placement::slot_of(by_key ? std::string_view{key} : std::string_view{nonce});
  if (by_key && !nonce.empty())
    s->set_placement_slot(slot + 1);
  journal_batch b;
  b.entries.push_back(make_entry(id, rec));
  if (extend)
    extend(b, id);  // after the Submitted: the LSN the callback gets is of its last entry
  if (!nonce.empty()) {
    st.nonce_pending[nonce].push_back(rp);
    nonce_submit_started(self, slot);
  }
  tree_folder f(id);
  f.add(0, rec);
  auto image = std::make_shared<const tree_image>(f.finish());
  std::shared_ptr<procedure> submitted = std::move(inst);
  st.submitting.insert(id);
  append(self, std::move(b),
         [self, id, rp, image, submitted, nonce, slot, by_key,
          on_durable = std::move(on_durable)](uint64_t last_lsn) mutable {
           auto& st = self->state;
           st.submitting.erase(id);
           if (!nonce.empty()) {
             nonce_submit_ended(self, slot);
             if (by_key)
               root_nonce_slot(self, nonce, slot);
           }
           const auto& p = *image->root();
           proc_update u{id, id, 0, p.type, proc_state::runnable, {}, {}, {}, {}, nonce};
           u.started_at_ms = u.since_ms = p.submitted_at_ms;  // as its Submitted says
           record_update(self, std::move(u));
           start_root(self, image, false, std::move(submitted));
           if (on_durable)
             on_durable(id, last_lsn);
           pb::Response r;
           r.set_id(id);
           auto bytes = encode(r);
           if (nonce.empty())
             return reply(rp, bytes);
           st.nonces[nonce] = id;
           for (auto& x : st.nonce_pending[nonce])
             x.deliver(bytes);
           st.nonce_pending.erase(nonce);
         });
}

namespace {

void handle_wait(executor_actor* self, const pb::WaitRequest& req, promise_t rp) {
  auto& st = self->state;
  auto* p = find_or_reply(self, req.id(), rp);
  if (p == nullptr)
    return;
  if (p->ended)
    return reply(rp, status_reply(*p));
  auto token = ++st.wait_token;
  st.waiters[req.id()].push_back(waiter{rp, token});
  if (req.timeout_ms() > 0)
    self->delayed_send(self, std::chrono::milliseconds{req.timeout_ms()}, wait_timeout_atom::value,
                       req.id(), token);
}

void handle_abort(executor_actor* self, const pb::AbortRequest& req, promise_t rp) {
  auto& st = self->state;
  auto* p = find_or_reply(self, req.id(), rp);
  if (p == nullptr)
    return;
  if (auto why = waits_for_operator(self, *p); !why.empty())
    return reply(rp, error_reply(pb::Response::REFUSED, why));
  if (p->ended)
    return reply(rp, error_reply(pb::Response::REFUSED, "procedure " + std::to_string(req.id())
                                                          + " already ended "
                                                          + std::string(to_string(p->state))));
  auto r = st.roots.find(p->root_id);
  if (r != st.roots.end() && r->second.passivated)
    return wake_root(self, p->root_id, [self, req, rp]() mutable { handle_abort(self, req, rp); });
  if (r == st.roots.end() || !r->second.handle)
    return reply(rp, error_reply(pb::Response::REFUSED, "the tree of procedure "
                                                          + std::to_string(req.id())
                                                          + " is restarting; retry"));
  // What the node does, for the operator: the tree rolls back (it may be failing already).
  auto accepted_text = "abort of procedure " + std::to_string(req.id()) + " accepted: ";
  if (is_fragment(self, p->root_id))
    accepted_text += "its part of the tree on this node (from procedure "
                     + std::to_string(p->root_id)
                     + ") rolls back, and the node of its parent rolls back the rest";
  else if (p->root_id != req.id())
    accepted_text += "its tree (root " + std::to_string(p->root_id) + ") rolls back";
  else
    accepted_text += "its tree rolls back";
  if (auto root = st.procs.find(p->root_id);
      root != st.procs.end() && root->second.state == proc_state::failed)
    accepted_text += " (it was already failing: " + root->second.error() + ")";
  // No passivation while the abort is on its way (it would reach no actor).
  auto done = [self, root_id = p->root_id] {
    auto r = self->state.roots.find(root_id);
    if (r != self->state.roots.end())
      --r->second.requests_in_flight;
  };
  ++r->second.requests_in_flight;
  self->request(r->second.handle, std::chrono::seconds{30}, abort_atom::value, req.id())
    .then(
      [rp, id = req.id(), done, text = std::move(accepted_text)](bool accepted) mutable {
        done();
        if (!accepted)
          return reply(rp, error_reply(pb::Response::REFUSED,
                                       "procedure " + std::to_string(id)
                                         + " is past its point of no return; it cannot be "
                                           "aborted"));
        pb::Response r;
        r.set_text(text);
        reply(rp, encode(r));
      },
      [self, rp, done, id = req.id()](caf::error& e) mutable {
        done();
        if (is(e, errc::already_ended))
          return reply(rp, error_reply(pb::Response::REFUSED,
                                       "procedure " + std::to_string(id)
                                         + " already ended (its end was being written)"));
        reply(rp, error_reply(pb::Response::INTERNAL,
                              "abort failed: " + error_text(self->system(), e)));
      });
}

}  // namespace

namespace {

void handle_event(executor_actor* self, const pb::EventRequest& req, promise_t rp) {
  if (req.key().empty())
    return reply(rp, error_reply(pb::Response::BAD_REQUEST, "event key is empty"));
  if (is_call_key(req.key()))
    return reply(rp, error_reply(pb::Response::BAD_REQUEST, call_key_refusal(req.key())));
  if (event_seen(self, req.key(), req.event_id(), rp))
    return;  // sent again: accepted once (executor_event_ids.cpp)
  std::string payload = req.payload_json().empty() ? "null" : req.payload_json();
  pb::JournalRecord rec;
  auto* e = rec.mutable_event();
  e->set_event_key(req.key());
  e->set_payload_json(payload);
  e->set_arrived_at_ms(wall_ms());
  journal_batch b;
  if (!req.event_id().empty())  // before the event: the batch's last LSN is the event's
    event_id_staged(self, req.key(), req.event_id(), e->arrived_at_ms(), b);
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  append(self, std::move(b),
         [self, rp, key = req.key(), payload, at = e->arrived_at_ms(),
          id = req.event_id()](uint64_t lsn) mutable {
           // Durable: it wakes every procedure waiting for it now, and is consumed; or, none
           // waiting, it is kept for the first that suspends on it (docs/concepts.md, "Events").
           pending_event ev{lsn, std::move(payload), at, {}};
           auto woke = wake_event_waiters(self, key, ev);
           pb::Response r;
           if (woke.empty()) {
             auto ttl = human_duration(self->state.cfg.event_ttl);
             spdlog::info("event '{}' (lsn {}) kept for {} for the first procedure that "
                          "suspends on it (none waits now)",
                          key, lsn, ttl);
             keep_event(self, key, std::move(ev));
             r.set_text("event '" + key + "' kept for " + ttl
                        + " for the first procedure that suspends on it (none waits now)");
           } else {
             spdlog::info("event '{}' (lsn {}) delivered to {} waiting procedure(s) {}", key, lsn,
                          woke.size(), proc_list(woke));
             r.set_text("event '" + key + "' delivered to " + std::to_string(woke.size())
                        + " waiting procedure(s)");
           }
           if (!id.empty())
             event_id_accepted(self, key, id, lsn - 1, r.text());
           reply(rp, encode(r));
         });
}

/// `proctor tls reload`: what SIGHUP does, on a thread of its own (files are read and a TLS
/// context made), answered REFUSED with why when a file does not do.
void handle_tls_reload(executor_actor* self, promise_t& rp) {
  auto reload = self->state.env->reload_security;
  if (!reload)
    return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                 "this node was not started by proctord: it has no TLS files or "
                                 "policy to read again"));
  auto worker = self->spawn<caf::detached>([reload](caf::event_based_actor* w) -> caf::behavior {
    return {
      [w, reload](rpc_atom) -> std::string {
        std::string text;
        bool taken = reload(&text);
        w->quit();
        if (!taken)
          return error_reply(pb::Response::REFUSED, text);
        pb::Response r;
        r.set_text(text);
        return encode(r);
      },
    };
  });
  rp.delegate(worker, rpc_atom::value);
}

}  // namespace

void handle_request(executor_actor* self, const std::string& bytes, promise_t rp) {
  pb::Request req;
  if (!req.ParseFromString(bytes))
    return reply(rp, error_reply(pb::Response::BAD_REQUEST, "malformed request payload"));
  if (forward_to_owner(self, req, bytes, rp))
    return;
  if (req.has_submit() && place_submit(self, req, rp))
    return;  // its key's slot is another node's (executor_placement.cpp)
  if (hold_for_ids(self, req, bytes, rp))
    return;  // a new journal waits for its peers (executor_progress.cpp)
  if (refuse_other_types(self, req, rp))
    return;  // a caller limited to other types (executor_type_prefixes.cpp)
  if (audit_then_act(self, req, bytes, rp))
    return;  // journaled with who asked, then done (executor_audit.cpp)
  run_request(self, req, bytes, rp);
}

void run_request(executor_actor* self, const pb::Request& req, const std::string& bytes,
                 promise_t rp) {
  auto& st = self->state;
  switch (req.body_case()) {
    case pb::Request::kSubmit:
      return handle_submit(self, req.submit(), rp);
    case pb::Request::kStatus: {
      auto* p = find_or_reply(self, req.status().id(), rp);
      if (p == nullptr)
        return;
      return reply(rp, status_reply(self, *p));
    }
    case pb::Request::kList: {
      pb::Response r;
      std::vector<const proc_record*> out;
      for (const auto& [id, u] : st.procs) {
        if (!req.list().all() && u.parent_id != 0)
          continue;
        if (req.list().state() != pb::STATE_UNSPECIFIED && to_pb(u.state) != req.list().state())
          continue;
        out.push_back(&u);
      }
      std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->id < b->id; });
      for (auto* u : out)
        fill_status(self, *u, r.add_list());
      if (list_across_nodes(self, req.list(), r, rp))
        return;
      return reply(rp, encode(r));
    }
    case pb::Request::kWait:
      return handle_wait(self, req.wait(), rp);
    case pb::Request::kAbort:
      return handle_abort(self, req.abort(), rp);
    case pb::Request::kEvent:
      return handle_event(self, req.event(), rp);
    case pb::Request::kTask:
      return handle_task_request(self, req.task(), rp);
    case pb::Request::kRelease: {
      auto* p = find_or_reply(self, req.release().id(), rp);
      if (p == nullptr)
        return;
      if (p->parent_id != 0)
        return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                     "procedure " + std::to_string(req.release().id())
                                       + " is not a root; release its root "
                                       + std::to_string(p->root_id)));
      if (!p->ended)
        return reply(
          rp, error_reply(pb::Response::REFUSED,
                          "procedure " + std::to_string(req.release().id()) + " has not ended"));
      // A root FAILED past its point of no return has ended, but its tree has not: it waits
      // for an operator, and its records are all that can carry it on. Releasing it would
      // delete them.
      if (auto r = st.roots.find(p->id); r != st.roots.end() && !r->second.finished) {
        const auto id = std::to_string(p->id);
        return reply(rp, error_reply(pb::Response::REFUSED,
                                     p->state == proc_state::failed
                                       ? "procedure " + id
                                           + " is FAILED past its point of no return and its "
                                             "tree waits for an operator: `proctor retry "
                                           + id
                                           + "` (or bypass it); release drops only a finished "
                                             "tree's result"
                                       : "the tree of procedure " + id + " has not finished"));
      }
      // Answered once the deletion is durable: nothing is acknowledged before.
      release_trees(self, {req.release().id()},
                    [rp]() mutable { reply(rp, encode(pb::Response{})); });
      return;
    }
    case pb::Request::kMetrics: {
      self->request(st.env->scheduler, std::chrono::seconds{5}, stats_atom::value)
        .then(
          [self, rp](step_scheduler_stats& s) mutable {
            self
              ->request(self->state.env->journal, std::chrono::seconds{5},
                        journal_stats_atom::value)
              .then([self, rp, s](journal_stats& j) mutable { reply_metrics(self, rp, s, j); },
                    [rp](caf::error&) mutable {
                      reply(rp, error_reply(pb::Response::INTERNAL, "journal stats unavailable"));
                    });
          },
          [rp](caf::error&) mutable {
            reply(rp, error_reply(pb::Response::INTERNAL, "scheduler stats unavailable"));
          });
      return;
    }
    case pb::Request::kCall: {
      // Another node's procedure calls a service of this node.
      auto svc = st.env->services.find(req.call().service());
      if (svc == st.env->services.end())
        return reply(rp, error_reply(pb::Response::NOT_FOUND,
                                     "no service '" + req.call().service() + "' on this node"));
      self
        ->request(svc->second, std::chrono::seconds{60}, service_call_atom::value,
                  req.call().call_id(), req.call().request())
        .then(
          [rp](const std::string& answer) mutable {
            pb::Response r;
            r.set_text(answer);
            reply(rp, encode(r));
          },
          [self, rp](caf::error& e) mutable {
            reply(rp, error_reply(pb::Response::INTERNAL,
                                  "service failed: " + error_text(self->system(), e)));
          });
      return;
    }
    case pb::Request::kQuarantine: {
      pb::Response r;
      for (const auto& q : st.quarantined)
        *r.add_quarantined() = q;
      return reply(rp, encode(r));
    }
    case pb::Request::kPeer:
      return handle_peer_delivery(self, req.peer(), rp);
    case pb::Request::kPing:
      return handle_ping(self, req.ping(), rp);
    case pb::Request::kNodes:
      return handle_nodes(self, rp);
    case pb::Request::kTree:
      return handle_tree(self, req.tree(), rp);
    case pb::Request::kHistory:
      return handle_history(self, req.history(), rp);
    case pb::Request::kLocks:
      return handle_locks(self, rp);
    case pb::Request::kAudit:
      return answer_audit(self, req.audit(), rp);
    case pb::Request::kTlsReload:
      return handle_tls_reload(self, rp);
    case pb::Request::kBypass:
      return handle_bypass(self, req.bypass(), rp);
    case pb::Request::kLimits:
      return handle_limits(self, req.limits(), rp);
    case pb::Request::kForget:
      return handle_forget(self, req.forget(), rp);
    case pb::Request::kRetry:
      return handle_retry(self, req.retry(), rp);
    case pb::Request::kResubmit:
      return handle_resubmit(self, req.resubmit(), rp);
    case pb::Request::kSchedule:
      return handle_schedule(self, req.schedule(), rp);
    case pb::Request::kBackup:
      return handle_backup(self, req.backup(), rp);
    case pb::Request::kNonces:
      return handle_nonce_handoff(self, req.nonces(), rp);
    case pb::Request::kCluster:
      if (!st.env->cluster_member)
        return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                     "this node takes no part in a cluster group (proctord "
                                     "--group-port; docs/cluster-group.md)"));
      rp.delegate(st.env->cluster_member, rpc_atom::value, bytes);
      return;
    case pb::Request::kReplicas:
      // A replica's front answers this itself (actors/node/replica_front.hpp).
      return reply(rp, error_reply(pb::Response::BAD_REQUEST,
                                   "this node does not run as a replica group (proctord "
                                   "--replica; docs/replication.md)"));
    case pb::Request::BODY_NOT_SET:
      break;
  }
  reply(rp, error_reply(pb::Response::BAD_REQUEST, "empty or unknown request"));
}

}  // namespace proctor::exec_detail
