// A procedure actor as the supervisor of its children: crashes restart the crashed subtree
// from its last journaled state, by strategy, within the restart intensity; past it the
// supervisor escalates (a root fails its tree instead). Also the stop protocol: a subtree
// stops at step boundaries, bottom-up.
#include <algorithm>

#include "actors/errors.hpp"
#include "actors/procedure_actor_state.hpp"

namespace proctor {

namespace {

} // namespace

void restart_children(proc_actor* self, std::vector<uint64_t> ids) {
  auto& st = self->state;
  if (st.stopping || st.failing || st.parked)
    return;
  self->request(st.env->journal, caf::infinite, read_tree_atom::value, st.root_id)
    .then(
      [self, ids](journal_records& recs) {
        auto& st = self->state;
        if (st.stopping || st.failing || st.parked)
          return;
        auto image = std::make_shared<const tree_image>(fold_tree(st.root_id, recs));
        if (!image->corrupt.empty()) {
          PLOG(error, self, "cannot restart children: tree damaged: {}", image->corrupt);
          self->quit(caf::make_error(errc::quarantined, image->corrupt));
          return;
        }
        for (auto cid : ids) {
          auto* c = st.child(cid);
          const auto* p = image->find(cid);
          if (c == nullptr || p == nullptr || c->handle)
            continue;
          if (is_final(p->status)) {
            // It ended before it went down; collect how, as its subtree_done would have.
            c->restarting = false;
            st.child_ended(*c, child_result{cid, p->status, p->result_json, p->error});
            collect_subtree(*image, cid, &st.finished_subtree);
            continue;
          }
          PLOG(info, self, "restarting child {} from its journaled state", cid);
          spawn_child(self, image, cid);
        }
        maybe_join(self);
      },
      [self](caf::error& e) {
        PLOG(critical, self, "journal read failed: {}", self->system().render(e));
        self->quit(caf::make_error(errc::journal_failed));
      });
}

namespace {

/// Stops the live children in `ids` at a step boundary, then restarts all of `ids` after
/// the back-off.
void stop_then_restart(proc_actor* self, std::vector<uint64_t> ids,
                       std::chrono::milliseconds backoff) {
  auto& st = self->state;
  auto pending = std::make_shared<size_t>(0);
  auto go = [self, ids, backoff] {
    self->delayed_send(self, backoff, restart_atom::value, ids);
  };
  for (auto cid : ids) {
    auto* c = st.child(cid);
    c->restarting = true;
    if (!c->handle)
      continue;
    ++*pending;
    auto h = c->handle;
    self->request(h, caf::infinite, stop_atom::value)
      .then([pending, go](caf::ok_atom) { if (--*pending == 0) go(); },
            [pending, go](caf::error&) { if (--*pending == 0) go(); });
  }
  if (*pending == 0)
    go();
}

} // namespace

void on_down(proc_actor* self, caf::down_msg& m) {
  auto& st = self->state;
  bool normal = !m.reason || m.reason == caf::exit_reason::normal;
  if (st.parent && m.source == st.parent.address()) {
    if (!normal)
      self->quit(m.reason);  // our supervisor went down: the subtree goes with it
    return;
  }
  auto* c = st.child_by_addr(m.source);
  if (c == nullptr)
    return;
  st.child_addrs.erase(m.source);
  c->handle = nullptr;
  if (normal || c->ended || c->restarting || st.stopping || st.failing || st.parked)
    return;
  auto why = self->system().render(m.reason);
  if (!st.restarts.record_crash(std::chrono::steady_clock::now())) {
    auto msg = "child " + std::to_string(c->id) + " crashed more than "
               + std::to_string(st.restarts.policy().max_restarts) + " times within "
               + std::to_string(st.restarts.policy().period.count()) + " ms (last: " + why + ")";
    if (st.is_root) {
      PLOG(warn, self, "supervision gives up at the root: {}; the tree fails", msg);
      begin_tree_failure(self, st.id, st.state, "escalated: " + msg);
    } else {
      PLOG(warn, self, "escalating: {}", msg);
      self->quit(caf::make_error(errc::escalated, msg));
    }
    return;
  }
  auto backoff = st.restarts.backoff();
  std::vector<uint64_t> ids;
  switch (st.restarts.policy().strategy) {
    case restart_strategy::one_for_one:
      ids.push_back(c->id);
      break;
    case restart_strategy::one_for_all:
      for (auto& x : st.children)
        if (!x.ended)
          ids.push_back(x.id);
      break;
    case restart_strategy::rest_for_one: {
      bool after = false;
      for (auto& x : st.children) {
        after = after || x.id == c->id;
        if (after && !x.ended)
          ids.push_back(x.id);
      }
      break;
    }
  }
  PLOG(info, self, "child {} crashed ({}); restarting {} child(ren) in {} ms", c->id, why,
       ids.size(), backoff.count());
  stop_then_restart(self, std::move(ids), backoff);
}

void stop_subtree(proc_actor* self, caf::response_promise rp) {
  auto& st = self->state;
  if (rp.pending())
    st.stop_promises.push_back(rp);
  if (st.stopping)
    return maybe_finish_stop(self);
  st.stopping = true;
  ++st.timer_token;  // no timer or retry fires any more
  if (st.job_queued) {
    // A step that has not started yet (queued, or waiting for a lock) need not run.
    self->request(st.env->scheduler, caf::infinite, cancel_atom::value, st.id)
      .then(
        [self](bool cancelled) {
          auto& st = self->state;
          if (cancelled && st.job_queued) {
            st.job_queued = false;
            st.busy = false;
            maybe_finish_stop(self);
          }
        },
        [](caf::error&) {});
  }
  for (auto& c : st.children) {
    if (!c.handle || c.ended)
      continue;
    ++st.stops_pending;
    self->request(c.handle, caf::infinite, stop_atom::value)
      .then(
        [self](caf::ok_atom) {
          --self->state.stops_pending;
          maybe_finish_stop(self);
        },
        [self](caf::error&) {
          --self->state.stops_pending;
          maybe_finish_stop(self);
        });
  }
  maybe_finish_stop(self);
}

void maybe_finish_stop(proc_actor* self) {
  auto& st = self->state;
  if (!st.stopping || st.busy || st.stops_pending > 0)
    return;
  if (st.is_root && st.failing)
    return rollback_after_stop(self);
  for (auto& rp : st.stop_promises)
    rp.deliver(caf::ok_atom::value);
  st.stop_promises.clear();
  self->quit();
}

} // namespace proctor
