// proctor-bench's report (report.hpp).
#include "report.hpp"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "persistence/actor_messages.hpp"

namespace proctor::bench {

std::string fmt_num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  // thousands separators on the integer part
  std::string s = buf;
  auto dot = s.find('.');
  auto int_end = dot == std::string::npos ? s.size() : dot;
  size_t start = (s[0] == '-') ? 1 : 0;
  for (auto i = static_cast<long>(int_end) - 3; i > static_cast<long>(start); i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

namespace {

std::string json_num(const std::optional<double>& v, int decimals = 0) {
  if (!v || !std::isfinite(*v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, *v);
  return buf;
}

/// What report_costs put under `prefix` in `p`, for the table.
std::string cost_text(const phase_result& p, const char* prefix) {
  auto one = [&](const std::string& what) {
    return fmt_num(p.num(std::string{prefix} + what).value_or(0), 2);
  };
  std::string by_actor;
  for (size_t k = 0; k < actor_kinds; ++k) {
    std::string actor = actor_kind_name(static_cast<actor_kind>(k));
    by_actor += (k == 0 ? "" : ", ") + actor + " " + one("messages_" + actor);
  }
  return one("records") + " records, " + one("writes") + " writes, " + one("spawns") + " actors, "
         + one("allocations") + " allocations, " + one("messages") + " messages (" + by_actor + ")";
}

std::string verdict(bool pass) {
  return pass ? "PASS" : "MISS";
}

}  // namespace

int report_run(const bench_options& o, bench_run& res) {
  auto& out = o.json ? std::cerr : std::cout;
  auto want = [&](const char* letters) {
    return o.phases.find_first_of(letters) != std::string::npos;
  };
  auto &raw = res.raw, &steps = res.steps, &cal = res.cal, &lat = res.lat, &floor = res.floor,
       &pop = res.pop, &rec = res.rec, &fan = res.fan, &remote = res.remote, &spread = res.spread,
       &takeover = res.takeover, &timers = res.timers, &timers_pop = res.timers_pop,
       &failover = res.failover, &placing = res.placing, &workers = res.workers;
  auto& loop_runs = res.loops;
  const double total_s = res.total_s;

  // -- figures ------------------------------------------------------------------------------
  auto get = [](const phase_result& p, const char* k) -> std::optional<double> {
    return p.ok ? p.num(k) : std::nullopt;
  };
  auto ratio_of = [&](const phase_result& p, const char* a,
                      const char* b) -> std::optional<double> {
    auto x = get(p, a), y = get(p, b);
    return x && y && *y > 0 ? std::optional<double>(*x / *y) : std::nullopt;
  };
  auto raw_rps = get(raw, "records_per_s");
  auto steps_ps = get(steps, "steps_per_s");
  auto procs_ps = get(steps, "procs_per_s");
  auto p50 = get(lat, "p50_us"), p99 = get(lat, "p99_us"), p999 = get(lat, "p999_us");
  auto rec_ps = get(rec, "procs_per_s");
  auto bytes = get(rec, "bytes_per_proc");
  auto fan_s = get(fan, "seconds");

  // -- table --------------------------------------------------------------------------------
  auto row = [&](const std::string& what, const std::string& result, const std::string& target) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%-46s %-34s %s\n", what.c_str(), result.c_str(),
                  target.c_str());
    out << buf;
  };
  auto failed = [](const phase_result& p) { return "failed: " + p.error; };
  out << "\nproctor-bench  data-dir " << o.data_dir << "  workers " << o.workers << "  N "
      << o.procedures << "  S " << o.steps << "  M " << o.waiting << "  C " << o.children
      << "  (fsync on)\n\n";
  row("measure", "result", "target");
  if (want("a"))
    row("(a) raw RocksDB, sync batches of 1000 x " + fmt_num(raw.num("value_bytes").value_or(0))
          + " B",
        raw_rps ? fmt_num(*raw_rps) + " records/s" : failed(raw),
        raw_rps ? "(" + fmt_num(*raw.num("batch_ms"), 2) + " ms per synced batch)" : "");
  if (want("a") && raw_rps)
    row("    synced write: batch of 1000 p99 / 1 record p50, p99",
        fmt_num(raw.num("batch_p99_us").value_or(0)) + " / "
          + fmt_num(raw.num("one_p50_us").value_or(0)) + ", "
          + fmt_num(raw.num("one_p99_us").value_or(0)) + " us",
        "");
  if (!want("b")) {
  } else if (steps_ps) {
    double ratio = raw_rps ? *steps_ps / *raw_rps : 0;
    row("(b) durable steps, " + fmt_num(static_cast<double>(o.procedures)) + " x "
          + std::to_string(o.steps) + (o.ledger ? " ledger" : " no-op"),
        fmt_num(*steps_ps) + " steps/s",
        raw_rps ? ">= 40% of (a): " + fmt_num(ratio * 100, 1) + "% " + verdict(ratio >= 0.4)
                : "(no (a) to compare)");
    row("    procedures", fmt_num(*procs_ps) + " procs/s", "");
    auto b = steps.num("journal_batches").value_or(0);
    auto recs = steps.num("journal_records").value_or(0);
    if (b > 0)
      row("    journal", fmt_num(b) + " synced batches, " + fmt_num(recs / b, 1) + " rec/batch",
          fmt_num(steps.num("journal_fsync_us").value_or(0) / 1e6, 2) + " s in synced writes of "
            + fmt_num(steps.num("seconds").value_or(0), 2) + " s");
    row("    each procedure cost", cost_text(steps, "cost_"), "");
    row("    each step cost", cost_text(steps, "step_cost_"), "");
  } else {
    row("(b) durable steps", failed(steps), "");
  }
  if (!want("c")) {
  } else if (p99) {
    row("(c) one-step latency at " + fmt_num(*lat.num("rate")) + "/s"
          + (cal.num("max_rate") ? " (max " + fmt_num(*cal.num("max_rate")) + "/s)" : ""),
        "p50 " + fmt_num(*p50) + "  p99 " + fmt_num(*p99) + "  p999 " + fmt_num(*p999) + " us",
        "p99 <= 5,000 us " + verdict(*p99 <= 5000));
    row("    samples",
        fmt_num(*lat.num("count")) + " at " + fmt_num(*lat.num("achieved_rate")) + "/s, max "
          + fmt_num(*lat.num("max_us")) + " us",
        "the process's CPU: " + fmt_num(*lat.num("cpu_busy"), 2) + " cores busy"
          + (cal.num("cpu_busy") ? " (" + fmt_num(*cal.num("cpu_busy"), 2) + " at the max)" : ""));
    if (auto ack = lat.num("ack_p99_us"))
      row("    its parts, p50 / p99",
          "submit to ack " + fmt_num(*lat.num("ack_p50_us")) + " / " + fmt_num(*ack)
            + ", ack to end " + fmt_num(*lat.num("end_p50_us")) + " / "
            + fmt_num(*lat.num("end_p99_us")) + " us",
          "sent late " + fmt_num(*lat.num("late_p50_us")) + " / " + fmt_num(*lat.num("late_p99_us"))
            + " us (not in the latency); synced writes p99 <= "
            + fmt_num(*lat.num("journal_p99_fsync_us")) + " us; the slowest 1 % sent in "
            + fmt_num(*lat.num("tail_windows")) + " windows of 10 ms");
    if (auto b = lat.num("journal_batches"); b && *b > 0)
      row("    journal (whole run, warm-up included)",
          fmt_num(*b) + " synced writes, slowest <= " + fmt_num(*lat.num("journal_max_fsync_us"))
            + " us",
          fmt_num(*lat.num("journal_slow_writes")) + " over "
            + fmt_num(static_cast<double>(proctor::slow_write_us) / 1000.0) + " ms");
  } else {
    row("(c) one-step latency", failed(lat), "");
  }
  if (want("c") && floor.ok) {
    auto fp99 = *floor.num("p99_us");
    row("    floor: raw RocksDB, 2 synced writes each",
        "p50 " + fmt_num(*floor.num("p50_us")) + "  p99 " + fmt_num(fp99) + "  p999 "
          + fmt_num(*floor.num("p999_us")) + " us",
        p99 && fp99 > 0 ? "p99 " + fmt_num(*p99 / fp99, *p99 >= fp99 ? 1 : 2) + " x the floor's"
                        : "");
    row("    floor: its synced writes",
        fmt_num(*floor.num("writes")) + ", slowest " + fmt_num(*floor.num("slowest_write_us"))
          + " us",
        "p50 " + fmt_num(*floor.num("write_p50_us")) + ", p99 "
          + fmt_num(*floor.num("write_p99_us")) + " us");
  } else if (want("c") && !floor.error.empty() && lat.ok) {
    row("    floor: raw RocksDB at the same rate", failed(floor), "");
  }
  if (!want("de")) {
  } else if (rec_ps) {
    row("(d) recovery of " + fmt_num(static_cast<double>(o.waiting)) + " waiting, after SIGKILL",
        fmt_num(*rec_ps) + " procs/s (" + fmt_num(*rec.num("seconds"), 3) + " s)",
        ">= 200,000 procs/s " + verdict(*rec_ps >= 200000));
    row("    node.start() returned / gauge at M",
        fmt_num(*rec.num("start_s"), 3) + " s / " + fmt_num(*rec.num("gauge_s"), 3) + " s",
        fmt_num(*rec.num("records")) + " records scanned");
    row("    of which journal open / scan and fold",
        fmt_num(*rec.num("open_s"), 3) + " s / " + fmt_num(*rec.num("scan_s"), 3) + " s",
        "(open replays the WAL)");
    row("    populating them", fmt_num(*pop.num("seconds"), 2) + " s", "");
    row("    then events woke " + fmt_num(rec.num("woken").value_or(0)) + " of them",
        fmt_num(rec.num("wake_s").value_or(0), 3) + " s", "(event -> SUCCESS)");
  } else {
    row("(d) recovery", failed(pop.ok ? rec : pop), "");
  }
  if (!want("de")) {
  } else if (bytes) {
    row("(e) RSS growth per waiting procedure", fmt_num(*bytes) + " B (recovered node)",
        "<= 2,048 B " + verdict(*bytes <= 2048));
    row("    of which when node.start() returned",
        fmt_num(*rec.num("bytes_per_proc_at_start")) + " B", "(journal opened and folded)");
    row("    on the node that submitted them",
        fmt_num(pop.num("bytes_per_proc").value_or(0)) + " B / "
          + fmt_num(pop.num("bytes_per_proc_passivated").value_or(0)) + " B",
        "(all WAITING / all passivated, free pages purged)");
  } else {
    row("(e) memory per waiting procedure", failed(pop.ok ? rec : pop), "");
  }
  if (!want("f")) {
  } else if (fan_s) {
    row("(f) one root with " + fmt_num(o.children) + " children", fmt_num(*fan_s, 3) + " s",
        "<= 1 s " + verdict(*fan_s <= 1.0));
  } else {
    row("(f) one root with " + fmt_num(o.children) + " children", failed(fan), "<= 1 s MISS");
  }
  auto remote_ps = get(remote, "children_per_s");
  if (!want("g")) {
  } else if (remote_ps) {
    row("(g) one root, " + fmt_num(static_cast<double>(o.remote_children))
          + " children on another node",
        fmt_num(*remote_ps) + " children/s (" + fmt_num(*remote.num("seconds"), 2) + " s)",
        ">= 20,000/s " + verdict(*remote_ps >= 20000));
  } else {
    row("(g) remote fan-out", failed(remote), ">= 20,000/s MISS");
  }
  auto three_ps = get(spread, "three_nodes_steps_per_s");
  auto one_ps = get(spread, "one_node_steps_per_s");
  if (!want("h")) {
  } else if (three_ps && one_ps) {
    row("(h) " + fmt_num(static_cast<double>(o.spread_roots)) + " x "
          + std::to_string(o.spread_children) + " children x " + std::to_string(o.spread_steps)
          + " steps, three nodes",
        fmt_num(*three_ps) + " steps/s", "ratio to one node: " + fmt_num(*three_ps / *one_ps, 2));
    row("    the same on one node", fmt_num(*one_ps) + " steps/s", "(nodes share this machine)");
    for (const char* which : {"three", "one"}) {
      auto w = [&](const char* what) {
        return spread.num(std::string{which} + "_" + what).value_or(0);
      };
      row(std::string{"    per child step, "} + (which[0] == 't' ? "three nodes" : "one node"),
          fmt_num(w("cpu_us_per_step"), 1) + " us CPU, " + fmt_num(w("records_per_step"), 2)
            + " records, " + fmt_num(w("messages_per_step"), 2) + " messages",
          "synced writes: " + fmt_num(w("writes")) + ", " + fmt_num(w("sync_s"), 2)
            + " s in them (all nodes); " + fmt_num(w("switches_per_step"), 2)
            + " context switches, " + fmt_num(w("lo_packets_per_step"), 3) + " loopback packets ("
            + fmt_num(w("lo_bytes_per_step"), 0) + " B)");
    }
  } else {
    row("(h) three nodes beside one", failed(spread), "");
  }
  auto takeover_s = get(takeover, "seconds");
  if (!want("i")) {
  } else if (takeover_s) {
    row("(i) takeover, " + fmt_num(static_cast<double>(o.waiting)) + " waiting procedures",
        fmt_num(*takeover_s, 2) + " s (standby: " + fmt_num(*takeover.num("standby_ms"), 0)
          + " ms)",
        "SIGKILL to first step; all waiting again: " + fmt_num(*takeover.num("all_back_s"), 2)
          + " s");
  } else {
    row("(i) takeover by a standby", failed(takeover), "");
  }
  auto timers_ps = get(timers, "resumed_per_s");
  if (!want("j")) {
  } else if (timers_ps) {
    row("(j) " + fmt_num(*timers_pop.num("timers")) + " timers due within one second",
        fmt_num(*timers_ps) + " resumed/s",
        fmt_num(*timers.num("cpu_us_per_resumed"), 1) + " us CPU each; late p50/p99/max "
          + fmt_num(*timers.num("late_p50_ms")) + "/" + fmt_num(*timers.num("late_p99_ms")) + "/"
          + fmt_num(*timers.num("late_max_ms")) + " ms");
    row("    recovery of the passivated waiters after SIGKILL",
        fmt_num(*timers.num("recovered_per_s")) + " procs/s",
        fmt_num(*timers.num("recovery_s"), 2) + " s; journal open "
          + fmt_num(*timers.num("open_s"), 2) + " s, scan and fold "
          + fmt_num(*timers.num("scan_s"), 2) + " s");
    row("    resident memory per passivated waiter",
        fmt_num(*timers.num("recovered_bytes_per_waiter")) + " B recovered, "
          + fmt_num(*timers_pop.num("bytes_per_waiter")) + " B where submitted",
        "heap " + fmt_num(*timers.num("recovered_heap_per_waiter")) + " / "
          + fmt_num(*timers_pop.num("heap_per_waiter")) + " B; populated in "
          + fmt_num(*timers_pop.num("populate_s"), 1) + " s");
    row("    floor: actors that only spawn, take one message, answer, exit",
        fmt_num(*timers.num("actor_floor_per_s")) + " actors/s",
        "same actor system, after the firing; bounds resumed/s");
    row("    each resumed procedure cost", cost_text(timers, "cost_"), "");
  } else {
    row("(j) timers due within one second", failed(timers), "");
  }
  auto failover_s = get(failover, "seconds");
  if (!want("k")) {
  } else if (failover_s) {
    row("(k) failover, " + fmt_num(static_cast<double>(o.waiting)) + " waiting procedures",
        fmt_num(*failover_s, 2) + " s",
        "SIGKILL of the leader to the first step; all waiting again: "
          + fmt_num(*failover.num("all_back_s"), 2) + " s");
    row("    its parts", "elected " + fmt_num(*failover.num("elected_s"), 2) + " s",
        "serving (journal recovered) " + fmt_num(*failover.num("serving_s"), 2)
          + " s; elections: " + fmt_num(*failover.num("failover_elections")));
    std::string load = "from the first leader to the SIGKILL, clients busy";
    if (auto soak = failover.num("soak_steps_per_s"))
      load +=
        "; soak of " + fmt_num(o.soak_seconds) + " s at " + fmt_num(*soak)
        + " steps/s, rounds interrupted: " + fmt_num(*failover.num("soak_rounds_interrupted"));
    row("    elections under load", fmt_num(*failover.num("elections_before_kill")), load);
    auto ratio = [&](const std::string& what, const std::string& key, const std::string& unit,
                     const std::string& how, int decimals = 0) {
      auto g = *failover.num("group_" + key), one = *failover.num("single_" + key);
      row("    " + what + ", three replicas", fmt_num(g, decimals) + unit,
          "one proctord: " + fmt_num(one, decimals) + unit + "; ratio " + fmt_num(g / one, 2)
            + how);
    };
    ratio("durable steps", "steps_per_s", " steps/s", " (demo.noop, 32 clients)");
    ratio("CPU per durable step", "cpu_us_per_step", " us", " (the node's processes)", 1);
    ratio("cores busy while stepping", "cores_busy", "",
          " (nodes and clients; this machine has "
            + std::to_string(std::thread::hardware_concurrency()) + ")",
          2);
    ratio("submit to ack p50", "submit_p50_us", " us", " (one client, one after another)");
    ratio("submit to ack p99", "submit_p99_us", " us", "");
    ratio("submits acknowledged", "submits_per_s", "/s",
          " (32 clients, one connection per submit)");
    row("    a new replica in the lost one's place", fmt_num(*failover.num("catch_up_s"), 2) + " s",
        fmt_num(*failover.num("catch_up_mb"), 1)
          + " MB of RocksDB: " + fmt_num(*failover.num("catch_up_mb_per_s"), 1)
          + " MB/s (snapshot, then the log; then a voter)");
  } else {
    row("(k) failover of a replica group", failed(failover), "");
  }
  auto fwd_p50 = get(placing, "forwarded_p50_us");
  auto local_p50 = get(placing, "local_p50_us");
  if (!want("m")) {
  } else if (fwd_p50 && local_p50) {
    row("(m) keys over 2-16 members, most/least loaded",
        fmt_num(*placing.num("keys_max_min_worst"), 3) + " (at "
          + fmt_num(*placing.num("keys_worst_members")) + " members)",
        "100,000 keys; slots " + fmt_num(*placing.num("slots_max_min_worst"), 3) + " (<= 1.25)");
    row("    submit forwarded to the key's owner, p50", fmt_num(*fwd_p50) + " us",
        "asked of its owner: " + fmt_num(*local_p50) + " us; ratio "
          + fmt_num(*fwd_p50 / *local_p50, 2) + " (p99 " + fmt_num(*placing.num("forwarded_p99_us"))
          + " / " + fmt_num(*placing.num("local_p99_us")) + " us)");
    row("    cluster group change on all 5, p50",
        fmt_num(*placing.num("group_change_p50_ms"), 2) + " ms",
        "max " + fmt_num(*placing.num("group_change_max_ms"), 2) + " ms over "
          + fmt_num(*placing.num("group_changes")) + " changes (5 voters, one process)");
  } else {
    row("(m) placement by key", failed(placing), "");
  }
  auto tasks_ps = get(workers, "tasks_per_s");
  if (!want("n")) {
  } else if (tasks_ps) {
    row("(n) tasks through 8 HTTP workers", fmt_num(*tasks_ps) + " /s",
        fmt_num(*workers.num("tasks")) + " one-task procedures; in-node steps "
          + fmt_num(*workers.num("in_node_per_s")) + " /s: ratio "
          + fmt_num(*ratio_of(workers, "tasks_per_s", "in_node_per_s"), 2));
    row("    dispatch to a waiting worker, p50",
        fmt_num(*workers.num("dispatch_p50_ms"), 2) + " ms",
        "p99 " + fmt_num(*workers.num("dispatch_p99_ms"), 2)
          + " ms (from the submit's answer: the step's commit, the lease, the poll's answer)");
  } else {
    row("(n) tasks through HTTP workers", failed(workers), "");
  }
  auto loops_ok = [&](const std::string& k) { return loop_runs[k].pop.ok && loop_runs[k].rec.ok; };
  if (!want("l")) {
  } else if (loops_ok("big") && loops_ok("small") && loops_ok("uncompacted")) {
    auto& big = loop_runs["big"];
    auto& small = loop_runs["small"];
    auto& unc = loop_runs["uncompacted"];
    auto most = *big.pop.num("most_records");
    auto limit = 2.0 * static_cast<double>(o.loop_compact_after);
    row("(l) one procedure looping " + fmt_num(static_cast<double>(o.loops)) + " times",
        fmt_num(*big.pop.num("loops_per_s")) + " loops/s, " + fmt_num(*big.pop.num("compactions"))
          + " compactions",
        "journal at most " + fmt_num(most) + " records (threshold "
          + fmt_num(static_cast<double>(o.loop_compact_after)) + ") " + verdict(most <= limit));
    auto rb = *big.rec.num("back_s"), rs = *small.rec.num("back_s"), ru = *unc.rec.num("back_s");
    row("    recovery after SIGKILL, L / L/100 loops",
        fmt_num(rb, 3) + " s / " + fmt_num(rs, 3) + " s",
        "ratio " + fmt_num(rb / rs, 2) + "; records read " + fmt_num(*big.rec.num("records"))
          + " / " + fmt_num(*small.rec.num("records")) + " "
          + verdict(*big.rec.num("records") <= limit + 16));
    row("    of which scan and fold, L / L/100 loops",
        fmt_num(*big.rec.num("scan_s"), 4) + " s / " + fmt_num(*small.rec.num("scan_s"), 4) + " s",
        "journal open (RocksDB's WAL replay) " + fmt_num(*big.rec.num("open_s"), 3) + " s / "
          + fmt_num(*small.rec.num("open_s"), 3) + " s");
    row("    the same L/100 loops, never compacted", fmt_num(ru, 3) + " s",
        "records read " + fmt_num(*unc.rec.num("records")) + "; scan and fold "
          + fmt_num(*unc.rec.num("scan_s"), 4) + " s");
  } else {
    for (const auto& k : {"small", "big", "uncompacted"})
      if (!loops_ok(k))
        row(std::string("(l) loop ") + k,
            failed(loop_runs[k].pop.ok ? loop_runs[k].rec : loop_runs[k].pop), "");
  }
  out << "\npeer (OpenStack TaskFlow + SQLite, same workload shape): "
         "python3 ../shared/peers/taskflow_bench.py 5 20\n";
  out << "total " << fmt_num(total_s, 1) << " s\n";

  // What each procedure and each step of (b) cost (docs/benchmarks.md, "What a procedure
  // costs"): messages in all, and by kind of actor under messages_by_actor.
  auto costs = [&](const char* prefix, const phase_result& of) {
    auto value = [&](const std::string& what) {
      return json_num(get(of, (prefix + what).c_str()), 2);
    };
    std::string out = "{";
    for (const char* what : {"records", "writes", "spawns", "allocations", "messages"})
      out += std::string{out.size() > 1 ? ", " : ""} + "\"" + what + "\": " + value(what);
    out += ", \"messages_by_actor\": {";
    for (size_t k = 0; k < actor_kinds; ++k) {
      std::string actor = actor_kind_name(static_cast<actor_kind>(k));
      out += (k == 0 ? "\"" : ", \"") + actor + "\": " + value("messages_" + actor);
    }
    return out + "}}";
  };
  if (o.json) {
    std::cout
      << "{\"raw_sync_batch_records_per_s\": " << json_num(raw_rps)
      << ", \"durable_steps_per_s\": " << json_num(steps_ps)
      << ", \"procedures_per_s\": " << json_num(procs_ps)
      << ", \"latency_us\": {\"p50\": " << json_num(p50) << ", \"p99\": " << json_num(p99)
      << ", \"p999\": " << json_num(p999)
      << "}, \"latency_floor_us\": {\"p50\": " << json_num(get(floor, "p50_us"))
      << ", \"p99\": " << json_num(get(floor, "p99_us"))
      << ", \"p999\": " << json_num(get(floor, "p999_us"))
      << ", \"write_p99\": " << json_num(get(floor, "write_p99_us"))
      << "}, \"latency_stages_us\": {\"sent_late_p99\": " << json_num(get(lat, "late_p99_us"))
      << ", \"submit_to_ack_p99\": " << json_num(get(lat, "ack_p99_us"))
      << ", \"ack_to_end_p99\": " << json_num(get(lat, "end_p99_us"))
      << ", \"journal_sync_p99_bound\": " << json_num(get(lat, "journal_p99_fsync_us"))
      << ", \"tail_windows_10ms\": " << json_num(get(lat, "tail_windows"))
      << "}, \"per_procedure\": " << costs("cost_", steps)
      << ", \"per_step\": " << costs("step_cost_", steps)
      << ", \"recovery_procs_per_s\": " << json_num(rec_ps)
      << ", \"bytes_per_waiting_procedure\": " << json_num(bytes)
      << ", \"wide_tree_10k_children_s\": " << json_num(fan_s, 3)
      << ", \"remote_children_per_s\": " << json_num(remote_ps)
      << ", \"spread_three_nodes_steps_per_s\": " << json_num(three_ps)
      << ", \"spread_one_node_steps_per_s\": " << json_num(one_ps)
      << ", \"spread_cpu_us_per_step\": {\"three\": "
      << json_num(get(spread, "three_cpu_us_per_step"), 1)
      << ", \"one\": " << json_num(get(spread, "one_cpu_us_per_step"), 1) << "}"
      << ", \"spread_loopback_packets_per_step\": {\"three\": "
      << json_num(get(spread, "three_lo_packets_per_step"), 3)
      << ", \"one\": " << json_num(get(spread, "one_lo_packets_per_step"), 3) << "}"
      << ", \"spread_switches_per_step\": {\"three\": "
      << json_num(get(spread, "three_switches_per_step"), 2)
      << ", \"one\": " << json_num(get(spread, "one_switches_per_step"), 2) << "}"
      << ", \"takeover_s\": " << json_num(takeover_s, 3)
      << ", \"replica_failover_s\": " << json_num(failover_s, 3)
      << ", \"replica_failover_elected_s\": " << json_num(get(failover, "elected_s"), 3)
      << ", \"replica_failover_serving_s\": " << json_num(get(failover, "serving_s"), 3)
      << ", \"replica_elections_under_load\": " << json_num(get(failover, "elections_before_kill"))
      << ", \"replica_steps_ratio\": "
      << json_num(ratio_of(failover, "group_steps_per_s", "single_steps_per_s"), 2)
      << ", \"replica_cpu_us_per_step\": {\"three\": "
      << json_num(get(failover, "group_cpu_us_per_step"), 1)
      << ", \"one\": " << json_num(get(failover, "single_cpu_us_per_step"), 1) << "}"
      << ", \"replica_cores_busy\": {\"three\": " << json_num(get(failover, "group_cores_busy"), 2)
      << ", \"one\": " << json_num(get(failover, "single_cores_busy"), 2) << "}"
      << ", \"replica_catch_up_mb_per_s\": " << json_num(get(failover, "catch_up_mb_per_s"), 1)
      << ", \"timers_resumed_per_s\": " << json_num(timers_ps)
      << ", \"timers_cpu_us_per_resumed\": " << json_num(get(timers, "cpu_us_per_resumed"), 1)
      << ", \"timers_recovered_per_s\": " << json_num(get(timers, "recovered_per_s"))
      << ", \"bytes_per_passivated_waiter\": "
      << json_num(get(timers, "recovered_bytes_per_waiter"))
      << ", \"timers_actor_floor_per_s\": " << json_num(get(timers, "actor_floor_per_s"))
      << ", \"timers_per_resumed\": " << costs("cost_", timers)
      << ", \"loop_per_s\": " << json_num(get(loop_runs["big"].pop, "loops_per_s"))
      << ", \"loop_most_records\": " << json_num(get(loop_runs["big"].pop, "most_records"))
      << ", \"loop_recovery_s\": " << json_num(get(loop_runs["big"].rec, "back_s"), 3)
      << ", \"placement_keys_max_min\": " << json_num(get(placing, "keys_max_min_worst"), 3)
      << ", \"placement_slots_max_min\": " << json_num(get(placing, "slots_max_min_worst"), 3)
      << ", \"group_change_p50_ms\": " << json_num(get(placing, "group_change_p50_ms"), 2)
      << ", \"group_change_max_ms\": " << json_num(get(placing, "group_change_max_ms"), 2)
      << ", \"forwarded_submit_p50_us\": " << json_num(fwd_p50)
      << ", \"local_keyed_submit_p50_us\": " << json_num(local_p50)
      << ", \"worker_tasks_per_s\": " << json_num(tasks_ps) << ", \"worker_tasks_ratio\": "
      << json_num(ratio_of(workers, "tasks_per_s", "in_node_per_s"), 2)
      << ", \"worker_dispatch_p50_ms\": " << json_num(get(workers, "dispatch_p50_ms"), 2)
      << ", \"worker_dispatch_p99_ms\": " << json_num(get(workers, "dispatch_p99_ms"), 2) << "}"
      << std::endl;
  }
  bool all_ok =
    (raw.ok || !want("a")) && (steps.ok || !want("b")) && (lat.ok || !want("c"))
    && ((pop.ok && rec.ok) || !want("de")) && (fan.ok || !want("f")) && (remote.ok || !want("g"))
    && (spread.ok || !want("h")) && (takeover.ok || !want("i")) && (timers.ok || !want("j"))
    && (failover.ok || !want("k")) && (placing.ok || !want("m")) && (workers.ok || !want("n"))
    && (!want("l") || (loops_ok("big") && loops_ok("small") && loops_ok("uncompacted")));
  return all_ok ? 0 : 1;
}

}  // namespace proctor::bench
