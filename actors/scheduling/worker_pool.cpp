#include "actors/scheduling/worker_pool.hpp"

#include <atomic>

#include <spdlog/spdlog.h>

#include "actors/base/leader_fence.hpp"

namespace proctor {

worker_pool::worker_pool(size_t threads, caf::actor scheduler) : scheduler_(std::move(scheduler)) {
  for (size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this] { loop(); });
}

worker_pool::~worker_pool() {
  shutdown();
}

void worker_pool::push(step_job job) {
  {
    std::lock_guard<std::mutex> g(mtx_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void worker_pool::shutdown() {
  {
    std::lock_guard<std::mutex> g(mtx_);
    if (stop_ && threads_.empty())
      return;
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable())
      t.join();
  threads_.clear();
}

step_result worker_pool::run(step_job& job) {
  // The run's fencing token (context.hpp): its epoch was set with the job; the sequence is
  // the process's, so that every later run here has a greater token.
  static std::atomic<uint64_t> fence_seq{0};
  job.ctx.fencing_.seq = fence_seq.fetch_add(1, std::memory_order_relaxed) + 1;
  step_result r;
  r.state = job.state;
  r.undo = job.undo;
  r.tag = job.tag;
  auto t0 = std::chrono::steady_clock::now();
  try {
    if (job.undo) {
      job.ctx.in_undo_ = true;
      job.ctx.undo_task_.reset();
      job.inst->rollback(job.state, job.ctx);
      if (job.ctx.undo_task_)  // handed to a task queue (context::dispatch_undo)
        r.out = std::move(job.ctx.undo_task_);
    } else {
      r.out.emplace(job.inst->execute(job.state, job.ctx));
      if (r.out->what() == outcome::kind::fail) {
        r.what = step_result::kind::failed;
        r.error = r.out->error();
      }
    }
  } catch (const procedure_failure& e) {
    r.what = step_result::kind::failed;
    r.error = e.what();
    r.out.reset();
  } catch (const std::exception& e) {
    r.what = step_result::kind::crashed;
    r.error = e.what();
    r.out.reset();
  } catch (...) {
    r.what = step_result::kind::crashed;
    r.error = "unknown exception";
    r.out.reset();
  }
  if (r.what == step_result::kind::ok)
    r.data = job.inst->data().SerializeAsString();
  r.took =
    std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  return r;
}

void worker_pool::loop() {
  for (;;) {
    step_job job;
    {
      std::unique_lock<std::mutex> g(mtx_);
      cv_.wait(g, [this] { return stop_ || !queue_.empty(); });
      if (stop_)
        return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    // Only a leader acts: not even a step already handed out runs while this replica is not
    // sure it leads. A shutdown meanwhile drops the job, as it drops queued ones.
    if (!leader_fence::wait_open([this] {
          std::lock_guard<std::mutex> g(mtx_);
          return stop_;
        }))
      return;
    auto r = run(job);
    caf::anon_send(job.proc, step_done_atom::value, std::move(r));
    caf::anon_send(scheduler_, slot_atom::value, job.ticket);
  }
}

}  // namespace proctor
