// proctor-bench (n): steps run by external workers over HTTP (docs/workers.md) against the same
// procedures with in-node steps, in one proctord of the same run.
//
//   in-node:  N demo.noop procedures of one step, submitted at once, until all ended;
//   workers:  N demo.dispatch procedures of one task each, submitted at once, run by 8 worker
//             threads that long-poll the queue (up to 8 tasks a poll) and complete each over
//             HTTP (cpp-httplib), until all ended;
//   latency:  procedures submitted one at a time (200 at 50/s) while the 8 workers wait in
//             their polls: from the submit's answer (its Submitted record durable) to the task
//             in a worker's hands (the step's commit with the dispatch, the lease, the poll's
//             answer): p50 and p99.
#include "bench.hpp"

#if PROCTOR_BENCH_HTTP
#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>

#include <httplib.h>
#include <nlohmann/json.hpp>
#endif

namespace proctor::bench {

#if !PROCTOR_BENCH_HTTP
void phase_workers(reporter&, const bench_options&, const std::string&) {
  throw std::runtime_error("proctor-bench was built without cpp-httplib (no --http): (n) needs it");
}
#else

namespace {

constexpr const char* token = "bench-workers-token";
constexpr int worker_threads = 8;

/// Worker threads polling `queue` on the node's HTTP port and completing what they get; each
/// task's arrival time goes to `arrived` by procedure id.
class http_workers {
public:
  http_workers(uint16_t http, std::string queue) : http_(http), queue_(std::move(queue)) {
    for (int i = 0; i < worker_threads; ++i)
      threads_.emplace_back([this, i] { loop(i); });
  }
  ~http_workers() { stop(); }
  http_workers(const http_workers&) = delete;
  http_workers& operator=(const http_workers&) = delete;

  void stop() {
    stopping_ = true;
    for (auto& t : threads_)
      if (t.joinable())
        t.join();
  }

  size_t completed() const { return completed_.load(); }
  std::string error() {
    std::lock_guard<std::mutex> g(mtx_);
    return error_;
  }
  std::map<uint64_t, clk::time_point> arrivals() {
    std::lock_guard<std::mutex> g(mtx_);
    return arrived_;
  }

private:
  void fail(std::string why) {
    std::lock_guard<std::mutex> g(mtx_);
    if (error_.empty())
      error_ = std::move(why);
  }

  void loop(int i) {
    httplib::Client c("127.0.0.1", http_);
    c.set_read_timeout(10, 0);
    c.set_bearer_token_auth(token);
    nlohmann::json poll = {
      {"queues", {queue_}}, {"worker", "bench-" + std::to_string(i)}, {"max", 8}, {"wait", "1s"}};
    const auto body = poll.dump();
    while (!stopping_) {
      auto r = c.Post("/api/tasks/poll", body, "application/json");
      if (!r || r->status != 200) {
        fail("poll: " + (r ? std::to_string(r->status) + " " + r->body : "no answer"));
        return;
      }
      auto got = nlohmann::json::parse(r->body, nullptr, false);
      if (got.is_discarded() || !got.contains("tasks")) {
        fail("poll answered " + r->body);
        return;
      }
      const auto now = clk::now();
      {
        std::lock_guard<std::mutex> g(mtx_);
        for (const auto& t : got["tasks"])
          arrived_.emplace(t["proc_id"].get<uint64_t>(), now);
      }
      for (const auto& t : got["tasks"]) {
        auto path = "/api/tasks/" + t["task_token"].get<std::string>() + "/complete";
        auto done = c.Post(path, R"({"result":{"ok":true}})", "application/json");
        if (!done || done->status != 200) {
          fail("complete: " + (done ? std::to_string(done->status) + " " + done->body : "none"));
          return;
        }
        ++completed_;
      }
    }
  }

  uint16_t http_;
  std::string queue_;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> completed_{0};
  std::mutex mtx_;
  std::string error_;
  std::map<uint64_t, clk::time_point> arrived_;
  std::vector<std::thread> threads_;
};

/// Seconds to submit `n` procedures of `type` and see them all end SUCCESS.
double burst(uint16_t port, size_t n, const std::string& type, const std::string& args) {
  auto t0 = clk::now();
  std::vector<uint64_t> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i)
    ids.push_back(submit_one(port, type, args));
  for (auto id : ids)
    await_success(port, id, std::chrono::seconds{120});
  return secs(clk::now() - t0);
}

}  // namespace

void phase_workers(reporter& r, const bench_options& o, const std::string& dir) {
  fs::create_directories(dir);
  const auto port = free_port(), http = free_port();
  const auto token_file = dir + "/token";
  std::ofstream(token_file) << token << "\n";
  spawn_proctord({"--data-dir", dir + "/node", "--listen", "127.0.0.1:" + std::to_string(port),
                  "--http", "127.0.0.1:" + std::to_string(http), "--http-token-file", token_file,
                  "--workers", std::to_string(o.workers)},
                 dir + "/node.log");
  pb::Request list;
  list.mutable_list();
  await(
    [&] {
      try {
        return ask(port, list, std::chrono::seconds{5}).code() == pb::Response::OK;
      } catch (const std::exception&) {
        return false;
      }
    },
    std::chrono::seconds{60}, "proctord to answer");
  const size_t n = o.quick ? 300 : 3000;
  r.put("tasks", static_cast<double>(n));
  auto in_node = burst(port, n, "demo.noop", R"({"steps":1})");
  r.put("in_node_per_s", static_cast<double>(n) / in_node);
  http_workers workers(http, "bench.q");
  auto through = burst(port, n, "demo.dispatch", R"({"queue":"bench.q"})");
  if (auto e = workers.error(); !e.empty())
    throw std::runtime_error("workers: " + e);
  r.put("tasks_per_s", static_cast<double>(n) / through);
  // Latency, one at a time with the workers waiting in their polls.
  std::vector<double> ms;
  for (size_t i = 0; i < (o.quick ? 50U : 200U); ++i) {
    auto at = clk::now();
    auto id = submit_one(port, "demo.dispatch", R"({"queue":"bench.q"})");
    auto acked = clk::now();
    await(
      [&] {
        auto a = workers.arrivals();
        auto f = a.find(id);
        if (f == a.end())
          return false;
        ms.push_back(std::chrono::duration<double, std::milli>(f->second - acked).count());
        return true;
      },
      std::chrono::seconds{30}, "a worker to get its task");
    std::this_thread::sleep_until(at + std::chrono::milliseconds{20});
  }
  workers.stop();
  std::sort(ms.begin(), ms.end());
  r.put("dispatch_p50_ms", percentile(ms, 0.5));
  r.put("dispatch_p99_ms", percentile(ms, 0.99));
  kill_live_proctords();
  r.finish();
}
#endif

}  // namespace proctor::bench
