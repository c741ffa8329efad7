// The step scheduler's ready jobs of one priority (step_scheduler.cpp): a FIFO per root, the
// roots served round-robin, so that one tree's many ready steps do not hold up the others.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>

#include "actors/base/messages.hpp"

namespace proctor {

/// Ready jobs of one priority: a FIFO per root, roots served round-robin.
struct ready_level {
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

}  // namespace proctor
