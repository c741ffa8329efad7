#include "actors/scheduling/step_scheduler.hpp"

#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/messages.hpp"
#include "actors/scheduling/lock_table.hpp"
#include "actors/scheduling/ready_level.hpp"
#include "actors/scheduling/worker_pool.hpp"
#include "persistence/counted_actor.hpp"

namespace proctor {

namespace {

using stuck_check_atom = caf::atom_constant<caf::atom("stuckchk")>;
using limit_wake_atom = caf::atom_constant<caf::atom("limitwake")>;

struct running_job {
  uint64_t proc = 0;
  uint64_t root = 0;
  std::string type;
  std::chrono::steady_clock::time_point since;
  bool reported = false;
  bool counted = false;   ///< by its type's limiter (type_limiter::ended when it ends)
  bool on_actor = false;  ///< sent back to run on its procedure's actor (run_inline)
  caf::actor_addr actor;  ///< the procedure actor whose job it is (job.proc)
};

/// The jobs of one type its limits hold back, highest priority first, in arrival order
/// within a priority: steps of procedures under way before first steps (a start needs a
/// token as well as a slot, and one that waits must not hold up a procedure half done).
struct held_jobs {
  std::multimap<int32_t, step_job, std::greater<>> steps;
  std::multimap<int32_t, step_job, std::greater<>> starts;
  bool wake_armed = false;  ///< a limit_wake_atom is on its way (the next token)
  size_t size() const noexcept { return steps.size() + starts.size(); }
};

struct scheduler_state {
  static inline const char* name = "proctor.scheduler";
  std::unique_ptr<worker_pool> pool;
  std::map<int32_t, ready_level, std::greater<>> levels;
  std::vector<step_job> lock_blocked;
  lock_table locks;
  type_limiter limiter;
  std::unordered_map<std::string, held_jobs> held;  // by type
  size_t held_total = 0;
  std::unordered_multimap<uint64_t, uint64_t> owners_by_root;
  /// Set (for good) when a lock is first held here: until then a tree's end has no locks to
  /// release, and its procedures send no unlock_tree_atom (spawn_step_scheduler).
  std::shared_ptr<std::atomic<bool>> locks_taken;
  /// The jobs dispatched and not ended, by ticket (step_job::ticket): not by procedure, whose
  /// next job may be dispatched before the slot of its last one comes back.
  std::unordered_map<uint64_t, running_job> running;
  uint64_t last_ticket = 0;
  std::chrono::milliseconds stuck_after{0};
  size_t slots = 0;
  size_t free = 0;
  size_t queued = 0;
  uint64_t dispatched = 0;

  ~scheduler_state() {
    if (pool)
      pool->shutdown();
  }
};

using sched_actor = caf::stateful_actor<scheduler_state, counted_actor<actor_kind::scheduler>>;

void enqueue(scheduler_state& st, step_job job, bool front = false) {
  auto prio = job.priority;
  st.levels[prio].push(std::move(job), front);
  ++st.queued;
}

/// `owner` holds locks for tree `root` until the tree's unlock_tree_atom. The flag is set
/// before the step that holds them is dispatched (or, restored, before the tree may end).
void held_by_tree(scheduler_state& st, uint64_t root, uint64_t owner) {
  st.owners_by_root.emplace(root, owner);
  st.locks_taken->store(true, std::memory_order_release);
}

/// True if the job may run now (it needs no locks, holds them already, or got them).
bool lock_ok(sched_actor* self, step_job& job) {
  auto& st = self->state;
  if (job.locks.empty() || st.locks.holds(job.ctx.id()))
    return true;
  std::string blocker;
  if (st.locks.try_acquire(job.ctx.id(), job.ancestors, job.locks, &blocker)) {
    held_by_tree(st, job.ctx.root_id(), job.ctx.id());
    return true;
  }
  spdlog::debug("[proc {} root {}] waits for lock {}", job.ctx.id(), job.ctx.root_id(), blocker);
  self->send(job.proc, lock_wait_atom::value, "lock " + blocker);
  return false;
}

/// Makes sure the held jobs `h` of `type` are looked at again at `at` (their next token):
/// one wake-up on its way per type.
void arm_wake(sched_actor* self, held_jobs& h, const std::string& type,
              type_limiter::clock::time_point at) {
  if (h.wake_armed)
    return;
  h.wake_armed = true;
  auto after =
    std::chrono::duration_cast<std::chrono::milliseconds>(at - type_limiter::clock::now())
    + std::chrono::milliseconds{1};
  self->delayed_send(self, std::max(after, std::chrono::milliseconds{1}), limit_wake_atom::value,
                     type);
}

/// Holds `job` back for its type's limits (`why` is the procedure's waiting_for), and makes
/// sure a wake-up comes at `retry_at` when it waits for a token.
void hold(sched_actor* self, step_job job, const std::string& why,
          std::optional<type_limiter::clock::time_point> retry_at) {
  auto& st = self->state;
  if (!job.limit_told) {
    job.limit_told = true;
    st.limiter.throttled(job.type);
    spdlog::debug("[proc {} root {}] waits: {}", job.ctx.id(), job.ctx.root_id(), why);
    self->send(job.proc, lock_wait_atom::value, why);
  }
  job.limit_released = false;
  auto& h = st.held[job.type];
  if (retry_at)
    arm_wake(self, h, job.type, *retry_at);
  auto prio = job.priority;
  if (job.first)
    h.starts.emplace(prio, std::move(job));
  else
    h.steps.emplace(prio, std::move(job));
  ++st.held_total;
}

/// Puts jobs let go by their type's limits back in the ready queues, each at the front of its
/// root's; roots new to a level take their turns in the order of `out`.
void requeue(scheduler_state& st, std::vector<step_job>& out) {
  for (auto& job : out) {
    job.limit_released = true;
    enqueue(st, std::move(job), true);
  }
}

/// Gives back to the ready queues (at their front, in order) as many jobs of `type` as its
/// limits let run now; they are admitted when their turn comes. Arms the wake-up for the
/// next token if starts still wait for one.
void release_held(sched_actor* self, const std::string& type) {
  auto& st = self->state;
  auto h = st.held.find(type);
  if (h == st.held.end())
    return;
  auto now = type_limiter::clock::now();
  auto [steps, starts] =
    st.limiter.room(type, h->second.steps.size(), h->second.starts.size(), now);
  std::vector<step_job> out;
  auto take = [&](auto& from, size_t n) {
    for (; n > 0 && !from.empty(); --n) {
      out.push_back(std::move(from.begin()->second));
      from.erase(from.begin());
      --st.held_total;
    }
  };
  take(h->second.steps, steps);
  take(h->second.starts, starts);
  if (!h->second.starts.empty() && !h->second.wake_armed)
    if (auto at = st.limiter.next_token(type, now))
      arm_wake(self, h->second, type, *at);
  if (h->second.size() == 0 && !h->second.wake_armed)
    st.held.erase(h);
  requeue(st, out);
}

/// Asks `job`'s type's limits whether it may run now (counting it if so); holds it back
/// if not. Undos are neither limited nor counted.
bool limits_ok(sched_actor* self, step_job& job, bool* counted) {
  auto& st = self->state;
  *counted = false;
  if (job.undo)
    return true;
  auto now = type_limiter::clock::now();
  if (!job.limit_released && st.limiter.limited(job.type)) {
    // Newer than the jobs its type holds back: behind them (they have their wake-up).
    // (A procedure under way is behind held steps only; a start behind held starts too.)
    auto h = st.held.find(job.type);
    size_t before =
      h == st.held.end() ? 0 : h->second.steps.size() + (job.first ? h->second.starts.size() : 0);
    if (before > 0) {
      auto why = "type limit " + job.type + ": behind " + std::to_string(before)
                 + " held back before it (" + st.limiter.describe_of(job.type) + ")";
      hold(self, std::move(job), why, std::nullopt);
      return false;
    }
  }
  auto v = st.limiter.admit(job.type, job.first, now);
  if (!v.ok) {
    hold(self, std::move(job), v.why, v.retry_at);
    return false;
  }
  *counted = true;
  if (job.limit_told) {
    job.limit_told = false;
    self->send(job.proc, lock_wait_atom::value, std::string{});
  }
  return true;
}

void dispatch(sched_actor* self) {
  auto& st = self->state;
  while (st.free > 0 && st.queued > 0) {
    auto i = st.levels.begin();
    auto job = i->second.pop();
    if (i->second.empty())
      st.levels.erase(i);
    --st.queued;
    bool counted = false;
    if (!limits_ok(self, job, &counted))
      continue;
    if (!lock_ok(self, job)) {
      job.limit_released = true;  // its limits let it go: ahead of newer jobs when unblocked
      auto type = job.type;
      st.lock_blocked.push_back(std::move(job));
      if (counted) {
        // Its count back, and with it room for a job its type held back meanwhile: that one
        // may be the lock's holder, waiting for a run slot (before, nothing let it go, and
        // both waited for ever: a lock wait is one of the ways a step ends).
        st.limiter.refund(type, st.lock_blocked.back().first);
        release_held(self, type);
      }
      continue;
    }
    --st.free;
    ++st.dispatched;
    job.ticket = ++st.last_ticket;
    st.running[job.ticket] =
      running_job{job.ctx.id(), job.ctx.root_id(), job.type,       std::chrono::steady_clock::now(),
                  false,        counted,           job.run_inline, job.proc.address()};
    if (job.run_inline) {
      auto proc = job.proc;
      self->send(proc, run_inline_atom::value, std::move(job));
    } else {
      st.pool->push(std::move(job));
    }
  }
}

/// Locks were released: the blocked jobs go back to the front of their queues, in order.
void unblock(sched_actor* self) {
  auto& st = self->state;
  auto blocked = std::move(st.lock_blocked);
  st.lock_blocked.clear();
  for (auto i = blocked.rbegin(); i != blocked.rend(); ++i) {
    self->send(i->proc, lock_wait_atom::value, std::string{});
    enqueue(st, std::move(*i), true);
  }
  dispatch(self);
}

/// The job dispatched under `r` ended: its run slot and its type's count are given back.
void end_job(sched_actor* self, std::unordered_map<uint64_t, running_job>::iterator r) {
  auto& st = self->state;
  ++st.free;
  auto job = std::move(r->second);
  st.running.erase(r);
  if (job.counted) {
    st.limiter.ended(job.type);
    release_held(self, job.type);
  }
}

/// Drops the first job `mine` picks that is held back by its type's limits, blocked by a lock
/// or queued; true if there was one.
template <class Pick>
bool drop_job(scheduler_state& st, Pick mine) {
  for (auto h = st.held.begin(); h != st.held.end(); ++h)
    for (auto* from : {&h->second.steps, &h->second.starts})
      for (auto j = from->begin(); j != from->end(); ++j)
        if (mine(j->second)) {
          from->erase(j);
          --st.held_total;
          return true;
        }
  auto& b = st.lock_blocked;
  for (auto i = b.begin(); i != b.end(); ++i)
    if (mine(*i)) {
      b.erase(i);
      return true;
    }
  for (auto l = st.levels.begin(); l != st.levels.end(); ++l) {
    for (auto& [root, q] : l->second.jobs) {
      for (auto j = q.begin(); j != q.end(); ++j) {
        if (!mine(*j))
          continue;
        q.erase(j);
        --st.queued;
        if (q.empty()) {
          auto r = root;
          l->second.jobs.erase(r);
          auto& rr = l->second.roots;
          rr.erase(std::remove(rr.begin(), rr.end(), r), rr.end());
          if (l->second.empty())
            st.levels.erase(l);
        }
        return true;
      }
    }
  }
  return false;
}

caf::behavior scheduler_actor(sched_actor* self, size_t workers,
                              std::chrono::milliseconds stuck_after,
                              std::map<std::string, type_limits> declared,
                              std::shared_ptr<std::atomic<bool>> locks_taken) {
  auto& st = self->state;
  st.locks_taken = std::move(locks_taken);
  for (const auto& [type, l] : declared)
    st.limiter.declare(type, l);
  st.slots = st.free = workers;
  st.stuck_after = stuck_after;
  st.pool = std::make_unique<worker_pool>(workers, caf::actor_cast<caf::actor>(self));
  auto period = std::max(std::chrono::milliseconds{100}, stuck_after / 4);
  self->delayed_send(self, period, stuck_check_atom::value);
  return {
    [=](ready_atom, step_job& job) {
      enqueue(self->state, std::move(job));
      dispatch(self);
    },
    [=](slot_atom, uint64_t ticket) {
      auto r = self->state.running.find(ticket);
      if (r == self->state.running.end())
        return;  // given back already: its procedure's actor went with it (proc_gone_atom)
      end_job(self, r);
      dispatch(self);
    },
    [=](proc_gone_atom, const caf::actor_addr& gone) {
      // The actor went (a stop of its subtree, a crash, its tree's end) with a job here: a
      // queued one is dropped, one sent back to run on the actor never runs. (A job on a
      // worker thread still runs, and its worker gives the slot back.)
      while (drop_job(self->state, [&](const step_job& j) { return j.proc.address() == gone; })) {
      }
      auto& running = self->state.running;
      for (auto r = running.begin(); r != running.end();) {
        auto here = r++;
        if (here->second.actor == gone && here->second.on_actor)
          end_job(self, here);
      }
      dispatch(self);
    },
    [=](limit_wake_atom, const std::string& type) {
      auto& st = self->state;
      if (auto h = st.held.find(type); h != st.held.end())
        h->second.wake_armed = false;
      release_held(self, type);
      dispatch(self);
    },
    [=](limits_set_atom, type_limit_change& c) {
      auto& st = self->state;
      st.limiter.override_limits(c.type, c.limits, c.at_ms, type_limiter::clock::now());
      spdlog::info("type {}: {} ({})", c.type, st.limiter.describe_of(c.type),
                   c.limits ? "set by an operator" : "as its code declares");
      // Held back by limits that no longer hold: all of them look again, in order.
      if (auto h = st.held.find(c.type); h != st.held.end()) {
        std::vector<step_job> out;
        for (auto* from : {&h->second.steps, &h->second.starts})
          for (auto& [prio, job] : *from)
            out.push_back(std::move(job));
        st.held_total -= out.size();
        bool armed = h->second.wake_armed;
        st.held.erase(h);
        if (armed)
          st.held[c.type].wake_armed = true;  // its wake-up still comes, and finds nothing
        requeue(st, out);
      }
      dispatch(self);
    },
    [=](limits_atom) {
      auto& st = self->state;
      auto views = st.limiter.views();
      for (auto& v : views)
        if (auto h = st.held.find(v.type); h != st.held.end())
          v.waiting = static_cast<uint32_t>(h->second.size());
      return views;
    },
    [=](unlock_atom, uint64_t owner) {
      auto& st = self->state;
      if (!st.locks.holds(owner))
        return;
      st.locks.release(owner);
      unblock(self);
    },
    [=](unlock_tree_atom, uint64_t root) {
      auto& st = self->state;
      auto range = st.owners_by_root.equal_range(root);
      bool any = false;
      for (auto i = range.first; i != range.second; ++i) {
        any = any || st.locks.holds(i->second);
        st.locks.release(i->second);
      }
      st.owners_by_root.erase(root);
      if (any)
        unblock(self);
    },
    [=](restore_locks_atom, uint64_t owner, uint64_t root, lock_set& locks) {
      auto& st = self->state;
      st.locks.force_acquire(owner, locks);
      held_by_tree(st, root, owner);
    },
    [=](cancel_atom, uint64_t proc) {
      return drop_job(self->state,
                      [proc](const step_job& j) { return j.ctx.id() == proc && !j.undo; });
    },
    [=](stuck_check_atom) {
      auto& st = self->state;
      auto now = std::chrono::steady_clock::now();
      for (auto& [id, r] : st.running)
        if (!r.reported && now - r.since > st.stuck_after) {
          r.reported = true;
          spdlog::warn("[proc {} root {}] stuck: a step of {} has run for more than {} ms", r.proc,
                       r.root, r.type, st.stuck_after.count());
        }
      self->delayed_send(self, period, stuck_check_atom::value);
    },
    [=](locks_atom) {
      auto& st = self->state;
      std::unordered_map<uint64_t, uint64_t> root_of;
      for (const auto& [root, owner] : st.owners_by_root)
        root_of[owner] = root;
      pb::Response r;
      for (const auto& [owner, set] : st.locks.owned())
        for (const auto& l : set) {
          auto* x = r.add_locks();
          x->set_resource(l.name);
          x->set_exclusive(l.exclusive);
          x->set_proc_id(owner);
          x->set_root_id(root_of.count(owner) ? root_of[owner] : 0);
          x->set_held(true);
        }
      for (const auto& job : st.lock_blocked) {
        auto blocker = st.locks.blocker(job.ctx.id(), job.ancestors, job.locks);
        for (const auto& l : job.locks) {
          auto* x = r.add_locks();
          x->set_resource(l.name);
          x->set_exclusive(l.exclusive);
          x->set_proc_id(job.ctx.id());
          x->set_root_id(job.ctx.root_id());
          x->set_blocked_by(blocker);
        }
      }
      return r.SerializeAsString();
    },
    [=](stats_atom) {
      auto& st = self->state;
      size_t stuck = 0;
      for (const auto& [id, r] : st.running)
        stuck += r.reported;
      step_scheduler_stats out{st.queued,     st.slots - st.free,     st.slots,
                               st.dispatched, st.lock_blocked.size(), st.locks.held(),
                               stuck,         st.held_total,          st.limiter.views()};
      for (auto& v : out.types)
        if (auto h = st.held.find(v.type); h != st.held.end())
          v.waiting = static_cast<uint32_t>(h->second.size());
      return out;
    },
  };
}

}  // namespace

caf::actor spawn_step_scheduler(caf::actor_system& sys, size_t workers,
                                std::chrono::milliseconds stuck_after,
                                std::map<std::string, type_limits> declared,
                                std::shared_ptr<std::atomic<bool>> locks_taken) {
  if (!locks_taken)
    locks_taken = std::make_shared<std::atomic<bool>>(false);
  return sys.spawn(scheduler_actor, workers == 0 ? size_t{1} : workers, stuck_after,
                   std::move(declared), std::move(locks_taken));
}

}  // namespace proctor
