#include "actors/scheduler.hpp"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>

#include "actors/messages.hpp"
#include "actors/worker_pool.hpp"

namespace proctor {

namespace {

/// Ready jobs of one priority: a FIFO per root, roots served round-robin.
struct level {
  std::deque<uint64_t> roots;
  std::unordered_map<uint64_t, std::deque<step_job>> jobs;

  void push(step_job job) {
    auto root = job.ctx.root_id();
    auto& q = jobs[root];
    if (q.empty())
      roots.push_back(root);
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

struct scheduler_state {
  static inline const char* name = "proctor.scheduler";
  std::unique_ptr<worker_pool> pool;
  std::map<int32_t, level, std::greater<>> levels;
  size_t slots = 0;
  size_t free = 0;
  size_t queued = 0;
  uint64_t dispatched = 0;

  ~scheduler_state() {
    if (pool)
      pool->shutdown();
  }
};

void dispatch(scheduler_state& st) {
  while (st.free > 0 && st.queued > 0) {
    auto i = st.levels.begin();
    auto job = i->second.pop();
    if (i->second.empty())
      st.levels.erase(i);
    --st.queued;
    --st.free;
    ++st.dispatched;
    st.pool->push(std::move(job));
  }
}

caf::behavior scheduler_actor(caf::stateful_actor<scheduler_state>* self, size_t workers) {
  self->state.slots = self->state.free = workers;
  self->state.pool = std::make_unique<worker_pool>(workers, caf::actor_cast<caf::actor>(self));
  return {
    [=](ready_atom, step_job& job) {
      auto& st = self->state;
      auto prio = job.priority;
      st.levels[prio].push(std::move(job));
      ++st.queued;
      dispatch(st);
    },
    [=](slot_atom) {
      auto& st = self->state;
      ++st.free;
      dispatch(st);
    },
    [=](stats_atom) {
      auto& st = self->state;
      return scheduler_stats{st.queued, st.slots - st.free, st.slots, st.dispatched};
    },
  };
}

} // namespace

caf::actor spawn_scheduler(caf::actor_system& sys, size_t workers) {
  return sys.spawn(scheduler_actor, workers == 0 ? size_t{1} : workers);
}

} // namespace proctor
