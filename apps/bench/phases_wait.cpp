// proctor-bench, the phases around waiting procedures, each run in a child process of its
// own: (d) populate M procedures suspended on an event (the parent then SIGKILLs the node),
// (d, e) recovery on a new node and the resident memory per waiting procedure, and (f) the
// fan-out of one root to C children.
#include <malloc.h>
#if PROCTOR_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include <proctor/wire.pb.h>

#include "bench.hpp"

namespace proctor::bench {

// -- the phases (each runs in its own child process) ---------------------------------------

/// Returns the allocator's free pages to the OS.
void release_free_memory() {
#if PROCTOR_HAVE_JEMALLOC
#define PROCTOR_STR2(x) #x
#define PROCTOR_STR(x) PROCTOR_STR2(x)
  ::mallctl("arena." PROCTOR_STR(MALLCTL_ARENAS_ALL) ".purge", nullptr, nullptr, nullptr, 0);
#undef PROCTOR_STR
#undef PROCTOR_STR2
#else
  ::malloc_trim(0);
#endif
}

size_t heap_allocated_bytes() {
#if PROCTOR_HAVE_JEMALLOC
  uint64_t epoch = 1;
  size_t len = sizeof(epoch);
  ::mallctl("epoch", &epoch, &len, &epoch, len);
  size_t allocated = 0;
  len = sizeof(allocated);
  if (::mallctl("stats.allocated", &allocated, &len, nullptr, 0) != 0)
    return 0;
  return allocated;
#else
  return 0;
#endif
}

namespace {

/// Polls the executor's gauge `name` until it reaches `m`.
void wait_for_gauge(caf::scoped_actor& self, const caf::actor& exec, const char* name, size_t m,
                    double timeout_s) {
  auto t0 = clk::now();
  for (;;) {
    auto text = call(self, exec, metrics_req()).text();
    auto w = metric(text, name);
    if (w >= static_cast<double>(m))
      return;
    if (secs(clk::now() - t0) > timeout_s)
      throw std::runtime_error(std::string(name) + " is " + std::to_string(static_cast<long>(w))
                               + ", not " + std::to_string(m) + ", after "
                               + std::to_string(static_cast<int>(timeout_s)) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

void wait_for_waiting(caf::scoped_actor& self, const caf::actor& exec, size_t m, double timeout_s) {
  wait_for_gauge(self, exec, "proctor_waiting_procedures", m, timeout_s);
}

}  // namespace

/// (d, first half) M demo.wait_event procedures, each on a key of its own; reports once all
/// are WAITING (their Suspended records are durable by then). The parent then SIGKILLs it.
void phase_populate(reporter& r, const bench_options& o, const std::string& dir) {
  node_in_child nc;
  auto rss0 = rss_bytes();
  nc.start(dir, o.workers);
  auto t0 = clk::now();
  auto res = run_burst(
    *nc.sys, nc.exec(), o.waiting, 20000,
    [](size_t i) {
      return submit_req("demo.wait_event", "{\"key\":\"evt-" + std::to_string(i) + "\"}");
    },
    false);
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  caf::scoped_actor self{*nc.sys};
  wait_for_waiting(self, nc.exec(), o.waiting, 120);
  auto el = secs(clk::now() - t0);
  auto rss1 = rss_bytes();
  // Then they passivate (executor_config::passivate_after): their actors go.
  wait_for_gauge(self, nc.exec(), "proctor_passivated_roots", o.waiting, 120);
  // The actors' memory is free now but stays resident in malloc's arenas until reused (or,
  // with jemalloc, until its decay timer returns it); return the free pages to the OS now to
  // see what the passivated procedures still hold.
  release_free_memory();
  auto rss2 = rss_bytes();
  auto per_proc = [&](size_t rss) {
    return (static_cast<double>(rss) - static_cast<double>(rss0)) / static_cast<double>(o.waiting);
  };
  r.put("seconds", el);
  r.put("min_id", static_cast<double>(res.min_id));
  r.put("max_id", static_cast<double>(res.max_id));
  r.put("bytes_per_proc", per_proc(rss1));
  r.put("bytes_per_proc_passivated", per_proc(rss2));
  r.finish();  // waits for the SIGKILL: no clean shutdown
}

/// (d, second half) and (e): a new node on the crashed node's directory. Rehydrated = every
/// one of the M procedures is WAITING on its event again and listed so by the executor:
/// roots that only wait for an event come back passivated (no actor; the event restarts
/// them from the journal). After the clock stops, events wake a sample of them, to show
/// they really were rehydrated (and how fast passivated roots wake).
void phase_recover(reporter& r, const bench_options& o, const std::string& dir, uint64_t last_id) {
  node_in_child nc;
  auto rss0 = rss_bytes();
  auto t0 = clk::now();
  nc.start(dir, o.workers);
  auto t_started = clk::now();
  auto rss_started = rss_bytes();
  caf::scoped_actor self{*nc.sys};
  auto exec = nc.exec();
  // 1. The gauge reaches M; 2. the last root spawned at recovery has reported "event ..."
  // itself; 3. a list (processed after every message already queued at the executor)
  // confirms that all M did. The clock stops when the confirming request was sent.
  wait_for_waiting(self, exec, o.waiting, 120);
  auto t_gauge = clk::now();
  for (;;) {
    auto s = call(self, exec, status_req(last_id));
    if (s.code() != proctor::pb::Response::OK)
      throw std::runtime_error("status of procedure " + std::to_string(last_id) + ": " + s.error());
    if (!s.status().waiting_for().empty())
      break;
    if (secs(clk::now() - t0) > 120)
      throw std::runtime_error("procedure " + std::to_string(last_id) + " not rehydrated");
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  clk::time_point t_end;
  size_t rss1 = 0;
  size_t confirmed = 0;
  for (;;) {
    t_end = clk::now();
    rss1 = rss_bytes();
    auto l = call(self, exec, list_req(proctor::pb::WAITING));
    confirmed = 0;
    for (const auto& p : l.list())
      confirmed += p.waiting_for().rfind("event ", 0) == 0 ? 1 : 0;
    if (confirmed >= o.waiting)
      break;
    if (secs(clk::now() - t0) > 120)
      throw std::runtime_error("only " + std::to_string(confirmed) + " of "
                               + std::to_string(o.waiting) + " procedures rehydrated");
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  auto el = secs(t_end - t0);
  auto sample = std::min<size_t>(1000, o.waiting);
  auto t_wake = clk::now();
  for (size_t i = 0; i < sample; ++i) {
    auto key = "evt-" + std::to_string(i * (o.waiting / sample));
    auto e = call(self, exec, event_req(key, "1"));
    if (e.text().find("delivered to 1 ") == std::string::npos)
      throw std::runtime_error("event " + key + ": " + e.error() + e.text());
  }
  for (;;) {
    auto l = call(self, exec, list_req(proctor::pb::SUCCESS));
    if (static_cast<size_t>(l.list_size()) >= sample)
      break;
    if (secs(clk::now() - t_wake) > 120)
      throw std::runtime_error("only " + std::to_string(l.list_size()) + " of "
                               + std::to_string(sample) + " woken procedures succeeded");
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  r.put("woken", static_cast<double>(sample));
  r.put("wake_s", secs(clk::now() - t_wake));
  r.put("seconds", el);
  r.put("start_s", secs(t_started - t0));
  r.put("gauge_s", secs(t_gauge - t0));
  r.put("open_s", nc.report.open_seconds);
  r.put("scan_s", nc.report.scan_seconds);
  r.put("procs_per_s", static_cast<double>(o.waiting) / el);
  r.put("procedures", static_cast<double>(nc.report.procedures));
  r.put("records", static_cast<double>(nc.report.records));
  r.put("bytes_per_proc",
        (static_cast<double>(rss1) - static_cast<double>(rss0)) / static_cast<double>(o.waiting));
  r.put("bytes_per_proc_at_start", (static_cast<double>(rss_started) - static_cast<double>(rss0))
                                     / static_cast<double>(o.waiting));
  r.put("rss_before", static_cast<double>(rss0));
  r.put("rss_after", static_cast<double>(rss1));
  r.finish();
}

/// (f) one demo.fanout root with C children of one step each, submit -> SUCCESS.
void phase_fanout(reporter& r, const bench_options& o, const std::string& dir) {
  node_in_child nc;
  nc.start(dir, o.workers);
  caf::scoped_actor self{*nc.sys};
  auto exec = nc.exec();
  auto t0 = clk::now();
  auto s = call(self, exec,
                submit_req("demo.fanout",
                           "{\"children\":" + std::to_string(o.children) + ",\"child_steps\":1}"));
  if (s.code() != proctor::pb::Response::OK)
    throw std::runtime_error("submit refused: " + s.error());
  auto w = call(self, exec, wait_req(s.id()), caf::duration{std::chrono::seconds{3600}});
  auto el = secs(clk::now() - t0);
  if (w.status().state() != proctor::pb::SUCCESS)
    throw std::runtime_error("fan-out root ended " + proctor::pb::ProcState_Name(w.status().state())
                             + ": " + w.status().error());
  r.put("seconds", el);
  r.finish();
}

}  // namespace proctor::bench
