#include "actors/scheduling/step_scheduler.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "actors/scheduling/lock_table.hpp"
#include "actors/base/messages.hpp"
#include "actors/scheduling/worker_pool.hpp"
#include <proctor/wire.pb.h>

namespace proctor {

namespace {

using stuck_check_atom = caf::atom_constant<caf::atom("stuckchk")>;

/// Ready jobs of one priority: a FIFO per root, roots served round-robin.
struct level {
  std::deque<uint64_t> roots;
  std::unordered_map<uint64_t, std::deque<step_job>> jobs;

  void push(step_job job, bool front = false) {
    auto root = job.ctx.root_id();
    auto& q = jobs[root];
    if (q.empty())
      roots.push_back(root);
    if (front)
      q.push_front(std::move(job));
    else
      q.push_back(std::move(job));
  }

  step_job pop() {
    auto root = roots.front();
    roots.pop_front();
    auto i = jobs.find(root);
    auto job = std::move(i->second.front());
    i->second.pop_front();
    if (i->second.empty())
      jobs.erase(i);
    else
      roots.push_back(root);
    return job;
  }

  bool empty() const noexcept { return roots.empty(); }
};

struct running_job {
  uint64_t proc = 0;
  uint64_t root = 0;
  std::string type;
  std::chrono::steady_clock::time_point since;
  bool reported = false;
};

struct scheduler_state {
  static inline const char* name = "proctor.scheduler";
  std::unique_ptr<worker_pool> pool;
  std::map<int32_t, level, std::greater<>> levels;
  std::vector<step_job> lock_blocked;
  lock_table locks;
  std::unordered_multimap<uint64_t, uint64_t> owners_by_root;
  std::unordered_map<uint64_t, running_job> running;  // by procedure id
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

using sched_actor = caf::stateful_actor<scheduler_state>;

void enqueue(scheduler_state& st, step_job job, bool front = false) {
  auto prio = job.priority;
  st.levels[prio].push(std::move(job), front);
  ++st.queued;
}

/// True if the job may run now (it needs no locks, holds them already, or got them).
bool lock_ok(sched_actor* self, step_job& job) {
  auto& st = self->state;
  if (job.locks.empty() || st.locks.holds(job.ctx.id()))
    return true;
  std::string blocker;
  if (st.locks.try_acquire(job.ctx.id(), job.ancestors, job.locks, &blocker)) {
    st.owners_by_root.emplace(job.ctx.root_id(), job.ctx.id());
    return true;
  }
  spdlog::debug("[proc {} root {}] waits for lock {}", job.ctx.id(), job.ctx.root_id(), blocker);
  self->send(job.proc, lock_wait_atom::value, blocker);
  return false;
}

void dispatch(sched_actor* self) {
  auto& st = self->state;
  while (st.free > 0 && st.queued > 0) {
    auto i = st.levels.begin();
    auto job = i->second.pop();
    if (i->second.empty())
      st.levels.erase(i);
    --st.queued;
    if (!lock_ok(self, job)) {
      st.lock_blocked.push_back(std::move(job));
      continue;
    }
    --st.free;
    ++st.dispatched;
    st.running[job.ctx.id()] = running_job{job.ctx.id(), job.ctx.root_id(), job.type,
                                           std::chrono::steady_clock::now(), false};
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

caf::behavior scheduler_actor(sched_actor* self, size_t workers,
                              std::chrono::milliseconds stuck_after) {
  auto& st = self->state;
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
    [=](slot_atom, uint64_t proc) {
      auto& st = self->state;
      ++st.free;
      st.running.erase(proc);
      dispatch(self);
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
      st.owners_by_root.emplace(root, owner);
    },
    [=](cancel_atom, uint64_t proc) {
      auto& st = self->state;
      auto& b = st.lock_blocked;
      for (auto i = b.begin(); i != b.end(); ++i)
        if (i->ctx.id() == proc && !i->undo) {
          b.erase(i);
          return true;
        }
      for (auto l = st.levels.begin(); l != st.levels.end(); ++l) {
        for (auto& [root, q] : l->second.jobs) {
          for (auto j = q.begin(); j != q.end(); ++j) {
            if (j->ctx.id() != proc || j->undo)
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
      return step_scheduler_stats{st.queued,     st.slots - st.free,     st.slots,
                                  st.dispatched, st.lock_blocked.size(), st.locks.held(),
                                  stuck};
    },
  };
}

}  // namespace

caf::actor spawn_step_scheduler(caf::actor_system& sys, size_t workers,
                                std::chrono::milliseconds stuck_after) {
  return sys.spawn(scheduler_actor, workers == 0 ? size_t{1} : workers, stuck_after);
}

}  // namespace proctor
