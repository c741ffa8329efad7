// proctor-bench (j): many timers due within the same second. T timer procedures (demo.timer,
// in trees of demo.timers of 10,000) wait for deadlines spread over one second some way ahead;
// their trees passivate; the phase reports the resident memory per passivated waiter, then
// how fast the timeout actor resumes them once due (procedures resumed per second, from the
// first deadline to the last procedure ended) and how late it sent them (p50/p99/max).
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "actors/timeout_actor.hpp"
#include "actors/wall_clock.hpp"
#include "bench.hpp"

namespace proctor::bench {

namespace {

double gauge(caf::scoped_actor& self, const caf::actor& exec, const char* name) {
  return metric(call(self, exec, metrics_req()).text(), name);
}

} // namespace

void phase_timers(reporter& r, const bench_options& o, const std::string& dir) {
  constexpr size_t per_tree = 10'000;
  auto trees = std::max<size_t>(1, (o.timers + per_tree - 1) / per_tree);
  auto total = trees * per_tree;
  node_in_child nc;
  auto rss0 = rss_bytes();
  nc.start(dir, o.workers);
  caf::scoped_actor self{*nc.sys};
  // Far enough ahead to submit and passivate them all (100k took some 15 s on the shared
  // 2-core machine: 150 us each; 200 us allowed), then a second.
  auto first_at = wall_ms() + 5'000 + static_cast<int64_t>(total) / 5;
  auto res = run_burst(
    *nc.sys, nc.exec(), trees, 64,
    [&](size_t) {
      return submit_req("demo.timers", R"({"count":)" + std::to_string(per_tree)
                                         + R"(,"first_at_ms":)" + std::to_string(first_at)
                                         + R"(,"spread_ms":1000})");
    },
    false);
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  auto t0 = clk::now();
  for (;;) {
    if (gauge(self, nc.exec(), "proctor_hibernated_procedures") >= static_cast<double>(trees))
      break;
    if (wall_ms() >= first_at)
      throw std::runtime_error("the trees did not passivate before their first deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  auto passivated_s = secs(clk::now() - t0);
  release_free_memory();
  auto rss1 = rss_bytes();
  if (wall_ms() >= first_at)
    throw std::runtime_error("the trees did not passivate before their first deadline");
  // From the first deadline until the last timer procedure ended.
  while (gauge(self, nc.exec(), "proctor_waiting_procedures") > 0) {
    if (wall_ms() > first_at + 600'000)
      throw std::runtime_error("timers still waiting 10 minutes after their deadlines");
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  auto done_at = wall_ms();
  timeout_stats stats;
  self->request(nc.n->timeout(), std::chrono::seconds{30}, timeout_stats_atom::value)
    .receive([&](timeout_stats s) { stats = s; }, [](caf::error&) {});
  auto fire_s = std::max<double>(0.001, static_cast<double>(done_at - first_at) / 1000.0);
  r.put("timers", static_cast<double>(total));
  r.put("populate_s", passivated_s);
  r.put("bytes_per_waiter", (static_cast<double>(rss1) - static_cast<double>(rss0))
                              / static_cast<double>(total));
  r.put("resumed_per_s", static_cast<double>(total) / fire_s);
  r.put("late_p50_ms", static_cast<double>(stats.late_p50_ms));
  r.put("late_p99_ms", static_cast<double>(stats.late_p99_ms));
  r.put("late_max_ms", static_cast<double>(stats.late_max_ms));
  r.finish();
}

} // namespace proctor::bench
