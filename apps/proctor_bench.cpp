// proctor-bench: measures, in one run and on a fresh data directory (fsync on), what the
// README's performance claims rest on:
//   (a) the limit: raw RocksDB group commit — one writer, WriteBatches of 1000 records the
//       size of a journaled no-op step, sync = true;
//   (b) durable step throughput: N procedures x S no-op steps, submit -> SUCCESS;
//   (c) latency of one-step procedures, submit -> SUCCESS, open loop at about half the
//       maximum one-step rate: p50 / p99 / p999;
//   (d) recovery: M procedures suspended on an event, the node SIGKILLed, then the time
//       until a new node has rehydrated all of them;
//   (e) resident-memory growth per waiting procedure at that M;
//   (f) fan-out: one root with C children, submit -> SUCCESS.
//
// Every phase runs in a forked child process (fresh heap, fresh actor system, its own
// subdirectory of --data-dir) and sends its figures back through a pipe, one "key value"
// line each. The parent never creates an actor system or a thread, so forking stays safe,
// and it can SIGKILL a child (the crash of phase d, or a phase that overruns its deadline).
// Clients run in-process as actors of the child's actor system: no CAF networking.
#include <fcntl.h>
#include <malloc.h>
#if PROCTOR_HAVE_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "actors/node.hpp"
#include "actors/rpc.hpp"
#include "demo.pb.h"
#include "journal.pb.h"
#include "persistence/keys.hpp"
#include "procedures/demo.hpp"
#include "procedures/registry.hpp"
#include "wire.pb.h"

namespace {

namespace fs = std::filesystem;
using clk = std::chrono::steady_clock;
using proctor::rpc_atom;

double secs(clk::duration d) {
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
  std::string phases = "abcdef";  // which measures to run (d and e are one phase)
  bool ledger = false;  // (b) with demo.ledger (a file per step, on the worker threads)
};

// -- child processes ------------------------------------------------------------------------

/// The child's end of the pipe: "key value" lines, then "end".
class reporter {
public:
  reporter(int fd, bool wait_for_kill) : fd_(fd), wait_for_kill_(wait_for_kill) {}

  void put(const std::string& key, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", v);
    put_str(key, buf);
  }

  void put_str(const std::string& key, std::string v) {
    for (auto& c : v)
      if (c == '\n' || c == '\r')
        c = ' ';
    write_all(key + ' ' + v + '\n');
  }

  /// Reports the end of the phase and leaves the process without running any destructor
  /// (no actor system teardown, no clean database close). A phase that ends in a crash
  /// waits here for the parent's SIGKILL.
  [[noreturn]] void finish() {
    write_all("end\n");
    if (wait_for_kill_)
      for (;;)
        ::pause();
    ::_exit(0);
  }

private:
  void write_all(const std::string& s) {
    const char* p = s.data();
    size_t left = s.size();
    while (left > 0) {
      auto n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        ::_exit(3);
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

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
                       const std::function<void(reporter&)>& body) {
  phase_result res;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    res.error = std::string("pipe: ") + std::strerror(errno);
    return res;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  auto t0 = clk::now();
  pid_t pid = ::fork();
  if (pid < 0) {
    res.error = std::string("fork: ") + std::strerror(errno);
    ::close(p[0]);
    ::close(p[1]);
    return res;
  }
  if (pid == 0) {
    ::close(p[0]);
    reporter r(p[1], kill_after);
    try {
      body(r);
      r.put_str("error", "phase body returned without finishing");
    } catch (const std::exception& e) {
      r.put_str("error", e.what());
    } catch (...) {
      r.put_str("error", "unknown exception");
    }
    r.finish();
  }
  ::close(p[1]);
  std::string buf;
  bool ended = false;
  auto deadline = t0 + std::chrono::duration_cast<clk::duration>(
                         std::chrono::duration<double>(timeout_s));
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clk::now());
    if (left.count() <= 0) {
      res.timed_out = true;
      break;
    }
    pollfd pfd{p[0], POLLIN, 0};
    int n = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      continue;
    char tmp[4096];
    auto got = ::read(p[0], tmp, sizeof(tmp));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;  // EOF: the child died (or exited) before "end"
    buf.append(tmp, static_cast<size_t>(got));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      auto line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (line == "end") {
        ended = true;
        break;
      }
      auto sp = line.find(' ');
      if (sp == std::string::npos)
        res.values[line] = "";
      else
        res.values[line.substr(0, sp)] = line.substr(sp + 1);
    }
    if (ended)
      break;
  }
  ::close(p[0]);
  if (kill_after || res.timed_out)
    ::kill(pid, SIGKILL);
  int status = 0;
  // A finished child exits at once; give it a moment, then make sure.
  for (int i = 0; i < 500; ++i) {
    auto w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid)
      break;
    if (i == 499) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  res.wall_s = secs(clk::now() - t0);
  if (auto e = res.values.find("error"); e != res.values.end())
    res.error = e->second;
  else if (res.timed_out)
    res.error = name + " did not finish within " + std::to_string(static_cast<int>(timeout_s))
                + " s (killed)";
  else if (!ended) {
    if (WIFSIGNALED(status))
      res.error = name + ": child killed by signal " + std::to_string(WTERMSIG(status));
    else
      res.error = name + ": child exited with status " + std::to_string(WEXITSTATUS(status))
                  + " before reporting";
  }
  res.ok = ended && res.error.empty();
  return res;
}

// -- helpers used inside children ----------------------------------------------------------

size_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr)
    return 0;
  unsigned long size = 0, resident = 0;
  if (std::fscanf(f, "%lu %lu", &size, &resident) != 2)
    resident = 0;
  std::fclose(f);
  return static_cast<size_t>(resident) * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

class bench_config : public caf::actor_system_config {
public:
  bench_config() {
    proctor::tune_actor_system(*this);
  }
};

std::string submit_req(const std::string& type, const std::string& args) {
  proctor::pb::Request r;
  auto* s = r.mutable_submit();
  s->set_type(type);
  s->set_args_json(args);
  return r.SerializeAsString();
}

std::string wait_req(uint64_t id) {
  proctor::pb::Request r;
  r.mutable_wait()->set_id(id);
  return r.SerializeAsString();
}

std::string status_req(uint64_t id) {
  proctor::pb::Request r;
  r.mutable_status()->set_id(id);
  return r.SerializeAsString();
}

std::string metrics_req() {
  proctor::pb::Request r;
  r.mutable_metrics();
  return r.SerializeAsString();
}

std::string list_req(proctor::pb::ProcState state) {
  proctor::pb::Request r;
  r.mutable_list()->set_state(state);
  return r.SerializeAsString();
}

/// One blocking request from the child's main thread.
proctor::pb::Response call(caf::scoped_actor& self, const caf::actor& exec,
                           const std::string& req,
                           caf::duration timeout = caf::duration{std::chrono::seconds{60}}) {
  proctor::pb::Response out;
  std::string err;
  self->request(exec, timeout, rpc_atom::value, req)
    .receive(
      [&](std::string& bytes) {
        if (!out.ParseFromString(bytes))
          err = "unparsable response";
      },
      [&](caf::error& e) { err = self->system().render(e); });
  if (!err.empty())
    throw std::runtime_error("request failed: " + err);
  return out;
}

/// A gauge or counter from the node's Prometheus text (first sample of that name).
double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0
        && (line[name.size()] == ' ' || line[name.size()] == '{')) {
      auto sp = line.rfind(' ');
      return std::strtod(line.c_str() + sp + 1, nullptr);
    }
  return -1;
}

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

  void start(const std::string& dir, size_t workers) {
    n = std::make_unique<proctor::node>(*sys, types);
    proctor::node_options o;
    o.data_dir = dir;
    o.workers = workers;
    auto r = n->start(o);
    if (!r)
      throw std::runtime_error("node start on " + dir + " failed: " + sys->render(r.error()));
    report = *r;
  }

  caf::actor exec() const { return n->executor(); }
};

// -- a client that keeps many procedures in flight ------------------------------------------

struct burst_result {
  size_t submitted = 0;
  size_t succeeded = 0;
  size_t not_succeeded = 0;
  uint64_t min_id = UINT64_MAX;
  uint64_t max_id = 0;
  std::string error;
  clk::time_point t_end;
};

struct burst_state {
  caf::actor exec;
  size_t count = 0;
  size_t window = 0;  ///< procedures in flight at most
  std::function<std::string(size_t)> make;
  bool wait_end = true;  ///< wait for each procedure to end (else only for the submit ack)
  size_t offset = 0;  ///< this client's first index
  size_t next = 0;
  size_t ended = 0;
  bool finished = false;
  burst_result res;
  std::shared_ptr<std::promise<burst_result>> done;
};

void burst_finish(caf::event_based_actor* self, const std::shared_ptr<burst_state>& st) {
  if (st->finished)
    return;
  st->finished = true;
  st->res.t_end = clk::now();
  st->done->set_value(st->res);
  self->quit();
}

void burst_one_ended(caf::event_based_actor* self, const std::shared_ptr<burst_state>& st);

void burst_submit(caf::event_based_actor* self, const std::shared_ptr<burst_state>& st) {
  auto i = st->next++;
  auto on_error = [self, st](caf::error& e) {
    st->res.error = self->system().render(e);
    burst_finish(self, st);
  };
  self->request(st->exec, caf::infinite, rpc_atom::value, st->make(st->offset + i))
    .then(
      [self, st, on_error](std::string& bytes) {
        if (st->finished)
          return;
        proctor::pb::Response r;
        if (!r.ParseFromString(bytes) || r.code() != proctor::pb::Response::OK) {
          st->res.error = "submit refused: " + r.error();
          return burst_finish(self, st);
        }
        ++st->res.submitted;
        st->res.min_id = std::min<uint64_t>(st->res.min_id, r.id());
        st->res.max_id = std::max<uint64_t>(st->res.max_id, r.id());
        if (!st->wait_end)
          return burst_one_ended(self, st);
        self->request(st->exec, caf::infinite, rpc_atom::value, wait_req(r.id()))
          .then(
            [self, st](std::string& bytes) {
              if (st->finished)
                return;
              proctor::pb::Response w;
              if (w.ParseFromString(bytes) && w.code() == proctor::pb::Response::OK
                  && w.status().state() == proctor::pb::SUCCESS)
                ++st->res.succeeded;
              else
                ++st->res.not_succeeded;
              burst_one_ended(self, st);
            },
            on_error);
      },
      on_error);
}

void burst_one_ended(caf::event_based_actor* self, const std::shared_ptr<burst_state>& st) {
  ++st->ended;
  if (st->next < st->count)
    burst_submit(self, st);
  if (st->ended == st->count)
    burst_finish(self, st);
}

caf::behavior burst_client(caf::event_based_actor* self, std::shared_ptr<burst_state> st) {
  auto first = std::min(st->window, st->count);
  for (size_t i = 0; i < first; ++i)
    burst_submit(self, st);
  if (st->count == 0)
    burst_finish(self, st);
  return {[](caf::ok_atom) {}};
}

/// Submits `count` procedures (at most `window` in flight), returns when all ended (or, with
/// wait_end = false, when all were acknowledged). Wall time from the first submit.
///
/// The work is split over client actors with at most `per_client` requests in flight each:
/// CAF 0.17 keeps an actor's pending requests in a flat map that is searched and erased
/// linearly, so one client with 20,000 requests in flight spends most of the run on its own
/// bookkeeping (17 % of the samples of phase b before this split), not on the node's.
burst_result run_burst(caf::actor_system& sys, const caf::actor& exec, size_t count,
                       size_t window, std::function<std::string(size_t)> make, bool wait_end) {
  constexpr size_t per_client = 128;
  window = std::max<size_t>(1, std::min(window, std::max<size_t>(count, 1)));
  auto clients = (window + per_client - 1) / per_client;
  std::vector<std::future<burst_result>> futs;
  size_t offset = 0;
  for (size_t k = 0; k < clients; ++k) {
    auto st = std::make_shared<burst_state>();
    st->exec = exec;
    st->count = count / clients + (k < count % clients ? 1 : 0);
    st->offset = offset;
    offset += st->count;
    st->window = std::max<size_t>(1, window / clients);
    st->make = make;
    st->wait_end = wait_end;
    st->done = std::make_shared<std::promise<burst_result>>();
    futs.push_back(st->done->get_future());
    sys.spawn(burst_client, st);
  }
  burst_result all;
  all.t_end = clk::time_point::min();
  for (auto& f : futs) {
    auto r = f.get();
    all.submitted += r.submitted;
    all.succeeded += r.succeeded;
    all.not_succeeded += r.not_succeeded;
    all.min_id = std::min(all.min_id, r.min_id);
    all.max_id = std::max(all.max_id, r.max_id);
    if (all.error.empty())
      all.error = r.error;
    all.t_end = std::max(all.t_end, r.t_end);
  }
  return all;
}

// -- an open-loop pacer ---------------------------------------------------------------------

struct pacer_result {
  std::vector<double> latency_us;  ///< of the procedures submitted in the measured window
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

void pacer_finish(caf::event_based_actor* self, const std::shared_ptr<pacer_state>& st) {
  if (st->finished)
    return;
  st->finished = true;
  st->res.sent = st->measured_sent;
  st->res.measured_s = secs(st->t_stop - st->t_measure);
  st->done->set_value(std::move(st->res));
  self->quit();
}

void pacer_send(caf::event_based_actor* self, const std::shared_ptr<pacer_state>& st,
                clk::time_point now) {
  bool measured = now >= st->t_measure;
  ++st->sent;
  st->measured_sent += measured ? 1 : 0;
  ++st->outstanding;
  auto t_sub = clk::now();
  auto on_error = [self, st](caf::error& e) {
    st->res.error = self->system().render(e);
    pacer_finish(self, st);
  };
  self->request(st->exec, caf::infinite, rpc_atom::value, st->req)
    .then(
      [self, st, t_sub, measured, on_error](std::string& bytes) {
        proctor::pb::Response r;
        if (!r.ParseFromString(bytes) || r.code() != proctor::pb::Response::OK) {
          st->res.error = "submit refused: " + r.error();
          return pacer_finish(self, st);
        }
        self->request(st->exec, caf::infinite, rpc_atom::value, wait_req(r.id()))
          .then(
            [self, st, t_sub, measured](std::string& bytes) {
              auto t_end = clk::now();
              proctor::pb::Response w;
              if (!w.ParseFromString(bytes) || w.status().state() != proctor::pb::SUCCESS)
                ++st->res.not_succeeded;
              else if (measured)
                st->res.latency_us.push_back(
                  std::chrono::duration<double, std::micro>(t_end - t_sub).count());
              --st->outstanding;
              if (st->stopped && st->outstanding == 0)
                pacer_finish(self, st);
            },
            on_error);
      },
      on_error);
}

caf::behavior pacer(caf::event_based_actor* self, std::shared_ptr<pacer_state> st) {
  self->send(self, caf::tick_atom::value);
  return {
    [self, st](caf::tick_atom) {
      auto now = clk::now();
      if (now >= st->t_stop) {
        st->stopped = true;
        if (st->outstanding == 0)
          pacer_finish(self, st);
        return;
      }
      // Open loop: the schedule depends on the clock only, never on completions.
      auto due = static_cast<size_t>(st->rate * secs(now - st->t_start));
      while (st->sent < due)
        pacer_send(self, st, now);
      self->delayed_send(self, std::chrono::microseconds{500}, caf::tick_atom::value);
    },
  };
}

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return 0;
  auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

/// Journal counters of a node, for the table.
void report_journal(reporter& r, caf::scoped_actor& self, const caf::actor& exec,
                    const std::string& prefix) {
  auto m = call(self, exec, metrics_req()).text();
  auto batches = metric(m, "proctor_journal_batches_total");
  auto records = metric(m, "proctor_journal_records_total");
  auto fsync_us = metric(m, "proctor_journal_fsync_us_total");
  r.put(prefix + "journal_batches", batches);
  r.put(prefix + "journal_records", records);
  r.put(prefix + "journal_fsync_us", fsync_us);
}

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

/// The size of a journaled no-op step: a StepCommitted record of demo.noop in mid-run.
std::string sample_step_record(const bench_options& o) {
  proctor::pb::NoopData d;
  d.set_steps(o.steps);
  d.set_step(o.steps / 2 + 1);
  proctor::pb::JournalRecord rec;
  rec.set_format(1);
  auto* s = rec.mutable_step();
  s->set_proc_id(o.procedures);
  s->set_executed_state(proctor::pb::NOOP_STEP);
  s->set_next_state(proctor::pb::NOOP_STEP);
  s->set_data(d.SerializeAsString());
  s->set_attempt(1);
  return rec.SerializeAsString();
}

/// (a) raw RocksDB: one writer, batches of 1000 records, sync = true. The options are the
/// journal store's (rocksdb_store.cpp), so the only difference is the engine on top.
void phase_raw(reporter& r, const bench_options& o, const std::string& dir) {
  rocksdb::Options opts;
  opts.create_if_missing = true;
  opts.paranoid_checks = true;
  opts.IncreaseParallelism(2);
  opts.write_buffer_size = 32 << 20;
  opts.max_write_buffer_number = 3;
  opts.max_total_wal_size = 256 << 20;
  opts.keep_log_file_num = 5;
  rocksdb::DB* raw = nullptr;
  auto st = rocksdb::DB::Open(opts, dir, &raw);
  if (!st.ok())
    throw std::runtime_error("rocksdb open " + dir + ": " + st.ToString());
  std::unique_ptr<rocksdb::DB> db(raw);
  const auto value = sample_step_record(o);
  constexpr size_t per_batch = 1000;
  rocksdb::WriteOptions wo;
  wo.sync = true;
  uint64_t lsn = 0;
  char key[proctor::journal_keys::key_size];
  auto write_one = [&] {
    rocksdb::WriteBatch b;
    for (size_t i = 0; i < per_batch; ++i) {
      ++lsn;
      proctor::journal_keys::put_be64(key, 1 + lsn / 7);  // a few records per tree
      proctor::journal_keys::put_be64(key + 8, lsn);
      b.Put(rocksdb::Slice(key, sizeof(key)), value);
    }
    auto s = db->Write(wo, &b);
    if (!s.ok())
      throw std::runtime_error("rocksdb write: " + s.ToString());
  };
  for (int i = 0; i < 3; ++i)
    write_one();  // warm-up: WAL file created, first fsyncs
  size_t batches = 0;
  std::vector<double> batch_us;
  auto t0 = clk::now();
  double el = 0;
  while (el < o.raw_seconds || batches < 20) {
    auto tb = clk::now();
    write_one();
    ++batches;
    auto te = clk::now();
    batch_us.push_back(std::chrono::duration<double, std::micro>(te - tb).count());
    el = secs(te - t0);
  }
  // For (c): what one synced write of a single record costs here (the floor of every
  // journal round trip on a procedure's critical path).
  std::vector<double> one_us;
  for (int i = 0; i < 200; ++i) {
    rocksdb::WriteBatch b;
    ++lsn;
    proctor::journal_keys::put_be64(key, 1 + lsn / 7);
    proctor::journal_keys::put_be64(key + 8, lsn);
    b.Put(rocksdb::Slice(key, sizeof(key)), value);
    auto tb = clk::now();
    auto s = db->Write(wo, &b);
    if (!s.ok())
      throw std::runtime_error("rocksdb write: " + s.ToString());
    one_us.push_back(std::chrono::duration<double, std::micro>(clk::now() - tb).count());
  }
  std::sort(batch_us.begin(), batch_us.end());
  std::sort(one_us.begin(), one_us.end());
  r.put("records_per_s", static_cast<double>(batches * per_batch) / el);
  r.put("batches", static_cast<double>(batches));
  r.put("batch_ms", el * 1000.0 / static_cast<double>(batches));
  r.put("batch_p99_us", percentile(batch_us, 0.99));
  r.put("one_p50_us", percentile(one_us, 0.50));
  r.put("one_p99_us", percentile(one_us, 0.99));
  r.put("value_bytes", static_cast<double>(value.size()));
  r.finish();
}

/// (b) durable steps: N demo.noop procedures of S steps, all in flight, submit -> SUCCESS.
void phase_steps(reporter& r, const bench_options& o, const std::string& dir) {
  node_in_child nc;
  nc.start(dir, o.workers);
  auto req = submit_req("demo.noop", "{\"steps\":" + std::to_string(o.steps) + "}");
  if (o.ledger) {
    auto ledger_dir = dir + "/ledger";
    std::filesystem::create_directories(ledger_dir);
    req = submit_req("demo.ledger", "{\"steps\":" + std::to_string(o.steps)
                                      + ",\"ledger_dir\":\"" + ledger_dir + "\"}");
  }
  auto t0 = clk::now();
  auto res = run_burst(*nc.sys, nc.exec(), o.procedures, o.procedures,
                       [req](size_t) { return req; }, true);
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  if (res.not_succeeded > 0)
    throw std::runtime_error(std::to_string(res.not_succeeded)
                             + " procedure(s) did not end in SUCCESS");
  auto el = secs(res.t_end - t0);
  r.put("seconds", el);
  r.put("steps_per_s", static_cast<double>(o.procedures) * o.steps / el);
  r.put("procs_per_s", static_cast<double>(o.procedures) / el);
  caf::scoped_actor self{*nc.sys};
  report_journal(r, self, nc.exec(), "");
  r.finish();
}

/// (c, first half) the maximum one-step rate: K one-step procedures, all in flight, on a node
/// of their own.
void phase_latency_calibrate(reporter& r, const bench_options& o, const std::string& dir) {
  node_in_child nc;
  nc.start(dir, o.workers);
  auto req = submit_req("demo.noop", "{\"steps\":1}");
  size_t k = std::clamp<size_t>(o.procedures / 4, 1000, 5000);
  auto t0 = clk::now();
  auto res = run_burst(*nc.sys, nc.exec(), k, k, [req](size_t) { return req; }, true);
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  if (res.not_succeeded > 0)
    throw std::runtime_error(std::to_string(res.not_succeeded)
                             + " procedure(s) did not end in SUCCESS");
  r.put("max_rate", static_cast<double>(k) / secs(res.t_end - t0));
  r.put("count", static_cast<double>(k));
  r.finish();
}

/// (c) latency of one-step procedures: an open-loop pacer submits at `rate` for 0.5 s of
/// warm-up plus --latency-seconds on a fresh node; every submit -> SUCCESS is recorded.
void phase_latency(reporter& r, const bench_options& o, const std::string& dir, double rate) {
  node_in_child nc;
  nc.start(dir, o.workers);
  auto req = submit_req("demo.noop", "{\"steps\":1}");
  auto st = std::make_shared<pacer_state>();
  st->exec = nc.exec();
  st->rate = rate;
  st->req = req;
  st->t_start = clk::now();
  auto warmup = std::chrono::milliseconds{500};
  st->t_measure = st->t_start + warmup;
  st->t_stop = st->t_measure + std::chrono::duration_cast<clk::duration>(
                                 std::chrono::duration<double>(o.latency_seconds));
  st->done = std::make_shared<std::promise<pacer_result>>();
  auto fut = st->done->get_future();
  nc.sys->spawn(pacer, st);
  auto res = fut.get();
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  if (res.not_succeeded > 0)
    throw std::runtime_error(std::to_string(res.not_succeeded)
                             + " procedure(s) did not end in SUCCESS");
  auto& v = res.latency_us;
  std::sort(v.begin(), v.end());
  r.put("rate", rate);
  r.put("achieved_rate", static_cast<double>(res.sent) / res.measured_s);
  r.put("count", static_cast<double>(v.size()));
  r.put("p50_us", percentile(v, 0.50));
  r.put("p99_us", percentile(v, 0.99));
  r.put("p999_us", percentile(v, 0.999));
  r.put("max_us", v.empty() ? 0 : v.back());
  r.finish();
}

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

void wait_for_waiting(caf::scoped_actor& self, const caf::actor& exec, size_t m,
                      double timeout_s) {
  wait_for_gauge(self, exec, "proctor_waiting_procedures", m, timeout_s);
}

std::string event_req(const std::string& key, const std::string& payload) {
  proctor::pb::Request r;
  r.mutable_event()->set_key(key);
  r.mutable_event()->set_payload_json(payload);
  return r.SerializeAsString();
}

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
  // Then they hibernate (executor_config::hibernate_after): their actors go.
  wait_for_gauge(self, nc.exec(), "proctor_hibernated_procedures", o.waiting, 120);
  // The actors' memory is free now but stays resident in malloc's arenas until reused (or,
  // with jemalloc, until its decay timer returns it); return the free pages to the OS now to
  // see what the hibernated procedures still hold.
  release_free_memory();
  auto rss2 = rss_bytes();
  auto per_proc = [&](size_t rss) {
    return (static_cast<double>(rss) - static_cast<double>(rss0))
           / static_cast<double>(o.waiting);
  };
  r.put("seconds", el);
  r.put("min_id", static_cast<double>(res.min_id));
  r.put("max_id", static_cast<double>(res.max_id));
  r.put("bytes_per_proc", per_proc(rss1));
  r.put("bytes_per_proc_hibernated", per_proc(rss2));
  r.finish();  // waits for the SIGKILL: no clean shutdown
}

/// (d, second half) and (e): a new node on the crashed node's directory. Rehydrated = every
/// one of the M procedures is WAITING on its event again and listed so by the executor:
/// roots that only wait for an event come back hibernated (no actor; the event restarts
/// them from the journal). After the clock stops, events wake a sample of them, to show
/// they really were rehydrated (and how fast hibernated roots wake).
void phase_recover(reporter& r, const bench_options& o, const std::string& dir,
                   uint64_t last_id) {
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
      throw std::runtime_error("status of procedure " + std::to_string(last_id) + ": "
                               + s.error());
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
  r.put("bytes_per_proc_at_start",
        (static_cast<double>(rss_started) - static_cast<double>(rss0))
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

// -- output ---------------------------------------------------------------------------------

std::string fmt_num(double v, int decimals = 0) {
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

std::string json_num(const std::optional<double>& v, int decimals = 0) {
  if (!v || !std::isfinite(*v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, *v);
  return buf;
}

std::string verdict(bool pass) {
  return pass ? "PASS" : "MISS";
}

} // namespace

int main(int argc, char** argv) {
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
  auto* opt_c = app.add_option("--children", o.children,
                               "(f) children of the wide root C (default 10000)")
                  ->check(CLI::Range(1, 1000000));
  app.add_option("--workers", o.workers, "Run slots of each node (default 2)")
    ->check(CLI::Range(1, 256));
  app.add_option("--latency-seconds", o.latency_seconds,
                 "(c) measured seconds (after 0.5 s warm-up)")
    ->check(CLI::Range(0.1, 600.0));
  app.add_option("--latency-rate", o.latency_rate,
                 "(c) one-step procedures/s (default: half the measured maximum)");
  app.add_option("--raw-seconds", o.raw_seconds, "(a) seconds of raw RocksDB writes")
    ->check(CLI::Range(0.1, 600.0));
  app.add_option("--fanout-timeout", o.fanout_timeout, "(f) give up after this many seconds")
    ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--phases", o.phases,
                 "Measures to run, e.g. 'bf' (profiling); d and e run together (default abcdef)");
  app.add_flag("--quick", o.quick, "Small sizes for CI: N=2000, M=5000, C=1000");
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    if (opt_n->count() == 0)
      o.procedures = 2000;
    if (opt_m->count() == 0)
      o.waiting = 5000;
    if (opt_c->count() == 0)
      o.children = 1000;
    o.raw_seconds = std::min(o.raw_seconds, 1.0);
    o.latency_seconds = std::min(o.latency_seconds, 1.0);
  }
  if (o.procedures == 0 || o.waiting == 0) {
    std::cerr << "proctor-bench: --procedures and --waiting must be positive\n";
    return 64;
  }

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

  auto& out = o.json ? std::cerr : std::cout;
  auto progress = [&](const std::string& what, const phase_result& p) {
    std::cerr << "proctor-bench: " << what << (p.ok ? " done" : " FAILED") << " in "
              << fmt_num(p.wall_s, 2) << " s" << (p.ok ? "" : ": " + p.error) << '\n';
  };
  auto t_run = clk::now();

  auto want = [&](const char* letters) {
    return o.phases.find_first_of(letters) != std::string::npos;
  };
  auto skipped = [] {
    phase_result p;
    p.error = "not run (--phases)";
    return p;
  };
  phase_result raw = skipped(), steps = skipped(), cal = skipped(), lat = skipped(),
               pop = skipped(), rec = skipped(), fan = skipped();
  if (want("a")) {
    raw = run_phase("(a) raw RocksDB", 60, false,
                    [&](reporter& r) { phase_raw(r, o, sub("raw")); });
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
  auto total_s = secs(clk::now() - t_run);

  // -- figures ------------------------------------------------------------------------------
  auto get = [](const phase_result& p, const char* k) -> std::optional<double> {
    return p.ok ? p.num(k) : std::nullopt;
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
  } else {
    row("(b) durable steps", failed(steps), "");
  }
  if (!want("c")) {
  } else if (p99) {
    row("(c) one-step latency at " + fmt_num(*lat.num("rate")) + "/s"
          + (cal.num("max_rate") ? " (max " + fmt_num(*cal.num("max_rate")) + "/s)" : ""),
        "p50 " + fmt_num(*p50) + "  p99 " + fmt_num(*p99) + "  p999 " + fmt_num(*p999) + " us",
        "p99 <= 5,000 us " + verdict(*p99 <= 5000));
    row("    samples", fmt_num(*lat.num("count")) + " at " + fmt_num(*lat.num("achieved_rate"))
                         + "/s, max " + fmt_num(*lat.num("max_us")) + " us",
        "");
  } else {
    row("(c) one-step latency", failed(lat), "");
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
        fmt_num(*rec.num("bytes_per_proc_at_start")) + " B",
        "(journal opened and folded)");
    row("    on the node that submitted them",
        fmt_num(pop.num("bytes_per_proc").value_or(0)) + " B / "
          + fmt_num(pop.num("bytes_per_proc_hibernated").value_or(0)) + " B",
        "(all WAITING / all hibernated, free pages purged)");
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
  out << "\npeer (OpenStack TaskFlow + SQLite, same workload shape): "
         "python3 ../shared/peers/taskflow_bench.py 5 20\n";
  out << "total " << fmt_num(total_s, 1) << " s\n";

  if (o.json) {
    std::cout << "{\"raw_sync_batch_records_per_s\": " << json_num(raw_rps)
              << ", \"durable_steps_per_s\": " << json_num(steps_ps)
              << ", \"procedures_per_s\": " << json_num(procs_ps) << ", \"latency_us\": {\"p50\": "
              << json_num(p50) << ", \"p99\": " << json_num(p99) << ", \"p999\": "
              << json_num(p999) << "}, \"recovery_procs_per_s\": " << json_num(rec_ps)
              << ", \"bytes_per_waiting_procedure\": " << json_num(bytes)
              << ", \"wide_tree_10k_children_s\": " << json_num(fan_s, 3) << "}" << std::endl;
  }
  bool all_ok = (raw.ok || !want("a")) && (steps.ok || !want("b")) && (lat.ok || !want("c"))
                && ((pop.ok && rec.ok) || !want("de")) && (fan.ok || !want("f"));
  return all_ok ? 0 : 1;
}
