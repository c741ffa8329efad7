// Phase (k): a replica group's failover (docs/replication.md), on real proctord processes.
//   populate: node b as three replicas (each its own directory, Raft on loopback); M
//             procedures suspended on events submitted to the leader by 32 client threads
//             over the client protocol (each acknowledged once on a majority), timed; the
//             same submits to one proctord without replicas, timed, for the ratio;
//   failover: SIGKILL of the leader, then one-step procedures submitted to the other two
//             replicas until one accepts: the clock stops when it is SUCCESS (its step
//             committed by the new leader). Also reported: when all M waiting procedures
//             were waiting again on the new leader.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "bench.hpp"
#include <proctor/wire.pb.h>

namespace proctor::bench {

namespace {

/// Submits `count` procedures waiting on events to 127.0.0.1:port from `threads` clients;
/// returns the submits acknowledged per second.
double submit_waiting(uint16_t port, size_t count, size_t threads, const std::string& tag) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::string why;
  std::mutex why_mu;
  auto t0 = clk::now();
  std::vector<std::thread> ts;
  for (size_t t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (size_t i; !failed && (i = next++) < count;) {
        pb::Request req;
        auto* s = req.mutable_submit();
        s->set_type("demo.wait_event");
        s->set_args_json("{\"key\":\"" + tag + "-" + std::to_string(i) + "\"}");
        s->set_nonce(tag + "-" + std::to_string(i));
        try {
          auto r = ask(port, req, std::chrono::seconds{60});
          if (r.code() != pb::Response::OK)
            throw std::runtime_error("submit refused: " + r.error());
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
  return static_cast<double>(count) / secs(clk::now() - t0);
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

}  // namespace

void phase_replica_failover(reporter& r, const bench_options& o, const std::string& dir) {
  const size_t clients = 32;
  // One proctord without replicas: the figure the group's submits are compared with.
  double single_ps = 0;
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
    single_ps = submit_waiting(p.port, o.waiting, clients, "single");
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
  for (auto& p : g.nodes)
    p.pid = spawn_proctord({"--data-dir", dir + "/" + p.name, "--name", "b", "--replica", p.name,
                            "--replicas", spec, "--workers", std::to_string(o.workers)},
                           dir + "/" + p.name + ".log");
  size_t leader = 0;
  await(
    [&] {
      for (size_t i = 0; i < 3; ++i)
        if (serves(g.nodes[i].port)) {
          leader = i;
          return true;
        }
      return false;
    },
    std::chrono::seconds{120}, "no replica was elected (logs: " + dir + "/b*.log)");
  auto group_ps = submit_waiting(g.nodes[leader].port, o.waiting, clients, "group");
  r.put("procedures", static_cast<double>(o.waiting));
  r.put("group_submits_per_s", group_ps);
  r.put("single_submits_per_s", single_ps);

  auto t0 = clk::now();
  kill_proctord(g.nodes[leader].pid);
  g.nodes[leader].pid = -1;
  pb::Request submit;
  submit.mutable_submit()->set_type("demo.noop");
  submit.mutable_submit()->set_args_json("{}");
  submit.mutable_submit()->set_nonce("failover-probe");  // sent again until accepted: one
  uint64_t id = 0;
  uint16_t port = 0;
  await(
    [&] {
      for (size_t i = 0; i < 3; ++i) {
        if (i == leader)
          continue;
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
    std::chrono::seconds{300}, "no replica took over (logs: " + dir + "/b*.log)");
  await_success(port, id, std::chrono::seconds{120});
  auto took = secs(clk::now() - t0);
  await_waiting(port, o.waiting, "the new leader did not recover every waiting procedure");
  r.put("seconds", took);
  r.put("all_back_s", secs(clk::now() - t0));
  r.finish();
}

}  // namespace proctor::bench
