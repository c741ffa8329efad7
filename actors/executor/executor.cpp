#include "actors/executor/executor.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"
#include "actors/executor/caller.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/executor/metrics.hpp"
#include "actors/executor/tree_types.hpp"
#include "actors/procedure/procedure_actor.hpp"
#include "actors/procedure/remote.hpp"
#include "actors/procedure/tree_status.hpp"
#include "actors/scheduling/step_scheduler.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

void record_update(executor_actor* self, proc_update u, update_clock at) {
  auto& st = self->state;
  auto [it, fresh] = st.procs.try_emplace(u.id);
  auto& rec = it->second;
  if (fresh) {
    st.metrics.submitted(u.type);
    if (!u.ended) {
      rec.live_since_ns = at.steady_ns != 0 ? at.steady_ns : steady_ns();
      ++st.live;
    }
  }
  auto final_now = u.ended && !rec.ended;
  if (!fresh && rec.ended && !u.ended) {
    // Live again: an operator's retry of a procedure FAILED for good (proc_retry.cpp).
    rec.live_since_ns = at.steady_ns != 0 ? at.steady_ns : steady_ns();
    ++st.live;
    u.ended_at_ms = 0;
    rec.ended_at_ms = 0;
    rec.retried = true;
  }
  if (u.state != proc_state::waiting && !waits_for_undo_task(self, u.id)) {
    stop_call(self, u.id);
    forget_event_wait(self, u.id);
  }
  auto waits = [](proc_state s) {
    return s == proc_state::waiting || s == proc_state::waiting_timeout;
  };
  if (!fresh && waits(rec.state))
    --st.waiting;
  if (waits(u.state))
    ++st.waiting;
  // Times the journal holds come with the update (its records' times, which a restart reads
  // back: proc_image); what it does not hold is timed here, as the update arrives.
  auto now = at.wall_ms != 0 ? at.wall_ms : wall_ms();
  if (fresh) {
    u.started_at_ms = u.started_at_ms != 0 ? u.started_at_ms : now;
    u.since_ms = u.since_ms != 0 ? u.since_ms : now;
  } else {
    u.started_at_ms = u.started_at_ms != 0 ? u.started_at_ms : rec.started_at_ms;
    bool same = u.state == rec.state && u.waiting_for == rec.waiting_for;
    u.since_ms = u.since_ms != 0 ? u.since_ms : same ? rec.since_ms : now;
    u.ended_at_ms = u.ended_at_ms != 0 ? u.ended_at_ms : rec.ended_at_ms;
  }
  if (final_now && u.ended_at_ms == 0)
    u.ended_at_ms = now;
  rec.assign(std::move(u), st.type_names);
  if (final_now) {
    auto runtime = std::chrono::milliseconds{-1};
    if (rec.live_since_ns != 0) {
      runtime = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::nanoseconds{steady_ns() - rec.live_since_ns});
      rec.live_since_ns = 0;
      --st.live;
    }
    if (rec.retried)
      st.metrics.ended_after_retry(rec.type(), rec.state);
    else
      st.metrics.ended(rec.type(), rec.state, runtime);
    if (!st.events.held.empty())
      st.events.held.erase(it->first);
    auto w = st.waiters.find(it->first);
    if (w != st.waiters.end()) {
      auto reply = status_reply(rec);
      for (auto& x : w->second)
        x.rp.deliver(reply);
      st.waiters.erase(w);
    }
    // An event handed to it that it did not take goes to the next waiter (or is kept).
    if (!st.events.handed.empty())
      release_handed_event(self, it->first);
    if (!st.schedules.runs.empty() && rec.root_id == it->first)
      schedule_run_ended(self, it->first);
  }
  if (final_now || fresh)
    st.env->cluster->local_live.store(st.live, std::memory_order_relaxed);
}

/// Appends `b` to the journal; `then` runs once it is durable. There is no error path: a
/// journal that cannot write never acknowledges and makes the node fail-stop.
void append(executor_actor* self, journal_batch b, std::function<void(uint64_t)> then) {
  auto& st = self->state;
  auto tag = ++st.append_tag;
  if (then)
    st.appends.emplace(tag, std::move(then));
  self->send(st.env->journal, append_atom::value, std::move(b), tag);
}

/// The executor's entry for the root of `image` (its restart history survives restarts).
root_entry& enter_root(executor_actor* self, const tree_image& image) {
  auto& st = self->state;
  auto [it, fresh] = st.roots.try_emplace(image.root_id);
  auto& re = it->second;
  if (const auto* p = image.root()) {
    re.nonce = p->nonce;
    // A fragment's root is supervised as its parent on the other node would supervise it.
    if (fresh && p->parent_supervision)
      re.restarts = restart_tracker(from_pb(*p->parent_supervision));
    else if (fresh)
      if (const auto* t = st.env->types->find(p->type); t != nullptr)
        re.restarts = restart_tracker(t->supervision);
  }
  return re;
}

void forget_remote(executor_actor* self, const std::vector<proc_update>& procs) {
  auto& st = self->state;
  for (const auto& u : procs)
    if (!u.node.empty()) {
      st.remote.routes.erase(u.id);
      st.remote.ends.erase(u.id);
      if (!st.remote.via.empty())
        st.remote.via.erase(u.id);
    }
}

bool is_fragment(executor_actor* self, uint64_t root_id) {
  auto p = self->state.procs.find(root_id);
  return p != self->state.procs.end() && p->second.parent_id != 0;
}

void start_root(executor_actor* self, std::shared_ptr<const tree_image> image, bool rollback,
                std::shared_ptr<procedure> submitted) {
  auto& st = self->state;
  proc_start s;
  s.env = st.env;
  s.image = image;
  s.id = image->root_id;
  s.rollback = rollback;
  s.submitted = std::move(submitted);
  auto& re = enter_root(self, *image);
  re.handle = spawn_root(self, std::move(s));
  if (re.passivated)
    end_sleep(self, image->root_id);
}

/// Reads the tree of `root_id` back from the journal and starts its root.
void reload_root(executor_actor* self, uint64_t root_id) {
  self->request(self->state.env->journal, caf::infinite, read_tree_atom::value, root_id)
    .then(
      [self, root_id](journal_records& recs) {
        auto image = std::make_shared<const tree_image>(fold_tree(root_id, recs));
        if (!image->corrupt.empty()) {
          quarantine(self, *image, image->corrupt);
          end_sleep(self, root_id);
          return;
        }
        start_root(self, image, image->failed && !image->rolled_back);
      },
      [self](caf::error& e) {
        spdlog::critical("journal read failed: {}", error_text(self->system(), e));
      });
}

/// The tree of `root_id` is read back and restarted (or, when `fail` is set, failed and
/// rolled back) — the executor as the supervisor of root actors.
void restart_root(executor_actor* self, uint64_t root_id, std::string fail) {
  if (fail.empty())
    return reload_root(self, root_id);
  // Past the root's restart intensity: the tree fails and rolls back.
  pb::JournalRecord rec;
  auto* f = rec.mutable_failed();
  f->set_proc_id(root_id);  // failed_state 0: the root's current state may have run partly
  f->set_error(fail);
  f->set_at_ms(wall_ms());
  journal_batch b;
  b.entries.push_back(make_entry(root_id, rec));
  append(self, std::move(b), [self, root_id](uint64_t) { reload_root(self, root_id); });
}

/// The root's actor that sent this said its tree ended (tree_done, fragment_done) and quits:
/// its normal exit is not reported (spawn_root).
void root_ended(executor_actor* self, root_entry& re) {
  if (re.handle && re.handle.address() == self->current_sender())
    re.handle = nullptr;
}

/// A root's actor exited other than by its tree's end (spawn_root): passivated, stopped with
/// the node, or crashed (then restarted from the journal, within its restart intensity).
void on_root_down(executor_actor* self, uint64_t root_id, const caf::actor_addr& source,
                  const caf::error& reason) {
  auto& st = self->state;
  auto r = st.roots.find(root_id);
  if (r == st.roots.end())
    return;  // expired or forgotten since
  auto& re = r->second;
  st.rolling_back.erase(root_id);  // a restarted root reports its rollback again
  if (re.handle.address() == source)
    re.handle = nullptr;  // (a root that passivated may have a new actor already)
  if (re.finished || is(reason, errc::passivated))
    return;
  if (is(reason, errc::quarantined)) {
    // Read the tree once more to list it with what can be read of it.
    self->request(st.env->journal, caf::infinite, read_tree_atom::value, root_id)
      .then(
        [self, root_id, why = error_text(self->system(), reason)](journal_records& recs) {
          auto image = fold_tree(root_id, recs);
          quarantine(self, image, image.corrupt.empty() ? why : image.corrupt);
        },
        [](caf::error&) {});
    return;
  }
  if (is(reason, errc::journal_failed))
    return;  // the journal fail-stops the node
  auto why = error_text(self->system(), reason);
  if (!re.restarts.record_crash(std::chrono::steady_clock::now())) {
    auto msg = "escalated: root crashed more than "
               + std::to_string(re.restarts.policy().max_restarts) + " times within "
               + std::to_string(re.restarts.policy().period.count()) + " ms (last: " + why + ")";
    spdlog::warn("[proc {} root {}] {}; the tree fails", root_id, root_id, msg);
    restart_root(self, root_id, msg);
    return;
  }
  auto backoff = re.restarts.backoff();
  spdlog::info("[proc {} root {}] root crashed ({}); restarting in {} ms", root_id, root_id, why,
               backoff.count());
  arm_timeout(self, st.env->timeout, root_id, timeout_kind::root_restart,
              wall_ms() + backoff.count(), restart_root_atom::value, root_id);
}

/// The executor's behavior once its take-over of the journal's trees ended.
caf::behavior serving(executor_actor* self);

/// `rec`: the trees read back, taken over at once; null: they come in parts while the
/// journal is scanned (spawn_recovering_executor), and nothing else is handled until the
/// last (other messages wait in the mailbox).
caf::behavior executor_actor_fn(executor_actor* self, std::shared_ptr<node_env> env,
                                executor_config cfg, std::shared_ptr<recovered_state> rec) {
  auto& st = self->state;
  st.env = env;
  st.cfg = cfg;
  env->executor = caf::actor_cast<caf::actor>(self);
  // A node shutting down takes its trees along (roots are not linked: a link per root would
  // make every root's exit cost a walk of the executor's link list; spawn_root).
  self->set_exit_handler([self](caf::exit_msg& m) {
    for (auto& [id, r] : self->state.roots)
      if (r.handle)
        self->send_exit(r.handle, m.reason);
    stop_calls(self);
    self->quit(m.reason);
  });
  auto subscribe = [self] {
    if (self->state.env->transport)
      self->send(self->state.env->transport, peer_subscribe_atom::value,
                 caf::actor_cast<caf::actor>(self));
  };
  if (rec) {
    recover(self, *rec);
    subscribe();
    return serving(self);
  }
  recover_begin(self);
  self->set_default_handler(caf::skip);
  return {
    [self](recover_part_atom, std::shared_ptr<recovered_state>& part) {
      recover_part(self, *part);
    },
    [self, subscribe](recover_done_atom) {
      recover_end(self);
      subscribe();
      self->set_default_handler(caf::print_and_drop);
      self->become(serving(self));
    },
  };
}

namespace {

/// `handle`'s answer to `bytes`; a request must never take the node's front door down with
/// it: an exception is answered INTERNAL.
promise_t answer_guarded(executor_actor* self, const std::string& bytes,
                         void (*handle)(executor_actor*, const std::string&, promise_t)) {
  auto rp = self->make_response_promise<std::string>();
  try {
    handle(self, bytes, rp);
  } catch (const std::exception& e) {
    spdlog::error("request failed: {}", e.what());
    if (rp.pending())
      reply(rp, error_reply(pb::Response::INTERNAL, std::string("request failed: ") + e.what()));
  }
  return rp;
}

}  // namespace

caf::behavior serving(executor_actor* self) {
  return {
    [self](rpc_atom, const std::string& bytes) {
      return answer_guarded(self, bytes, handle_request);
    },
    [self](audit_act_atom, const std::string& bytes) {
      return answer_guarded(self, bytes, act_audited);  // executor_audit.cpp
    },
    [self](audit_outside_atom, const std::string& bytes, caf::actor& doer) {
      auto rp = self->make_response_promise<std::string>();
      pb::Request req;
      if (!req.ParseFromString(bytes) || !audit_then_act(self, req, bytes, rp, doer))
        rp.delegate(doer, rpc_atom::value, bytes);
      return rp;
    },
    [self](update_atom, proc_update& u) { record_update(self, std::move(u)); },
    [self](progress_hold_atom) { progress_bound(self); },
    [self](event_id_sweep_atom) { sweep_event_ids(self); },
    [self](handoff_sweep_atom) { sweep_taken_nonces(self); },
    [self](handoff_retry_atom, const std::string& member, uint64_t epoch) {
      handoff_retry(self, member, epoch);
    },
    [self](nonces_handed_atom) -> caf::result<std::string> {
      auto rp = self->make_response_promise<std::string>();
      handoff_check(self, rp);
      return rp;
    },
    [self](appended_atom, uint64_t tag, uint64_t lsn) {
      auto& st = self->state;
      auto i = st.appends.find(tag);
      if (i == st.appends.end())
        return;
      auto then = std::move(i->second);
      st.appends.erase(i);
      then(lsn);
    },
    [self](no_progress_atom, const std::string& type) { self->state.metrics.no_progress(type); },
    [self](rollback_atom, uint64_t root_id, bool active) {
      if (active)
        self->state.rolling_back.insert(root_id);
      else
        self->state.rolling_back.erase(root_id);
    },
    [self](undo_atom, bool ok) { ++(ok ? self->state.undos : self->state.undo_failures); },
    [self](root_down_atom, uint64_t root_id, const caf::actor_addr& source,
           const caf::error& reason) { on_root_down(self, root_id, source, reason); },
    [self](tree_done_atom, tree_done& d) {
      auto& st = self->state;
      st.rolling_back.erase(d.root_id);
      forget_remote(self, d.procs);
      for (auto& u : d.procs) {
        u.waiting_for.clear();
        u.ended = true;
        record_update(self, std::move(u));
      }
      auto& re = st.roots[d.root_id];
      re.finished = true;
      root_ended(self, re);
      keep_history(self, d.root_id, std::move(d.summary), d.records);
      // A fragment of a tree on another node stays until that node releases it (unless that
      // node was forgotten).
      if (!is_fragment(self, d.root_id) || d.orphan)
        expire_after(self, d.root_id, st.cfg.result_ttl);
    },
    [self](fragment_done_atom, tree_done& d) {
      // A fragment succeeded: its records stay as they are (its parent's tree may still
      // order it rolled back) until released.
      forget_remote(self, d.procs);
      for (auto& u : d.procs) {
        u.waiting_for.clear();
        u.ended = true;
        record_update(self, std::move(u));
      }
      auto& re = self->state.roots[d.root_id];
      re.finished = true;
      root_ended(self, re);
    },
    [self](peer_status_atom, peer_status& s) { on_peer_status(self, s); },
    [self](cluster_peers_atom, const std::vector<cluster_peer>& members) {
      on_cluster_peers(self, members);
    },
    [self](cluster_limits_atom, const std::vector<cluster_limit>& limits) {
      on_cluster_limits(self, limits);
    },
    [self](cluster_schedules_atom, const std::string& schedules) {
      on_cluster_schedules(self, schedules);
    },
    [self](remote_lost_atom, uint64_t id) { declare_lost(self, id); },
    [self](orphan_retry_atom) {
      self->state.remote.orphan_retry_armed = false;
      roll_back_orphans(self);
    },
    [self](remote_route_atom, uint64_t id, caf::actor& h) {
      route_remote(self, id, std::move(h), false);
    },
    [self](remote_route_via_atom, uint64_t id, caf::actor& parent) {
      route_remote(self, id, std::move(parent), true);
    },
    [self](remote_passivate_via_atom, uint64_t id, caf::actor& parent) {
      return remote_passivate_via(self, id, caf::actor_cast<caf::actor>(self->current_sender()),
                                  std::move(parent));
    },
    [self](expire_atom, uint64_t token) { on_expiry_timer(self, token); },
    [self](schedule_tick_atom) { on_schedule_tick(self); },
    [self](collect_atom) { collect_finished(self); },
    [self](restart_root_atom, uint64_t root_id) { restart_root(self, root_id, {}); },
    [self](passivate_begin_atom, uint64_t root_id) { return passivation_epoch(self, root_id); },
    [self](passivate_atom, uint64_t root_id, uint64_t epoch, const passivation_answer& a) {
      return passivate_root(self, root_id, epoch, a);
    },
    [self](wake_root_atom, uint64_t root_id, uint64_t token) {
      // The deadline of a passivated root: its actor comes back and times out itself.
      auto r = self->state.roots.find(root_id);
      if (r != self->state.roots.end() && r->second.passivated
          && r->second.passivation_token == token) {
        // Read back ahead of that deadline: it stays until the deadline has passed.
        r->second.woken_for_ms = r->second.wake_deadline_ms;
        wake_root(self, root_id);
      }
    },
    [self](wait_timeout_atom, uint64_t id, uint64_t token) {
      auto& st = self->state;
      auto w = st.waiters.find(id);
      if (w == st.waiters.end())
        return;
      auto& v = w->second;
      for (auto i = v.begin(); i != v.end(); ++i)
        if (i->token == token) {
          auto p = st.procs.find(id);
          if (p != st.procs.end())
            i->rp.deliver(status_reply(p->second, pb::Response::TIMEOUT));
          v.erase(i);
          break;
        }
      if (v.empty())
        st.waiters.erase(w);
    },
    [self](wait_event_atom, const std::string& key, uint64_t id, caf::actor& h) {
      await_event(self, key, id, std::move(h));
    },
    [self](wait_event_via_atom, const std::string& key, uint64_t id, caf::actor& parent) {
      await_event(self, key, id, std::move(parent), true);
    },
    [self](wait_call_atom, const std::string& key, uint64_t id, caf::actor& h, bool via,
           std::string& service, std::string& request) {
      await_call(self, key, id, std::move(h), via, std::move(service), std::move(request));
    },
    [self](call_done_atom, const std::string& key, bool ok, std::string& text) {
      on_call_done(self, key, ok, std::move(text));
    },
    [self](passivate_via_atom, const std::string& key, uint64_t id, caf::actor& parent) {
      return wait_through_parent(self, key, id, caf::actor_cast<caf::actor>(self->current_sender()),
                                 std::move(parent));
    },
    [self](event_expire_atom, const std::string& key, uint64_t lsn) {
      expire_event(self, key, lsn);
    },
    [self](event_taken_atom, uint64_t lsn, uint64_t id) { settle_event(self, lsn, id, true); },
    [self](task_timer_atom, const std::string& key, uint64_t token) {
      on_task_timer(self, key, token);
    },
    [self](task_poll_expire_atom, uint64_t token) { on_task_poll_expired(self, token); },
    [self](task_limit_wake_atom, const std::string& queue) { on_queue_limit_wake(self, queue); },
    [self](event_declined_atom, uint64_t lsn, uint64_t id) { settle_event(self, lsn, id, false); },
  };
}

}  // namespace proctor::exec_detail

namespace proctor {

using exec_detail::executor_actor_fn;

caf::actor spawn_executor(caf::actor_system& sys, std::shared_ptr<node_env> env,
                          executor_config cfg, recovered_state recovered) {
  return sys.spawn(executor_actor_fn, std::move(env), cfg,
                   std::make_shared<recovered_state>(std::move(recovered)));
}

caf::actor spawn_recovering_executor(caf::actor_system& sys, std::shared_ptr<node_env> env,
                                     executor_config cfg) {
  return sys.spawn(executor_actor_fn, std::move(env), cfg, std::shared_ptr<recovered_state>{});
}

}  // namespace proctor
