// The threads that run step and rollback handlers. Steps are author code that may block
// (files, RPCs, sleeps), so they never run on CAF's cooperative threads; the scheduler
// hands a job to the pool only when a run slot is free, so the queue stays short.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/base/messages.hpp"

namespace proctor {

class worker_pool {
public:
  /// Starts `threads` workers; each finished job is reported to the job's procedure actor
  /// (step_done_atom, step_result) and to `scheduler` (slot_atom, the job's ticket).
  worker_pool(size_t threads, caf::actor scheduler);
  ~worker_pool();
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  void push(step_job job);

  /// Stops after the jobs already running; queued jobs are dropped.
  void shutdown();

  /// Runs one job on the calling thread (the workers' loop body; public for tests).
  static step_result run(step_job& job);

private:
  void loop();

  caf::actor scheduler_;
  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<step_job> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace proctor
