// proctor-bench: measures, in one run and on a fresh data directory (fsync on), what the
// docs/benchmarks.md's claims rest on:
//   (a) the limit: raw RocksDB group commit — one writer, WriteBatches of 1000 records the
//       size of a journaled no-op step, sync = true;
//   (b) durable step throughput: N procedures x S no-op steps, submit -> SUCCESS;
//   (c) latency of one-step procedures, submit -> SUCCESS, open loop at about half the
//       maximum one-step rate: p50 / p99 / p999, beside the floor the disk sets at that
//       rate (raw RocksDB, two chained group-committed synced writes per arrival);
//   (d) recovery: M procedures suspended on an event, the node SIGKILLed, then the time
//       until a new node has rehydrated all of them;
//   (e) resident-memory growth per waiting procedure at that M;
//   (f) fan-out: one root with C children, submit -> SUCCESS;
//   (g) remote fan-out: one root on proctord a with R children on proctord b (three
//       proctord processes on loopback), submit -> SUCCESS;
//   (h) steps/s of T roots x K children x S steps spread over three proctord processes,
//       beside the same roots on one proctord: the ratio and what bounds it (docs/benchmarks.md);
//   (i) takeover: M procedures waiting on events journaled, proctord active and standby on
//       that directory, SIGKILL of the active to the first step the standby commits;
//   (j) timers: T timer procedures due within one second, their trees passivated first:
//       resident memory per passivated waiter, procedures resumed per second, lateness,
//       and the floor: actors/s that only spawn, take a message, answer and exit;
//   (k) replica failover: M procedures waiting on events submitted to node b run as three
//       replicas (and, for the ratio, to one proctord), SIGKILL of the leader to the first
//       step the new leader commits;
//   (n) steps run by 8 external workers over HTTP (poll, complete) beside the same number of
//       procedures with in-node steps, and dispatch-to-worker latency (phases_workers.cpp).
//
// Every phase runs in a forked child process (fresh heap, fresh actor system, its own
// subdirectory of --data-dir) and sends its figures back through a pipe, one "key value"
// line each. The parent never creates an actor system or a thread, so forking stays safe,
// and it can SIGKILL a child (the crash of phase d, or a phase that overruns its deadline).
// Clients run in-process as actors of the child's actor system: no CAF networking. (g),
// (h), (i) and (k) start proctord processes (the binary beside this one) from their phase's
// child (apps/bench/processes.cpp). Each phase child leads its own process group, which its
// proctords share; when the phase ends (done, failed or overrun) the group is killed and
// reaped, and a process whose parent dies gets SIGKILL (PR_SET_PDEATHSIG): no process the
// benchmark starts outlives it.
//
// The code: apps/bench/bench.hpp (shared declarations), apps/bench/children.cpp (the child
// processes and the helpers used inside them), apps/bench/clients.cpp (burst clients and the
// open-loop pacer), apps/bench/phases_write.cpp (a, b, c), apps/bench/phases_wait.cpp (d, e,
// f), apps/bench/phases_nodes.cpp (g, h), apps/bench/phases_standby.cpp (i),
// apps/bench/phases_replicas.cpp (k); this file holds
// the output formatting and main().
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "bench/bench.hpp"
#include "bench/report.hpp"

using namespace proctor::bench;

static int run_main(int argc, char** argv) {
  bench_options o;
  CLI::App app{"proctor-bench: durable-step throughput, latency, recovery, memory and fan-out "
               "of an in-process Proctor node, against raw RocksDB group commit (fsync on)"};
  app.add_option("--data-dir", o.data_dir, "Directory for the run (must be empty or missing)")
    ->required();
  app.add_flag("--json", o.json, "Print one JSON object on stdout (the table goes to stderr)");
  auto* opt_n = app.add_option("--procedures", o.procedures, "(b) procedures N (default 20000)");
  app.add_option("--steps", o.steps, "(b) no-op steps per procedure S")->check(CLI::Range(1, 1000));
  app.add_flag("--ledger", o.ledger,
               "(b) with demo.ledger instead of demo.noop: one file per step, steps on workers");
  auto* opt_m =
    app.add_option("--waiting", o.waiting, "(d,e) waiting procedures M (default 100000)");
  auto* opt_c =
    app.add_option("--children", o.children, "(f) children of the wide root C (default 10000)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--workers", o.workers, "Run slots of each node (default 2)")
    ->check(CLI::Range(1, 256));
  app
    .add_option("--latency-seconds", o.latency_seconds,
                "(c) measured seconds (after 0.5 s warm-up)")
    ->check(CLI::Range(0.1, 600.0));
  app.add_option("--latency-rate", o.latency_rate,
                 "(c) one-step procedures/s (default: half the measured maximum)");
  app.add_option("--raw-seconds", o.raw_seconds, "(a) seconds of raw RocksDB writes")
    ->check(CLI::Range(0.1, 600.0));
  app.add_option("--fanout-timeout", o.fanout_timeout, "(f) give up after this many seconds")
    ->check(CLI::Range(1.0, 3600.0));
  app.add_option(
    "--phases", o.phases,
    "Measures to run, e.g. 'bf' (profiling); d and e run together (default abcdefghijklmn)");
  app.add_option("--timers", o.timers, "(j) timers due within one second (default 1000000)")
    ->check(CLI::Range(1, 10000000));
  auto* opt_r = app
                  .add_option("--remote-children", o.remote_children,
                              "(g) children on the other node (default 10000)")
                  ->check(CLI::Range(1, 1000000));
  auto* opt_t = app.add_option("--spread-roots", o.spread_roots, "(h) roots T (default 100)")
                  ->check(CLI::Range(1, 100000));
  app.add_option("--spread-children", o.spread_children, "(h) children per root K (default 50)")
    ->check(CLI::Range(1, 100000));
  app.add_option("--spread-steps", o.spread_steps, "(h) steps per child S (default 10)")
    ->check(CLI::Range(1, 1000));
  auto* opt_l =
    app.add_option("--loops", o.loops, "(l) passes of the self-compacting loop L (default 100000)")
      ->check(CLI::Range(size_t{100}, size_t{100000000}));
  app
    .add_option("--loop-compact-after", o.loop_compact_after,
                "(l) records its tree holds before it is compacted (default 1000)")
    ->check(CLI::Range(uint64_t{2}, uint64_t{1} << 40));
  app
    .add_option("--election-timeout-ms", o.election_timeout_ms,
                "(k) the replicas' --election-timeout-ms (default: proctord's)")
    ->check(CLI::Range(100u, 60'000u));
  app
    .add_option("--soak-seconds", o.soak_seconds,
                "(k) steps driven through the group for this long before the SIGKILL, its "
                "elections counted (default 0)")
    ->check(CLI::Range(0.0, 86400.0));
  app.add_flag("--quick", o.quick,
               "Small sizes for CI: N=2000, M=5000, C=1000, R=1000, T=10, L=20000");
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    if (opt_n->count() == 0)
      o.procedures = 2000;
    if (opt_m->count() == 0)
      o.waiting = 5000;
    if (opt_c->count() == 0)
      o.children = 1000;
    if (opt_r->count() == 0)
      o.remote_children = 1000;
    if (opt_t->count() == 0)
      o.spread_roots = 10;
    if (opt_l->count() == 0)
      o.loops = 20000;
    o.timers = std::min<size_t>(o.timers, 20000);
    o.raw_seconds = std::min(o.raw_seconds, 1.0);
    o.latency_seconds = std::min(o.latency_seconds, 1.0);
  }
  if (o.procedures == 0 || o.waiting == 0) {
    std::cerr << "proctor-bench: --procedures and --waiting must be positive\n";
    return 64;
  }

  // Every process a phase starts is this one's descendant; one its parent left behind (a
  // phase child killed at its deadline) becomes this one's child, so that run_phase can reap
  // it: nothing the benchmark started outlives it (apps/bench/children.cpp).
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  // A fresh data directory: refuse anything that is not empty.
  std::error_code ec;
  fs::path root(o.data_dir);
  if (fs::exists(root, ec)) {
    if (!fs::is_directory(root, ec)) {
      std::cerr << "proctor-bench: --data-dir " << o.data_dir << " exists and is not a directory\n";
      return 64;
    }
    if (fs::directory_iterator(root, ec) != fs::directory_iterator()) {
      std::cerr << "proctor-bench: --data-dir " << o.data_dir
                << " is not empty; the benchmark needs a fresh directory (remove it or pick "
                   "another)\n";
      return 64;
    }
  }
  fs::create_directories(root, ec);
  if (ec) {
    std::cerr << "proctor-bench: cannot create " << o.data_dir << ": " << ec.message() << '\n';
    return 64;
  }
  auto sub = [&](const char* name) { return (root / name).string(); };

  // Engine logs go to stderr, warnings and worse only (inherited by every child).
  auto logger = spdlog::stderr_color_mt("proctor-bench");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::warn);

  auto progress = [&](const std::string& what, const phase_result& p) {
    std::cerr << "proctor-bench: " << what << (p.ok ? " done" : " FAILED") << " in "
              << fmt_num(p.wall_s, 2) << " s" << (p.ok ? "" : ": " + p.error) << '\n';
  };
  auto t_run = clk::now();

  auto want = [&](const char* letters) {
    return o.phases.find_first_of(letters) != std::string::npos;
  };
  bench_run res;  // every phase "not run" until it runs
  auto &raw = res.raw, &steps = res.steps, &cal = res.cal, &lat = res.lat, &floor = res.floor,
       &pop = res.pop, &rec = res.rec, &fan = res.fan, &remote = res.remote, &spread = res.spread;
  if (want("a")) {
    raw =
      run_phase("(a) raw RocksDB", 60, false, [&](reporter& r) { phase_raw(r, o, sub("raw")); });
    progress("(a) raw RocksDB group commit", raw);
  }
  if (want("b")) {
    steps = run_phase("(b) durable steps", 120, false,
                      [&](reporter& r) { phase_steps(r, o, sub("steps")); });
    progress("(b) durable steps", steps);
  }
  if (want("c")) {
    double rate = o.latency_rate;
    if (rate <= 0) {
      cal = run_phase("(c) calibration", 60, false,
                      [&](reporter& r) { phase_latency_calibrate(r, o, sub("latency-max")); });
      progress("(c) maximum one-step rate", cal);
      if (cal.ok)
        rate = *cal.num("max_rate") / 2;
    }
    if (rate > 0) {
      lat = run_phase("(c) latency", 60 + o.latency_seconds, false,
                      [&](reporter& r) { phase_latency(r, o, sub("latency"), rate); });
      progress("(c) latency", lat);
      floor = run_phase("(c) floor", 60 + o.latency_seconds, false, [&](reporter& r) {
        phase_latency_floor(r, o, sub("latency-floor"), rate);
      });
      progress("(c) floor: raw RocksDB at the same rate", floor);
    } else {
      lat.error = "no rate: " + cal.error;
    }
  }
  if (want("de")) {
    pop = run_phase("(d) populate", 180, true,
                    [&](reporter& r) { phase_populate(r, o, sub("recovery")); });
    progress("(d) " + std::to_string(o.waiting) + " waiting procedures, then SIGKILL", pop);
    if (pop.ok) {
      auto last_id = static_cast<uint64_t>(*pop.num("max_id"));
      rec = run_phase("(d) recovery", 180, false,
                      [&](reporter& r) { phase_recover(r, o, sub("recovery"), last_id); });
    } else {
      rec.error = "skipped: populating failed";
    }
    progress("(d,e) recovery", rec);
  }
  if (want("f")) {
    fan = run_phase("(f) fan-out", o.fanout_timeout, false,
                    [&](reporter& r) { phase_fanout(r, o, sub("fanout")); });
    progress("(f) fan-out", fan);
  }
  if (want("g")) {
    remote = run_phase("(g) remote fan-out", 600, false,
                       [&](reporter& r) { phase_remote_fanout(r, o, sub("remote")); });
    progress("(g) remote fan-out", remote);
  }
  auto& takeover = res.takeover;
  if (want("i")) {
    auto pop_i = run_phase("(i) populate", 180, true,
                           [&](reporter& r) { phase_takeover_populate(r, o, sub("takeover")); });
    progress("(i) " + std::to_string(o.waiting) + " waiting procedures, then SIGKILL", pop_i);
    if (pop_i.ok) {
      takeover = run_phase("(i) takeover", 600, false,
                           [&](reporter& r) { phase_takeover(r, o, sub("takeover")); });
    } else {
      takeover.error = "skipped: populating failed: " + pop_i.error;
    }
    progress("(i) takeover by a standby", takeover);
  }
  auto& timers = res.timers;
  auto& timers_pop = res.timers_pop;
  if (want("j")) {
    timers_pop = run_phase("(j) populate", 900, true,
                           [&](reporter& r) { phase_timers_populate(r, o, sub("timers")); });
    progress("(j) " + std::to_string(o.timers) + " timers passivated, then SIGKILL", timers_pop);
    if (timers_pop.ok) {
      auto first_at = static_cast<int64_t>(*timers_pop.num("first_at_ms"));
      timers = run_phase("(j) recovery and firing", 900, false,
                         [&](reporter& r) { phase_timers_recover(r, o, sub("timers"), first_at); });
    } else {
      timers.error = "skipped: populating failed: " + timers_pop.error;
    }
    progress("(j) " + std::to_string(o.timers) + " timers due within one second", timers);
  }
  auto& failover = res.failover;
  if (want("k")) {
    failover = run_phase("(k) replica failover", 900, false,
                         [&](reporter& r) { phase_replica_failover(r, o, sub("replicas")); });
    progress("(k) failover of a replica group", failover);
  }
  if (want("h")) {
    spread = run_phase("(h) three nodes beside one", 1200, false,
                       [&](reporter& r) { phase_spread(r, o, sub("spread")); });
    progress("(h) three nodes beside one", spread);
  }
  auto& placing = res.placing;
  if (want("m")) {
    placing = run_phase("(m) placement by key", 600, false,
                        [&](reporter& r) { phase_placement(r, o, sub("placement")); });
    progress("(m) placement by key", placing);
  }
  if (want("n")) {
    res.workers = run_phase("(n) HTTP workers", 600, false,
                            [&](reporter& r) { phase_workers(r, o, sub("workers")); });
    progress("(n) HTTP workers", res.workers);
  }
  // (l): the loop L times and L / 100 times in trees that compact, L / 100 times in one that
  // does not; each recovered after a SIGKILL.
  auto& loop_runs = res.loops;
  const size_t small_loops = std::max<size_t>(100, o.loops / 100);
  if (want("l")) {
    auto loop = [&](const std::string& key, size_t loops, uint64_t compact_after) {
      auto& lr = loop_runs[key];
      auto d = sub(("loop-" + key).c_str());
      lr.pop = run_phase("(l) loop " + key, 3600, true,
                         [&](reporter& r) { phase_loop_populate(r, o, d, loops, compact_after); });
      if (!lr.pop.ok)
        return;
      auto id = static_cast<uint64_t>(*lr.pop.num("id"));
      lr.rec = run_phase("(l) recovery " + key, 300, false, [&](reporter& r) {
        phase_loop_recover(r, o, d, id, loops, compact_after);
      });
    };
    loop("small", small_loops, o.loop_compact_after);
    loop("big", o.loops, o.loop_compact_after);
    loop("uncompacted", small_loops, 0);
    progress("(l) a loop of " + std::to_string(o.loops),
             loop_runs["big"].rec.ok ? loop_runs["big"].rec : loop_runs["big"].pop);
  }
  res.total_s = secs(clk::now() - t_run);
  return report_run(o, res);
}

int main(int argc, char** argv) {
  // What escapes is a bug of ours: one line rather than an abort's core dump.
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "proctor-bench: internal error: " << e.what() << "\n";
    return 70;
  }
}
