// Phase (k): a replica group's failover (docs/replication.md), on real proctord processes.
//   populate: node b as three replicas (each its own directory, Raft on loopback); M
//             procedures suspended on events submitted to the leader by 32 client threads
//             over the client protocol (each acknowledged once on a majority), timed; the
//             same submits to one proctord without replicas, timed, for the ratio;
//   soak:     (--soak-seconds) steps driven through the leader by 32 clients for that long;
//             the group's elections (Raft terms begun) from its first leader to the SIGKILL
//             are counted: under load there should be none.
//   failover: SIGKILL of the leader, then one-step procedures submitted to the other two
//             replicas until one accepts: the clock stops when it is SUCCESS (its step
//             committed by the new leader). Its parts: when a survivor says it leads (a term
//             after the killed leader's), when it accepts the submit (it took over: its
//             journal recovered), the step. Also reported: when all M waiting procedures
//             were waiting again on the new leader.
//   also:     durable steps/s (demo.noop, 32 clients) and one client's submit-to-ack
//             p50/p99, on the group's leader and on the single proctord; the catch-up of a
//             fresh replica added in place of the killed leader (MB of its RocksDB after it,
//             per second).
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <proctor/wire.pb.h>

#include "bench.hpp"

namespace proctor::bench {

namespace {

/// Runs one(i) for every i < count on `threads` client threads, each taking the next i; the
/// first exception stops them all and is thrown here once they ended.
template <typename F>
void on_clients(size_t count, size_t threads, F&& one) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::string why;
  std::mutex why_mu;
  std::vector<std::thread> ts;
  for (size_t t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (size_t i; !failed && (i = next++) < count;) {
        try {
          one(i);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> g(why_mu);
          why = e.what();
          failed = true;
        }
      }
    });
  for (auto& t : ts)
    t.join();
  if (failed)
    throw std::runtime_error(why);
}

/// Submits `count` procedures waiting on events to 127.0.0.1:port from `threads` clients;
/// returns the submits acknowledged per second.
double submit_waiting(uint16_t port, size_t count, size_t threads, const std::string& tag) {
  auto t0 = clk::now();
  on_clients(count, threads, [&](size_t i) {
    pb::Request req;
    auto* s = req.mutable_submit();
    s->set_type("demo.wait_event");
    s->set_args_json("{\"key\":\"" + tag + "-" + std::to_string(i) + "\"}");
    s->set_nonce(tag + "-" + std::to_string(i));
    auto r = ask(port, req, std::chrono::seconds{60});
    if (r.code() != pb::Response::OK)
      throw std::runtime_error("submit refused: " + r.error());
  });
  return static_cast<double>(count) / secs(clk::now() - t0);
}

/// Durable steps/s through the client protocol: `count` demo.noop procedures of `steps`
/// steps submitted by `threads` clients, then waited for; submit of the first to SUCCESS of
/// the last.
double steps_per_s(uint16_t port, size_t count, int steps, size_t threads, const std::string& tag) {
  std::vector<uint64_t> ids(count);
  auto t0 = clk::now();
  on_clients(count, threads, [&](size_t i) {
    pb::Request req;
    auto* s = req.mutable_submit();
    s->set_type("demo.noop");
    s->set_args_json("{\"steps\":" + std::to_string(steps) + "}");
    s->set_nonce(tag + "-" + std::to_string(i));
    auto r = ask(port, req, std::chrono::seconds{60});
    if (r.code() != pb::Response::OK)
      throw std::runtime_error("submit refused: " + r.error());
    ids[i] = r.id();
  });
  on_clients(count, threads, [&](size_t i) {
    pb::Request req;
    req.mutable_wait()->set_id(ids[i]);
    req.mutable_wait()->set_timeout_ms(120'000);
    auto r = ask(port, req, std::chrono::seconds{130});
    if (r.code() != pb::Response::OK || r.status().state() != pb::SUCCESS)
      throw std::runtime_error("procedure " + std::to_string(ids[i])
                               + " did not succeed: " + r.error());
  });
  return static_cast<double>(count) * steps / secs(clk::now() - t0);
}

/// One client's submits, one after the other: each one's submit-to-acknowledgement in
/// microseconds, sorted.
std::vector<double> submit_latencies(uint16_t port, size_t count, const std::string& tag) {
  std::vector<double> us;
  for (size_t i = 0; i < count; ++i) {
    pb::Request req;
    auto* s = req.mutable_submit();
    s->set_type("demo.noop");
    s->set_args_json("{\"steps\":1}");
    s->set_nonce(tag + "-" + std::to_string(i));
    auto t0 = clk::now();
    auto r = ask(port, req, std::chrono::seconds{60});
    us.push_back(secs(clk::now() - t0) * 1e6);
    if (r.code() != pb::Response::OK)
      throw std::runtime_error("submit refused: " + r.error());
  }
  std::sort(us.begin(), us.end());
  return us;
}

/// What one node (one proctord, or a group's leader) does: steps/s, submit latency, and the
/// waiting procedures for the failover, under `prefix` in the report. `pids`: the node's
/// processes (the group's three replicas), whose CPU per step is reported beside the steps,
/// with the cores the nodes and this benchmark's clients kept busy meanwhile.
void measure_node(reporter& r, const bench_options& o, uint16_t port, const std::string& prefix,
                  const std::vector<pid_t>& pids) {
  const size_t clients = 32;
  // 6,000 of 5 steps: about a second at this machine's 25,000-35,000 steps/s. 2,000 (a
  // third of a second) gave ratios of 0.63-1.04 between runs of the same build (2026-12-05).
  const size_t procs = std::max<size_t>(1, std::min<size_t>(o.procedures * 3 / 10, 6000));
  auto nodes_cpu_us = [&] {
    double us = 0;
    for (auto pid : pids)
      us += process_cpu_us(pid);
    return us;
  };
  const double nodes0 = nodes_cpu_us(), self0 = cpu_us();
  const auto t0 = clk::now();
  r.put(prefix + "_steps_per_s", steps_per_s(port, procs, o.steps, clients, prefix + "-steps"));
  const double wall_us = secs(clk::now() - t0) * 1e6;
  const double nodes_us = nodes_cpu_us() - nodes0;
  r.put(prefix + "_cpu_us_per_step", nodes_us / static_cast<double>(procs * o.steps));
  r.put(prefix + "_cores_busy", (nodes_us + cpu_us() - self0) / wall_us);
  auto lat = submit_latencies(port, 300, prefix + "-latency");
  r.put(prefix + "_submit_p50_us", percentile(lat, 0.50));
  r.put(prefix + "_submit_p99_us", percentile(lat, 0.99));
  r.put(prefix + "_submits_per_s", submit_waiting(port, o.waiting, clients, prefix));
}

uint64_t bytes_under(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec))
      n += it->file_size(ec);
  return n;
}

bool serves(uint16_t port) {
  pb::Request req;
  req.mutable_nodes();
  try {
    return ask(port, req, std::chrono::seconds{5}).code() == pb::Response::OK;
  } catch (const std::runtime_error&) {
    return false;
  }
}

/// The group as the replica serving clients on `port` sees it (any replica answers).
pb::ReplicasInfo group_seen_by(uint16_t port) {
  pb::Request req;
  req.mutable_replicas();
  auto r = ask(port, req, std::chrono::seconds{10});
  if (r.code() != pb::Response::OK)
    throw std::runtime_error("replicas: " + r.error());
  return r.replicas();
}

/// The index in `g` of the replica that serves clients (the group's ready leader).
size_t await_leader(const node_group& g, const std::string& dir) {
  size_t leader = 0;
  await(
    [&] {
      for (size_t i = 0; i < g.nodes.size(); ++i)
        if (g.nodes[i].pid > 0 && serves(g.nodes[i].port)) {
          leader = i;
          return true;
        }
      return false;
    },
    std::chrono::seconds{120}, "no replica was elected (logs: " + dir + "/b*.log)");
  return leader;
}

/// Drives steps through the group's leader for --soak-seconds (rounds of steps_per_s; a round a
/// change of leader interrupts is started again on the new one). Returns the leader's index
/// at the end; reports soak_steps_per_s and soak_rounds_interrupted.
size_t soak(reporter& r, const bench_options& o, const node_group& g, size_t leader,
            const std::string& dir) {
  const size_t procs = std::max<size_t>(1, std::min<size_t>(o.procedures / 10, 2000));
  const auto t0 = clk::now();
  const auto until = t0 + std::chrono::duration<double>(o.soak_seconds);
  double steps = 0;
  size_t interrupted = 0;
  for (size_t round = 0; clk::now() < until; ++round) {
    try {
      const std::string tag = "soak-" + std::to_string(round);
      steps_per_s(g.nodes[leader].port, procs, o.steps, 32, tag);
      steps += static_cast<double>(procs) * o.steps;
    } catch (const std::runtime_error&) {
      ++interrupted;
      leader = await_leader(g, dir);
    }
  }
  r.put("soak_steps_per_s", steps / secs(clk::now() - t0));
  r.put("soak_rounds_interrupted", static_cast<double>(interrupted));
  return leader;
}

}  // namespace

void phase_replica_failover(reporter& r, const bench_options& o, const std::string& dir) {
  // One proctord without replicas: the figures the group's are compared with.
  {
    node_group g;
    node_process p{"single", free_port(), -1};
    std::filesystem::create_directories(dir);
    p.pid = spawn_proctord({"--data-dir", dir + "/single", "--listen",
                            "127.0.0.1:" + std::to_string(p.port), "--workers",
                            std::to_string(o.workers)},
                           dir + "/single.log");
    g.nodes.push_back(p);
    await([&] { return serves(p.port); }, std::chrono::seconds{120},
          "the single proctord did not start (log: " + dir + "/single.log)");
    measure_node(r, o, p.port, "single", {p.pid});
  }
  node_group g;
  std::string spec;
  std::vector<uint16_t> raft_ports;
  for (int i = 0; i < 3; ++i) {
    g.nodes.push_back(node_process{"b" + std::to_string(i + 1), free_port(), -1});
    raft_ports.push_back(free_port());
    spec += (i ? "," : "") + g.nodes[i].name + "=127.0.0.1:" + std::to_string(g.nodes[i].port) + "/"
            + std::to_string(raft_ports[i]);
  }
  // Each replica gets the same flags; --election-timeout-ms only when asked (A/B of it).
  auto replica_args = [&](const std::string& name, std::vector<std::string> args) {
    std::vector<std::string> all{
      "--data-dir", dir + "/" + name,         "--name", "b", "--replica", name,
      "--workers",  std::to_string(o.workers)};
    if (o.election_timeout_ms != 0)
      all.insert(all.end(), {"--election-timeout-ms", std::to_string(o.election_timeout_ms)});
    all.insert(all.end(), args.begin(), args.end());
    return all;
  };
  for (auto& p : g.nodes)
    p.pid = spawn_proctord(replica_args(p.name, {"--replicas", spec}), dir + "/" + p.name + ".log");
  size_t leader = await_leader(g, dir);
  const uint64_t first_term = group_seen_by(g.nodes[leader].port).term();
  std::vector<pid_t> replicas;
  for (const auto& n : g.nodes)
    replicas.push_back(n.pid);
  measure_node(r, o, g.nodes[leader].port, "group", replicas);
  r.put("procedures", static_cast<double>(o.waiting));
  if (o.soak_seconds > 0)
    leader = soak(r, o, g, leader, dir);
  // Elections under load: terms begun after the first leader's, with clients busy all along.
  const uint64_t kill_term = group_seen_by(g.nodes[leader].port).term();
  r.put("elections_before_kill", static_cast<double>(kill_term - first_term));

  auto t0 = clk::now();
  kill_proctord(g.nodes[leader].pid);
  g.nodes[leader].pid = -1;
  pb::Request submit;
  submit.mutable_submit()->set_type("demo.noop");
  submit.mutable_submit()->set_args_json("{}");
  submit.mutable_submit()->set_nonce("failover-probe");  // sent again until accepted: one
  uint64_t id = 0;
  uint16_t port = 0;
  double elected_s = -1;
  await(
    [&] {
      for (size_t i = 0; i < 3; ++i) {
        if (i == leader)
          continue;
        if (elected_s < 0) {
          auto seen = group_seen_by(g.nodes[i].port);
          if (seen.term() > kill_term && !seen.leader().empty())
            elected_s = secs(clk::now() - t0);
        }
        auto resp = ask(g.nodes[i].port, submit, std::chrono::seconds{30});
        if (resp.code() == pb::Response::OK) {
          id = resp.id();
          port = g.nodes[i].port;
          return true;
        }
        if (resp.code() != pb::Response::NOT_LEADER)
          throw std::runtime_error("submit refused: " + resp.error());
      }
      return false;
    },
    std::chrono::seconds{300}, "no replica took over (logs: " + dir + "/b*.log)",
    std::chrono::milliseconds{5});  // finer than the parts it measures (tens of ms)
  const double serving_s = secs(clk::now() - t0);
  await_success(port, id, std::chrono::seconds{120});
  auto took = secs(clk::now() - t0);
  await_waiting(port, o.waiting, "the new leader did not recover every waiting procedure");
  r.put("seconds", took);
  r.put("elected_s", elected_s < 0 ? serving_s : elected_s);
  r.put("serving_s", serving_s);
  r.put("all_back_s", secs(clk::now() - t0));
  r.put("failover_elections", static_cast<double>(group_seen_by(port).term() - kill_term));

  // Replacing the lost machine: the dead leader removed, a fresh replica b4 (started with
  // --join) added; timed from the add to its answer (b4 caught up: a snapshot of the whole
  // journal, then the log, and made a voter).
  pb::Request remove;
  remove.mutable_replicas()->set_remove(g.nodes[leader].name);
  if (auto resp = ask(port, remove, std::chrono::seconds{60}); resp.code() != pb::Response::OK)
    throw std::runtime_error("replicas remove refused: " + resp.error());
  node_process b4{"b4", free_port(), -1};
  auto raft4 = free_port();
  std::string spec4;
  for (size_t i = 0; i < 3; ++i)
    if (i != leader)
      spec4 += g.nodes[i].name + "=127.0.0.1:" + std::to_string(g.nodes[i].port) + "/"
               + std::to_string(raft_ports[i]) + ",";
  const auto item4 = "b4=127.0.0.1:" + std::to_string(b4.port) + "/" + std::to_string(raft4);
  spec4 += item4;
  b4.pid = spawn_proctord(replica_args("b4", {"--join", "--replicas", spec4}), dir + "/b4.log");
  g.nodes.push_back(b4);
  pb::Request add;
  add.mutable_replicas()->set_add(item4);
  add.mutable_replicas()->set_timeout_ms(600'000);
  auto t1 = clk::now();
  if (auto resp = ask(port, add, std::chrono::seconds{660}); resp.code() != pb::Response::OK)
    throw std::runtime_error("replicas add refused: " + resp.error() + " (log: " + dir
                             + "/b4.log)");
  auto catch_up = secs(clk::now() - t1);
  auto bytes = static_cast<double>(bytes_under(dir + "/b4/db"));
  r.put("catch_up_s", catch_up);
  r.put("catch_up_mb", bytes / 1e6);
  r.put("catch_up_mb_per_s", bytes / 1e6 / catch_up);
  r.finish();
}

}  // namespace proctor::bench
