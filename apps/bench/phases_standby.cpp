// Phase (i): a standby's takeover (docs/standby.md), on real proctord processes.
//   populate: M procedures suspended on events journaled on one directory by a node in a
//             child process, which the parent then SIGKILLs (as in (d));
//   takeover: proctord --standby twice on that directory (the first is active, the second
//             waits, following the journal); once the standby waits, SIGKILL of the active,
//             then one-step procedures are submitted to the standby's address until one is
//             accepted: the clock stops when it is SUCCESS (its step committed). Also
//             reported: the standby's own figure (lock taken to serving) and when all M
//             waiting procedures were listed as waiting again.
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <proctor/wire.pb.h>

#include "bench.hpp"

namespace proctor::bench {

namespace {

bool log_says(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str().find(what) != std::string::npos;
}

}  // namespace

void phase_takeover_populate(reporter& r, const bench_options& o, const std::string& dir) {
  node_in_child nc;
  nc.start(dir, o.workers);
  auto res = run_burst(
    *nc.sys, nc.exec(), o.waiting, 20000,
    [](size_t i) {
      return submit_req("demo.wait_event", "{\"key\":\"standby-" + std::to_string(i) + "\"}");
    },
    false);
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  r.put("procedures", static_cast<double>(o.waiting));
  r.finish();  // every submit was acknowledged, so journaled; the parent SIGKILLs this
}

void phase_takeover(reporter& r, const bench_options& o, const std::string& dir) {
  node_group g;
  for (const char* name : {"active", "standby"}) {
    node_process p{name, free_port(), -1};
    p.pid = spawn_proctord({"--data-dir", dir, "--listen", "127.0.0.1:" + std::to_string(p.port),
                            "--workers", std::to_string(o.workers), "--standby"},
                           dir + "." + name + ".log");
    g.nodes.push_back(p);
    if (g.nodes.size() == 1) {
      pb::Request nodes;
      nodes.mutable_nodes();
      await([&] { return ask(p.port, nodes, std::chrono::seconds{5}).code() == pb::Response::OK; },
            std::chrono::seconds{120},
            "the active proctord did not start (log: " + dir + ".active.log)");
    }
  }
  auto standby_log = dir + ".standby.log";
  await([&] { return log_says(standby_log, "waiting for its lock"); }, std::chrono::seconds{60},
        "the standby did not start waiting (log: " + standby_log + ")");
  // Let it follow the journal once (it catches up every 500 ms).
  std::this_thread::sleep_for(std::chrono::seconds{1});
  auto& active = g.nodes[0];
  auto port = g.nodes[1].port;
  auto t0 = clk::now();
  kill_proctord(active.pid);
  active.pid = -1;
  pb::Request submit;
  submit.mutable_submit()->set_type("demo.noop");
  submit.mutable_submit()->set_args_json("{}");
  submit.mutable_submit()->set_nonce("takeover-probe");  // sent again until accepted: one
  uint64_t id = 0;
  await(
    [&] {
      auto resp = ask(port, submit, std::chrono::seconds{30});
      if (resp.code() != pb::Response::OK)
        throw std::runtime_error("submit refused: " + resp.error());
      id = resp.id();
      return true;
    },
    std::chrono::seconds{300}, "the standby did not take over (log: " + standby_log + ")");
  await_success(port, id, std::chrono::seconds{120});
  auto took = secs(clk::now() - t0);
  pb::Request nodes;
  nodes.mutable_nodes();
  auto n = ask(port, nodes, std::chrono::seconds{30});
  double own_ms = 0;
  for (const auto& s : n.nodes())
    if (s.self())
      own_ms = static_cast<double>(s.process().takeover_ms());
  // Every waiting procedure back (passivated roots are listed as they are read).
  await_waiting(port, o.waiting, "the standby did not recover every waiting procedure");
  r.put("seconds", took);
  r.put("all_back_s", secs(clk::now() - t0));
  r.put("standby_ms", own_ms);
  r.finish();
}

}  // namespace proctor::bench
