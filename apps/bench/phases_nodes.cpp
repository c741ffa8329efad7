// Phases (g) and (h): trees across nodes, measured on real proctord processes (the binary
// beside proctor-bench) on 127.0.0.1, driven over the client protocol (proto/WIRE.md) the way
// the CLI drives them. The nodes share this machine's cores and disk, so (h) is a ratio to
// the same workload on one node, not a cluster's throughput.
//   (g) one demo.fanout root on node a whose R one-step children all run on node b: submit
//       to the root's SUCCESS, each child journaled on b, run, and its end journaled on a;
//   (h) T demo.fanout roots of K children of S steps, spread over a, b and c, beside the
//       same roots on one node without peers: child steps per second of each;
//   (m) placement by key (docs/cluster.md): how evenly 100,000 keys spread over 2-16 members,
//       and a submit asked of node a whose key b owns (forwarded) beside one a owns, one
//       client, one after another: the cost of the hop; and how long a change of the
//       cluster group takes to reach all of its 5 members (phases_cluster_group.cpp).
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <proctor/wire.pb.h>

#include "actors/base/placement.hpp"
#include "actors/wire/wire_client.hpp"
#include "bench.hpp"

extern char** environ;

namespace proctor::bench {

namespace {

/// Starts proctord on dir/<name> for each name; with more than one, each is the others'
/// peer, and this returns once every node sees every other one up and has run a procedure.
void start_nodes(node_group& g, const std::string& dir, const std::vector<std::string>& names,
                 size_t workers) {
  fs::create_directories(dir);
  for (const auto& n : names)
    g.nodes.push_back({n, free_port(), -1});
  for (auto& n : g.nodes) {
    std::vector<std::string> args{"--data-dir", dir + "/" + n.name,
                                  "--listen",   "127.0.0.1:" + std::to_string(n.port),
                                  "--workers",  std::to_string(workers)};
    if (g.nodes.size() > 1) {
      std::string peers;
      for (const auto& p : g.nodes)
        if (p.name != n.name)
          peers += (peers.empty() ? "" : ",") + p.name + "=127.0.0.1:" + std::to_string(p.port);
      args.insert(args.end(), {"--name", n.name, "--peers", peers});
    }
    n.pid = spawn_proctord(args, dir + "/" + n.name + ".log");
  }
  pb::Request local;
  local.mutable_list()->set_local(true);
  pb::Request nodes;
  nodes.mutable_nodes();
  for (auto& n : g.nodes) {
    await([&] { return ask(n.port, local, std::chrono::seconds{5}).code() == pb::Response::OK; },
          std::chrono::seconds{60},
          "node " + n.name + " did not start (see its log in " + dir + ")");
    if (g.nodes.size() == 1)
      continue;
    await(
      [&] {
        auto r = ask(n.port, nodes, std::chrono::seconds{5});
        size_t up = 0;
        for (const auto& s : r.nodes())
          up += s.up() ? 1 : 0;
        return up == g.nodes.size();
      },
      std::chrono::seconds{60}, "node " + n.name + " did not see its peers up");
  }
  if (g.nodes.size() == 1)
    return;
  // A node on a new journal hands out no procedure id before its peers said where its
  // name's earlier incarnations left off (docs/cluster.md; up to 3 s, about half a second
  // after they are up here): a submit waits for that. One procedure through each node first,
  // so that no phase times that wait as if it were the work's (it took 0.4-0.5 s of (g)'s
  // 0.65 s for 10,000 children, 2026-12-05).
  for (auto& n : g.nodes)
    await_success(n.port, submit_one(n.port, "demo.noop", "{\"steps\":1}"),
                  std::chrono::seconds{60});
}

/// What the nodes of a group did, summed over them: from their metrics (the CPU too: each
/// node's process_cpu_seconds_total) and, for the context switches and the loopback's
/// traffic, from /proc.
struct group_work {
  double records = 0, writes = 0, sync_s = 0, messages = 0, cpu_s = 0;
  /// Context switches of the nodes' threads, voluntary or not (/proc/PID/task/*/status), and
  /// the loopback interface's packets and bytes (/proc/net/dev: the nodes' connections to each
  /// other, and the benchmark's to them): what the network between the nodes costs beyond the
  /// engine's own messages (CAF's network actors are not counted ones).
  double switches = 0, lo_packets = 0, lo_bytes = 0;

  static group_work of(const node_group& g) {
    group_work w;
    pb::Request req;
    req.mutable_metrics();
    for (const auto& n : g.nodes) {
      auto m = ask(n.port, req, std::chrono::seconds{30}).text();
      auto c = work_in_metrics(m);
      w.records += c.records;
      w.writes += c.writes;
      w.messages += c.messages;
      w.sync_s += metric(m, "proctor_journal_sync_seconds_sum");
      w.cpu_s += metric(m, "process_cpu_seconds_total");  // user and system, from /proc
      w.switches += thread_switches(n.pid);
    }
    loopback(&w.lo_packets, &w.lo_bytes);
    return w;
  }

  /// Context switches of every thread of process `pid` so far, 0 if unreadable.
  static double thread_switches(pid_t pid) {
    double sum = 0;
    std::error_code ec;
    for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::ifstream f(t.path() / "status");
      std::string line;
      while (std::getline(f, line))
        for (const char* n : {"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"})
          if (line.rfind(n, 0) == 0)
            sum += std::strtod(line.c_str() + std::strlen(n), nullptr);
    }
    return sum;
  }

  /// The loopback interface's received packets and bytes so far (/proc/net/dev).
  static void loopback(double* packets, double* bytes) {
    std::ifstream f("/proc/net/dev");
    std::string line;
    while (std::getline(f, line)) {
      auto colon = line.find(':');
      auto name = line.find_first_not_of(' ');
      if (colon == std::string::npos || line.compare(name, colon - name, "lo") != 0)
        continue;
      std::istringstream in(line.substr(colon + 1));
      in >> *bytes >> *packets;
      return;
    }
  }
};

/// Reports what `after` - `before` is per child step, under `prefix`.
void report_group_work(reporter& r, const std::string& prefix, const group_work& before,
                       const group_work& after, double steps) {
  r.put(prefix + "_records_per_step", (after.records - before.records) / steps);
  r.put(prefix + "_writes", after.writes - before.writes);
  r.put(prefix + "_sync_s", after.sync_s - before.sync_s);
  r.put(prefix + "_messages_per_step", (after.messages - before.messages) / steps);
  r.put(prefix + "_cpu_us_per_step", (after.cpu_s - before.cpu_s) * 1e6 / steps);
  r.put(prefix + "_switches_per_step", (after.switches - before.switches) / steps);
  r.put(prefix + "_lo_packets_per_step", (after.lo_packets - before.lo_packets) / steps);
  r.put(prefix + "_lo_bytes_per_step", (after.lo_bytes - before.lo_bytes) / steps);
}

/// T roots of K children of S steps (children placed as `placement` says) on the nodes of
/// `g`, submitted to its first node at once: child steps per second, submit to last SUCCESS.
double spread_workload(node_group& g, const bench_options& o, const std::string& placement) {
  auto port = g.nodes[0].port;
  auto args = "{\"children\":" + std::to_string(o.spread_children)
              + ",\"child_steps\":" + std::to_string(o.spread_steps) + placement + "}";
  auto t0 = clk::now();
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < o.spread_roots; ++i)
    ids.push_back(submit_one(port, "demo.fanout", args));
  for (auto id : ids)
    await_success(port, id, std::chrono::seconds{600});
  auto el = secs(clk::now() - t0);
  return static_cast<double>(o.spread_roots) * o.spread_children * o.spread_steps / el;
}

}  // namespace

void phase_remote_fanout(reporter& r, const bench_options& o, const std::string& dir) {
  node_group g;
  start_nodes(g, dir, {"a", "b", "c"}, o.workers);
  auto t0 = clk::now();
  auto id = submit_one(g.nodes[0].port, "demo.fanout",
                       "{\"children\":" + std::to_string(o.remote_children)
                         + ",\"child_steps\":1,\"place_on\":\"b\"}");
  await_success(g.nodes[0].port, id, std::chrono::seconds{600});
  auto el = secs(clk::now() - t0);
  r.put("seconds", el);
  r.put("children_per_s", static_cast<double>(o.remote_children) / el);
  r.finish();
}

void phase_spread(reporter& r, const bench_options& o, const std::string& dir) {
  double three = 0, one = 0;
  const double steps =
    static_cast<double>(o.spread_roots) * static_cast<double>(o.spread_children * o.spread_steps);
  {
    node_group g;
    start_nodes(g, dir + "/three", {"a", "b", "c"}, o.workers);
    auto before = group_work::of(g);
    three = spread_workload(g, o, ",\"spread\":true");
    report_group_work(r, "three", before, group_work::of(g), steps);
  }
  {
    node_group g;
    start_nodes(g, dir + "/one", {"solo"}, o.workers);
    auto before = group_work::of(g);
    one = spread_workload(g, o, "");
    report_group_work(r, "one", before, group_work::of(g), steps);
  }
  r.put("three_nodes_steps_per_s", three);
  r.put("one_node_steps_per_s", one);
  r.finish();
}

namespace {

/// Submits `n` demo.noop roots of one step to the node on `port`, one after another, each
/// with a key `pick` gives: the latency of each, sorted (us).
std::vector<double> keyed_submits(uint16_t port, size_t n,
                                  const std::function<std::string(size_t)>& pick) {
  std::vector<double> us;
  for (size_t i = 0; i < n; ++i) {
    pb::Request req;
    req.mutable_submit()->set_type("demo.noop");
    req.mutable_submit()->set_args_json(R"({"steps":1})");
    req.mutable_submit()->set_key(pick(i));
    auto t0 = clk::now();
    auto r = ask(port, req, std::chrono::seconds{30});
    if (r.code() != pb::Response::OK)
      throw std::runtime_error("keyed submit refused: " + r.error());
    us.push_back(secs(clk::now() - t0) * 1e6);
  }
  std::sort(us.begin(), us.end());
  return us;
}

}  // namespace

void phase_placement(reporter& r, const bench_options& o, const std::string& dir) {
  // Balance: slots are dealt exactly (floor or floor + 1 a member); keys add the hash's noise.
  double worst_keys = 0, worst_slots = 0;
  size_t worst_members = 0;
  for (size_t n = 2; n <= 16; ++n) {
    std::vector<std::string> members;
    for (size_t i = 0; i < n; ++i)
      members.push_back("node-" + std::string(1, static_cast<char>('a' + i)));
    placement::table t(members);
    std::vector<size_t> keys(n, 0);
    for (size_t k = 0; k < 100'000; ++k) {
      const auto& owner = t.owner_of("key-" + std::to_string(k));
      ++keys[static_cast<size_t>(owner.back() - 'a')];
    }
    auto [klo, khi] = std::minmax_element(keys.begin(), keys.end());
    auto c = t.counts();
    auto [slo, shi] = std::minmax_element(c.begin(), c.end());
    double kr = static_cast<double>(*khi) / static_cast<double>(*klo);
    worst_slots = std::max(worst_slots, static_cast<double>(*shi) / *slo);
    if (kr > worst_keys) {
      worst_keys = kr;
      worst_members = n;
    }
  }
  r.put("keys_max_min_worst", worst_keys);
  r.put("keys_worst_members", static_cast<double>(worst_members));
  r.put("slots_max_min_worst", worst_slots);

  // The hop: keys of a's slots and of b's, asked of a.
  node_group g;
  start_nodes(g, dir, {"a", "b"}, o.workers);
  const auto port = g.nodes[0].port;
  placement::table t({"a", "b"});
  auto owned_by = [&](const std::string& owner) {
    std::vector<std::string> out;
    for (size_t k = 0; out.size() < 4096; ++k)
      if (auto key = "k" + std::to_string(k); t.owner_of(key) == owner)
        out.push_back(key);
    return out;
  };
  auto mine = owned_by("a"), theirs = owned_by("b");
  // Until a has heard b's members (its heartbeat answers), keyed submits may be refused.
  await([&] { return keyed_submits(port, 1, [&](size_t) { return theirs[0]; }).size() == 1; },
        std::chrono::seconds{30}, "a keyed submit was refused for 30 s");
  const size_t n = o.quick ? 200 : 2000;
  auto local = keyed_submits(port, n, [&](size_t i) { return mine[i % mine.size()]; });
  auto forwarded = keyed_submits(port, n, [&](size_t i) { return theirs[i % theirs.size()]; });
  r.put("local_p50_us", percentile(local, 0.5));
  r.put("local_p99_us", percentile(local, 0.99));
  r.put("forwarded_p50_us", percentile(forwarded, 0.5));
  r.put("forwarded_p99_us", percentile(forwarded, 0.99));
  r.put("submits", static_cast<double>(n));
  measure_group_propagation(r, dir + "/cluster-group", o.quick ? 20 : 200);
  r.finish();
}

}  // namespace proctor::bench
