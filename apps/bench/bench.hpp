// proctor-bench, shared declarations (see apps/proctor_bench.cpp for what it measures):
// the options, the clock, the child-process machinery (reporter, phase_result, run_phase;
// children.cpp), the helpers used inside children (requests, metric(), node_in_child;
// children.cpp), the client actors (burst clients and the open-loop pacer; clients.cpp) and
// the phases (a)-(c) (phases_write.cpp), (d)-(f) (phases_wait.cpp) and (g)-(h), trees
// across proctord processes (phases_nodes.cpp).
#pragma once

#include <sys/types.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include <proctor/registry.hpp>
#include <proctor/wire.pb.h>

#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"
#include "actors/node/node.hpp"
#include "persistence/actor_messages.hpp"
#include "procedures/demo.hpp"

namespace proctor::bench {

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;
using proctor::rpc_atom;

inline double secs(clk::duration d) {
  return std::chrono::duration<double>(d).count();
}

// -- options --------------------------------------------------------------------------------

struct bench_options {
  std::string data_dir;
  bool json = false;
  bool quick = false;
  size_t procedures = 20000;  // (b) N
  int steps = 5;              // (b) S
  size_t waiting = 100000;    // (d)/(e) M
  int children = 10000;       // (f) C
  size_t workers = 2;
  double raw_seconds = 2.0;
  double latency_seconds = 3.0;
  double latency_rate = 0;  // one-step procedures/s; 0 = half the measured maximum
  double fanout_timeout = 10.0;
  std::string phases = "abcdefghijklmn";  // which measures to run (d and e are one phase)
  bool ledger = false;             // (b) with demo.ledger (a file per step, on the worker threads)
  size_t remote_children = 10000;  // (g) R
  size_t spread_roots = 100;       // (h) T
  size_t spread_children = 50;     // (h) K
  size_t spread_steps = 10;        // (h) S
  size_t timers = 1000000;         // (j) timers due within one second
  size_t loops = 100000;           // (l) passes of the self-compacting loop
  uint64_t loop_compact_after = 1000;  // (l) the tree's threshold
  unsigned election_timeout_ms = 0;    // (k) the replicas' --election-timeout-ms (0: default)
  double soak_seconds = 0;             // (k) load on the group before the SIGKILL
};

// -- child processes (children.cpp) ---------------------------------------------------------

/// The child's end of the pipe: "key value" lines, then "end".
class reporter {
public:
  reporter(int fd, bool wait_for_kill) : fd_(fd), wait_for_kill_(wait_for_kill) {}

  void put(const std::string& key, double v);

  void put_str(const std::string& key, std::string v);

  /// Reports the end of the phase and leaves the process without running any destructor
  /// (no actor system teardown, no clean database close). A phase that ends in a crash
  /// waits here for the parent's SIGKILL.
  [[noreturn]] void finish();

private:
  void write_all(const std::string& s);

  int fd_;
  bool wait_for_kill_;
};

struct phase_result {
  bool ok = false;
  bool timed_out = false;
  std::string error;
  std::map<std::string, std::string> values;
  double wall_s = 0;

  std::optional<double> num(const std::string& key) const {
    auto i = values.find(key);
    if (i == values.end())
      return std::nullopt;
    return std::strtod(i->second.c_str(), nullptr);
  }
};

/// Runs `body` in a forked child; collects its lines until "end", EOF or the deadline.
/// `kill_after` SIGKILLs the child once it reported (phase d's crash).
phase_result run_phase(const std::string& name, double timeout_s, bool kill_after,
                       const std::function<void(reporter&)>& body);

// -- helpers used inside children (children.cpp) --------------------------------------------

size_t rss_bytes();

/// CPU time this process (the node in the child) used so far, user and system, in
/// microseconds: steadier on a shared machine than wall-clock rates.
double cpu_us();

/// Returns the allocator's free pages to the OS (phases_wait.cpp): what stays resident is
/// what the node still holds.
void release_free_memory();

/// The bytes the program holds in live allocations (jemalloc's stats.allocated; 0 when not
/// built with jemalloc): beside the resident size, it tells what is held from what is
/// fragmentation or the allocator's own.
size_t heap_allocated_bytes();

class bench_config : public caf::actor_system_config {
public:
  bench_config() { proctor::tune_actor_system(*this); }
};

std::string submit_req(const std::string& type, const std::string& args);
std::string wait_req(uint64_t id);
std::string status_req(uint64_t id);
std::string metrics_req();
std::string list_req(proctor::pb::ProcState state);
std::string event_req(const std::string& key, const std::string& payload);

/// One blocking request from the child's main thread.
proctor::pb::Response call(caf::scoped_actor& self, const caf::actor& exec, const std::string& req,
                           caf::duration timeout = caf::duration{std::chrono::seconds{60}});

/// A gauge or counter from the node's Prometheus text (first sample of that name).
double metric(const std::string& text, const std::string& name);

/// A node of its own on `dir`, with the demo procedures.
struct node_in_child {
  bench_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  proctor::registry types;
  std::unique_ptr<proctor::node> n;
  proctor::recovery_report report;

  node_in_child() {
    sys = std::make_unique<caf::actor_system>(cfg);
    proctor::register_demo_procedures(types);
  }

  /// `compact_after`: the node's --compact-after (UINT64_MAX: the default).
  void start(const std::string& dir, size_t workers, uint64_t compact_after = UINT64_MAX) {
    n = std::make_unique<proctor::node>(*sys, types);
    proctor::node_options o;
    o.data_dir = dir;
    o.workers = workers;
    if (compact_after != UINT64_MAX)
      o.executor.compact_after = compact_after;
    auto r = n->start(o);
    if (!r)
      throw std::runtime_error("node start on " + dir
                               + " failed: " + proctor::error_text(*sys, r.error()));
    report = *r;
  }

  caf::actor exec() const { return n->executor(); }
};

// -- a client that keeps many procedures in flight (clients.cpp) ----------------------------

struct burst_result {
  size_t submitted = 0;
  size_t succeeded = 0;
  size_t not_succeeded = 0;
  uint64_t min_id = UINT64_MAX;
  uint64_t max_id = 0;
  std::string error;
  clk::time_point t_end;
};

/// Submits `count` procedures (at most `window` in flight), returns when all ended (or, with
/// wait_end = false, when all were acknowledged). Wall time from the first submit.
/// (The split over client actors is explained in clients.cpp.)
burst_result run_burst(caf::actor_system& sys, const caf::actor& exec, size_t count, size_t window,
                       std::function<std::string(size_t)> make, bool wait_end);

// -- an open-loop pacer (clients.cpp) -------------------------------------------------------

struct pacer_result {
  std::vector<double> latency_us;  ///< of the procedures submitted in the measured window
  /// Its parts, for the same procedures (docs/benchmarks.md, "Where (c)'s tail comes
  /// from"): how late the pacer sent the submit after its scheduled arrival (not in
  /// latency_us), submit to its acknowledgement (the Submitted durable), acknowledgement to
  /// SUCCESS (the step, its synced record, the answer).
  std::vector<double> late_us, ack_us, end_us;
  std::vector<double> sent_at_ms;  ///< when each was sent, since the pacer's start
  size_t sent = 0;
  size_t not_succeeded = 0;
  double measured_s = 0;
  std::string error;
};

struct pacer_state {
  caf::actor exec;
  double rate = 0;
  std::string req;
  clk::time_point t_start, t_measure, t_stop;
  size_t sent = 0;
  size_t outstanding = 0;
  size_t measured_sent = 0;
  bool stopped = false;
  bool finished = false;
  pacer_result res;
  std::shared_ptr<std::promise<pacer_result>> done;
};

caf::behavior pacer(caf::event_based_actor* self, std::shared_ptr<pacer_state> st);

double percentile(const std::vector<double>& sorted, double q);

/// Journal counters of a node, for the table.
void report_journal(reporter& r, caf::scoped_actor& self, const caf::actor& exec,
                    const std::string& prefix);

/// What the engine has done so far in this process, as counted (docs/benchmarks.md, "What
/// a procedure costs"): journal records, RocksDB writes (the journal's batches), procedure
/// actors started, the process's C++ heap allocations (alloc_count.hpp), and the messages its
/// engine actors took (proctor_actor_messages_total), by kind of actor and in all.
struct work_counts {
  double records = 0, writes = 0, spawns = 0, allocations = 0, messages = 0;
  std::array<double, actor_kinds> messages_by_actor{};  ///< by actor_kind
};
work_counts count_work(caf::scoped_actor& self, const caf::actor& exec);
/// The same read from a node's metrics text (any process's: no allocations, which only this
/// process can count).
work_counts work_in_metrics(const std::string& metrics);

/// Puts what was done between `before` and `after`, per procedure (`procs`) and per step
/// (`steps` in all): cost_records, cost_writes, cost_spawns, cost_allocations, cost_messages,
/// cost_messages_KIND for each kind of actor (actor_kind_name) and the same with step_.
void report_costs(reporter& r, const work_counts& before, const work_counts& after, double procs,
                  double steps);

// -- the phases (each runs in its own child process) ---------------------------------------

// phases_write.cpp
void phase_raw(reporter& r, const bench_options& o, const std::string& dir);
void phase_steps(reporter& r, const bench_options& o, const std::string& dir);
void phase_latency_calibrate(reporter& r, const bench_options& o, const std::string& dir);
void phase_latency(reporter& r, const bench_options& o, const std::string& dir, double rate);
void phase_latency_floor(reporter& r, const bench_options& o, const std::string& dir, double rate);

// phases_wait.cpp
void phase_populate(reporter& r, const bench_options& o, const std::string& dir);
void phase_recover(reporter& r, const bench_options& o, const std::string& dir, uint64_t last_id);
void phase_fanout(reporter& r, const bench_options& o, const std::string& dir);

// -- timers (phases_timers.cpp) -----------------------------------------------------------

/// (j) o.timers timer procedures due within one second: submitted and passivated (then the
/// parent SIGKILLs the node), recovered on a new node, fired there.
void phase_timers_populate(reporter& r, const bench_options& o, const std::string& dir);
/// Actors per second that only spawn, take one message, answer and exit, under `trees`
/// parents (actor_floor.cpp): the runtime's floor for (j)'s resumed procedures.
double actor_floor_per_s(caf::actor_system& sys, size_t n, size_t trees);

void phase_timers_recover(reporter& r, const bench_options& o, const std::string& dir,
                          int64_t first_at);

// phases_nodes.cpp
// -- proctord processes (processes.cpp) -----------------------------------------------------

struct node_process {
  std::string name;
  uint16_t port = 0;
  pid_t pid = -1;
};

/// SIGKILLs and reaps a proctord started by spawn_proctord (no-op for pid <= 0).
void kill_proctord(pid_t pid);
/// SIGKILLs and reaps every proctord started and not yet reaped (reporter::finish calls it:
/// a phase leaves by _exit, past its node_groups' destructors).
void kill_live_proctords();

/// The nodes of one measurement; SIGKILLed when it ends (their data is thrown away).
struct node_group {
  std::vector<node_process> nodes;
  node_group() = default;
  node_group(const node_group&) = delete;
  node_group& operator=(const node_group&) = delete;
  ~node_group() {
    for (auto& n : nodes)
      kill_proctord(n.pid);
  }
};

uint16_t free_port();

/// CPU time (user and system, microseconds, at the clock tick's 10 ms grain) another process
/// of this machine used so far: utime and stime of /proc/PID/stat. 0 if it is gone.
double process_cpu_us(pid_t pid);

/// Starts the proctord beside this binary with `args`, its output appended to `log`.
pid_t spawn_proctord(const std::vector<std::string>& args, const std::string& log);

/// One request to the node at 127.0.0.1:port; throws when there is no answer.
pb::Response ask(uint16_t port, const pb::Request& req, std::chrono::milliseconds timeout);

/// Waits (at most 300 s) until the node at 127.0.0.1:port counts at least `n` waiting
/// procedures; throws `what` otherwise.
void await_waiting(uint16_t port, size_t n, const std::string& what);

/// Submits a procedure of `type` with `args` to 127.0.0.1:port: its id; throws if refused.
uint64_t submit_one(uint16_t port, const std::string& type, const std::string& args);

/// Waits for procedure `id` to succeed (polls of 10 s, at most `limit` in all); throws if it
/// ends otherwise.
void await_success(uint16_t port, uint64_t id, std::chrono::seconds limit);

/// Waits (at most `limit`) until `ok` holds, asking every `every`; throws `what` otherwise.
template <class F>
void await(F ok, std::chrono::seconds limit, const std::string& what,
           std::chrono::milliseconds every = std::chrono::milliseconds{50}) {
  auto end = clk::now() + limit;
  while (true) {
    try {
      if (ok())
        return;
    } catch (const std::runtime_error&) {
      // not up yet
    }
    if (clk::now() > end)
      throw std::runtime_error(what);
    std::this_thread::sleep_for(every);
  }
}

void phase_remote_fanout(reporter& r, const bench_options& o, const std::string& dir);
void phase_spread(reporter& r, const bench_options& o, const std::string& dir);
/// (m) placement by key: balance over 2-16 members, a forwarded submit beside a local one;
/// and how long a change of the cluster group takes to reach its 5 members.
void phase_placement(reporter& r, const bench_options& o, const std::string& dir);
/// (n) steps run by external workers over HTTP beside in-node steps (phases_workers.cpp).
void phase_workers(reporter& r, const bench_options& o, const std::string& dir);
/// Part of (m): `changes` changes of a 5-member cluster group in this process, each timed
/// until every member applied it (group_change_p50_ms, group_change_max_ms).
void measure_group_propagation(reporter& r, const std::string& dir, size_t changes);

// -- (i) takeover by a standby (phases_standby.cpp) ------------------------------------------

/// M procedures waiting on events, journaled on `dir` (then the parent SIGKILLs the node).
void phase_takeover_populate(reporter& r, const bench_options& o, const std::string& dir);
/// proctord active and standby on `dir`; SIGKILL of the active to the first step the
/// standby commits.
void phase_takeover(reporter& r, const bench_options& o, const std::string& dir);

// -- (k) a replica group's failover (phases_replicas.cpp) -------------------------------------

/// M waiting procedures submitted to one proctord and to a group of three replicas (timed),
/// then SIGKILL of the group's leader to the first step another replica commits.
void phase_replica_failover(reporter& r, const bench_options& o, const std::string& dir);

// -- (l): a loop in a tree that compacts its journal (phases_compaction.cpp) ---------------

/// One demo.reconcile looping `loops` times, its tree compacted past `compact_after` records
/// (0: never), then left waiting for an event; reports loops/s and the most records the
/// journal held meanwhile, then waits for the SIGKILL.
void phase_loop_populate(reporter& r, const bench_options& o, const std::string& dir, size_t loops,
                         uint64_t compact_after);
/// The node recovered after the SIGKILL: how long, how many records it read; then the event
/// ends the loop, which must say it ran `loops` times.
void phase_loop_recover(reporter& r, const bench_options& o, const std::string& dir, uint64_t id,
                        size_t loops, uint64_t compact_after);

}  // namespace proctor::bench
