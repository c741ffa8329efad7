// proctor-bench (j): many timers due within the same second, across a SIGKILL. T timer
// procedures (demo.timer, in trees of demo.timers of 10,000) wait for deadlines spread over
// one second some way ahead. First half: they are submitted and their trees passivate; the
// phase reports the resident memory per passivated waiter, and the parent SIGKILLs the node.
// Second half: a new node recovers them from the journal (passivated from the start, no
// actor spawned) and reports the recovery rate and the memory per waiter there; then, once
// due, how fast the timeout actor resumes them (procedures resumed per second, from the first
// deadline to the last procedure ended) and how late it sent them (p50/p99/max); and then,
// in the same actor system, the floor any resumed rate stays under (actor_floor.cpp).
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "actors/scheduling/timeout_actor.hpp"
#include "actors/wire/wall_clock.hpp"
#include "bench.hpp"

namespace proctor::bench {

namespace {

constexpr size_t per_tree = 10'000;

double gauge(caf::scoped_actor& self, const caf::actor& exec, const char* name) {
  return metric(call(self, exec, metrics_req()).text(), name);
}

timeout_stats timeout_figures(caf::scoped_actor& self, node_in_child& nc) {
  timeout_stats s;
  self->request(nc.n->timeout(), std::chrono::seconds{30}, timeout_stats_atom::value)
    .receive([&](timeout_stats x) { s = x; }, [](caf::error&) {});
  return s;
}

size_t tree_count(const bench_options& o) {
  return std::max<size_t>(1, (o.timers + per_tree - 1) / per_tree);
}

/// Resident and allocated bytes (after the allocator returned its free pages, if `settled`).
struct memory {
  size_t rss = 0;
  size_t heap = 0;

  static memory now(bool settled) {
    if (settled)
      release_free_memory();
    return {rss_bytes(), heap_allocated_bytes()};
  }
};

double per_waiter(size_t after, size_t before, size_t waiters) {
  return (static_cast<double>(after) - static_cast<double>(before)) / static_cast<double>(waiters);
}

}  // namespace

void phase_timers_populate(reporter& r, const bench_options& o, const std::string& dir) {
  auto trees = tree_count(o);
  auto total = trees * per_tree;
  node_in_child nc;
  auto m0 = memory::now(false);
  nc.start(dir, o.workers);
  caf::scoped_actor self{*nc.sys};
  // Far enough ahead to submit and passivate them all (1M took 71 s on the shared 2-core
  // machine: 71 us each; 150 us allowed), to restart the node and recover them (5 us each
  // allowed, and 8 s), and then a second.
  auto first_at =
    wall_ms() + 8'000 + static_cast<int64_t>(total) * 3 / 20 + static_cast<int64_t>(total) / 200;
  auto actors_before = nc.sys->registry().running();
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
    if (gauge(self, nc.exec(), "proctor_passivated_roots") >= static_cast<double>(trees))
      break;
    if (wall_ms() >= first_at)
      throw std::runtime_error("the trees did not passivate before their first deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  // The roots are passivated; their children's actors are still going down, each after its
  // parent: memory is measured once they are all gone.
  while (nc.sys->registry().running() > actors_before) {
    if (wall_ms() >= first_at)
      throw std::runtime_error("the passivated trees' actors were not gone before the first "
                               "deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  auto passivated_s = secs(clk::now() - t0);
  // Passivating cancelled each waiter's deadline: the timeout actor holds one per tree once
  // it has worked through those cancels (a million of them wait in its mailbox for a while,
  // each a message, which is heap that a passivated waiter no longer holds).
  while (timeout_figures(self, nc).armed > 2 * trees) {
    if (wall_ms() >= first_at)
      throw std::runtime_error("the timeout actor still held the passivated waiters' "
                               "deadlines at the first deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  auto m1 = memory::now(true);
  r.put("timers", static_cast<double>(total));
  r.put("trees", static_cast<double>(trees));
  r.put("first_at_ms", static_cast<double>(first_at));
  r.put("populate_s", passivated_s);
  r.put("bytes_per_waiter", per_waiter(m1.rss, m0.rss, total));
  r.put("heap_per_waiter", per_waiter(m1.heap, m0.heap, total));
  r.finish();  // waits for the SIGKILL: no clean shutdown
}

void phase_timers_recover(reporter& r, const bench_options& o, const std::string& dir,
                          int64_t first_at) {
  auto trees = tree_count(o);
  auto total = trees * per_tree;
  node_in_child nc;
  auto m0 = memory::now(false);
  auto t0 = clk::now();
  nc.start(dir, o.workers);
  caf::scoped_actor self{*nc.sys};
  auto too_late = [first_at] {
    if (wall_ms() >= first_at)
      throw std::runtime_error("the node had not recovered its passivated trees by their "
                               "first deadline");
  };
  // Recovered: every tree passivated again and every timer procedure counted as waiting.
  for (;;) {
    if (gauge(self, nc.exec(), "proctor_passivated_roots") >= static_cast<double>(trees)
        && gauge(self, nc.exec(), "proctor_waiting_procedures") >= static_cast<double>(total))
      break;
    too_late();
    std::this_thread::sleep_for(std::chrono::milliseconds{2});
  }
  auto recovered_s = secs(clk::now() - t0);
  auto m1 = memory::now(true);
  too_late();
  // From a second before the first deadline (the trees are read back half a second before
  // it) until the last timer procedure ended: what resuming them cost, in CPU.
  while (wall_ms() < first_at - 1'000)
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  auto cpu0 = cpu_us();
  auto work0 = count_work(self, nc.exec());
  // From the first deadline until the last timer procedure ended.
  while (gauge(self, nc.exec(), "proctor_waiting_procedures") > 0) {
    if (wall_ms() > first_at + 600'000)
      throw std::runtime_error("timers still waiting 10 minutes after their deadlines");
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  auto done_at = wall_ms();
  auto cpu1 = cpu_us();
  // What resuming one cost (docs/benchmarks.md, "Timers"): its records, messages, actors and
  // allocations, beside the floor's spawn, message, answer and exit. The metrics reads that
  // polled the gauge above are counted with it (a few hundred in all, not per procedure).
  report_costs(r, work0, count_work(self, nc.exec()), static_cast<double>(total), 0);
  auto stats = timeout_figures(self, nc);
  auto fire_s = std::max<double>(0.001, static_cast<double>(done_at - first_at) / 1000.0);
  r.put("recovery_s", recovered_s);
  r.put("recovered_per_s", static_cast<double>(total) / std::max(0.001, recovered_s));
  r.put("open_s", nc.report.open_seconds);
  r.put("scan_s", nc.report.scan_seconds);
  r.put("records", static_cast<double>(nc.report.records));
  r.put("recovered_bytes_per_waiter", per_waiter(m1.rss, m0.rss, total));
  r.put("recovered_heap_per_waiter", per_waiter(m1.heap, m0.heap, total));
  r.put("resumed_per_s", static_cast<double>(total) / fire_s);
  r.put("cpu_us_per_resumed", (cpu1 - cpu0) / static_cast<double>(total));
  r.put("late_p50_ms", static_cast<double>(stats.late_p50_ms));
  r.put("late_p99_ms", static_cast<double>(stats.late_p99_ms));
  r.put("late_max_ms", static_cast<double>(stats.late_max_ms));
  // In the same actor system, now idle: the floor the resumed rate is measured against.
  r.put("actor_floor_per_s", actor_floor_per_s(*nc.sys, total, trees));
  r.finish();
}

}  // namespace proctor::bench
