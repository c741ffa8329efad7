// proctor-bench, the phases that measure writes, each run in a child process of its own:
// (a) raw RocksDB group commit, (b) durable step throughput, (c) one-step latency (the
// calibration of the maximum rate, then the open-loop measurement).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <proctor/demo.pb.h>
#include <proctor/journal.pb.h>
#include <proctor/wire.pb.h>

#include "bench.hpp"
#include "persistence/keys.hpp"
#include "persistence/rocksdb_store.hpp"

namespace proctor::bench {

// -- the phases (each runs in its own child process) ---------------------------------------

namespace {

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

/// RocksDB alone, on the journal store's options (journal_db_options()).
std::unique_ptr<rocksdb::DB> open_raw(const std::string& dir) {
  rocksdb::DB* raw = nullptr;
  auto st = rocksdb::DB::Open(proctor::journal_db_options(), dir, &raw);
  if (!st.ok())
    throw std::runtime_error("rocksdb open " + dir + ": " + st.ToString());
  return std::unique_ptr<rocksdb::DB>(raw);
}

}  // namespace

/// (a) raw RocksDB: one writer, batches of 1000 records, sync = true. The options are the
/// journal store's (journal_db_options()), so the only difference is the engine on top.
void phase_raw(reporter& r, const bench_options& o, const std::string& dir) {
  auto db = open_raw(dir);
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
    req = submit_req("demo.ledger", "{\"steps\":" + std::to_string(o.steps) + ",\"ledger_dir\":\""
                                      + ledger_dir + "\"}");
  }
  caf::scoped_actor self{*nc.sys};
  const auto before = count_work(self, nc.exec());
  auto t0 = clk::now();
  auto res = run_burst(
    *nc.sys, nc.exec(), o.procedures, o.procedures, [req](size_t) { return req; }, true);
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  if (res.not_succeeded > 0)
    throw std::runtime_error(std::to_string(res.not_succeeded)
                             + " procedure(s) did not end in SUCCESS");
  auto el = secs(res.t_end - t0);
  r.put("seconds", el);
  r.put("steps_per_s", static_cast<double>(o.procedures) * o.steps / el);
  r.put("procs_per_s", static_cast<double>(o.procedures) / el);
  // What each procedure cost, the bench's own submits and waits included (their allocations).
  report_costs(r, before, count_work(self, nc.exec()), static_cast<double>(o.procedures),
               static_cast<double>(o.procedures) * o.steps);
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
  const double cpu0 = cpu_us();
  auto res = run_burst(
    *nc.sys, nc.exec(), k, k, [req](size_t) { return req; }, true);
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  if (res.not_succeeded > 0)
    throw std::runtime_error(std::to_string(res.not_succeeded)
                             + " procedure(s) did not end in SUCCESS");
  r.put("max_rate", static_cast<double>(k) / secs(res.t_end - t0));
  r.put("cpu_busy", (cpu_us() - cpu0) / 1e6 / secs(clk::now() - t0));
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
  st->t_stop =
    st->t_measure
    + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(o.latency_seconds));
  st->done = std::make_shared<std::promise<pacer_result>>();
  auto fut = st->done->get_future();
  nc.sys->spawn(pacer, st);
  // The process's CPU (the node and the pacer) over the measured window, from the end of the
  // warm-up to the last answer: how busy "half load" keeps the cores, beside the
  // calibration's figure.
  std::this_thread::sleep_until(st->t_measure);
  const double cpu0 = cpu_us();
  const auto t_cpu0 = clk::now();
  auto res = fut.get();
  r.put("cpu_busy", (cpu_us() - cpu0) / 1e6 / secs(clk::now() - t_cpu0));
  if (!res.error.empty())
    throw std::runtime_error(res.error);
  if (res.not_succeeded > 0)
    throw std::runtime_error(std::to_string(res.not_succeeded)
                             + " procedure(s) did not end in SUCCESS");
  auto& v = res.latency_us;
  // How bunched the slowest 1 % are: the 10 ms windows of sending they fall in (a steady
  // queue spreads them over the run; a stall gathers them in a few windows).
  {
    auto sent_order = v;
    std::sort(v.begin(), v.end());
    const double p99 = percentile(v, 0.99);
    std::set<int64_t> windows;
    for (size_t i = 0; i < sent_order.size(); ++i)
      if (sent_order[i] >= p99)
        windows.insert(static_cast<int64_t>(res.sent_at_ms[i] / 10));
    r.put("tail_windows", static_cast<double>(windows.size()));
  }
  for (auto [key, part] : {std::pair{"late", &res.late_us}, std::pair{"ack", &res.ack_us},
                           std::pair{"end", &res.end_us}}) {
    std::sort(part->begin(), part->end());
    r.put(std::string(key) + "_p50_us", percentile(*part, 0.50));
    r.put(std::string(key) + "_p99_us", percentile(*part, 0.99));
  }
  r.put("rate", rate);
  r.put("achieved_rate", static_cast<double>(res.sent) / res.measured_s);
  r.put("count", static_cast<double>(v.size()));
  r.put("p50_us", percentile(v, 0.50));
  r.put("p99_us", percentile(v, 0.99));
  r.put("p999_us", percentile(v, 0.999));
  r.put("max_us", v.empty() ? 0 : v.back());
  caf::scoped_actor self{*nc.sys};
  report_journal(r, self, nc.exec(), "");
  r.finish();
}

/// (c) the floor under it: what the disk alone allows at the same arrival rate. A one-step
/// procedure needs two synced writes, one after the other (its submit, then its step with its
/// end); here each arrival needs two records written one after the other, by one writer with
/// group commit on the journal's RocksDB options and nothing else: every synced write takes
/// all that is waiting. Arrivals are paced open-loop on a schedule and latency counts from the
/// scheduled arrival, so a stalled write delays every arrival it holds up, as in (c).
void phase_latency_floor(reporter& r, const bench_options& o, const std::string& dir, double rate) {
  auto db = open_raw(dir);
  const auto value = sample_step_record(o);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  auto period =
    std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(1.0 / rate));
  auto t_start = clk::now();
  auto t_measure = t_start + std::chrono::milliseconds{500};
  auto t_stop =
    t_measure
    + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(o.latency_seconds));
  struct item {
    uint64_t id;
    clk::time_point arrival;
  };
  std::vector<item> first, second;  // waiting for their first / second write
  std::vector<double> lat_us, write_us;
  uint64_t arrived = 0;
  uint64_t lsn = 0;
  size_t writes = 0;
  double slowest_us = 0;
  char key[proctor::journal_keys::key_size];
  auto arrival = [&](uint64_t i) { return t_start + period * static_cast<int64_t>(i); };
  for (;;) {
    auto now = clk::now();
    for (; arrival(arrived) <= now && arrival(arrived) < t_stop; ++arrived)
      first.push_back({arrived + 1, arrival(arrived)});
    if (first.empty() && second.empty()) {
      if (arrival(arrived) >= t_stop)
        break;
      std::this_thread::sleep_until(arrival(arrived));
      continue;
    }
    rocksdb::WriteBatch b;
    for (const auto* v : {&second, &first})
      for (const auto& it : *v) {
        proctor::journal_keys::put_be64(key, it.id);
        proctor::journal_keys::put_be64(key + 8, ++lsn);
        b.Put(rocksdb::Slice(key, sizeof(key)), value);
      }
    auto tw = clk::now();
    auto s = db->Write(wo, &b);
    if (!s.ok())
      throw std::runtime_error("rocksdb write: " + s.ToString());
    auto done = clk::now();
    ++writes;
    write_us.push_back(std::chrono::duration<double, std::micro>(done - tw).count());
    slowest_us = std::max(slowest_us, write_us.back());
    for (const auto& it : second)
      if (it.arrival >= t_measure)
        lat_us.push_back(std::chrono::duration<double, std::micro>(done - it.arrival).count());
    second.swap(first);
    first.clear();
  }
  std::sort(lat_us.begin(), lat_us.end());
  r.put("count", static_cast<double>(lat_us.size()));
  r.put("p50_us", percentile(lat_us, 0.50));
  r.put("p99_us", percentile(lat_us, 0.99));
  r.put("p999_us", percentile(lat_us, 0.999));
  r.put("max_us", lat_us.empty() ? 0 : lat_us.back());
  r.put("writes", static_cast<double>(writes));
  r.put("slowest_write_us", slowest_us);
  std::sort(write_us.begin(), write_us.end());
  r.put("write_p50_us", percentile(write_us, 0.50));
  r.put("write_p99_us", percentile(write_us, 0.99));
  r.finish();
}

}  // namespace proctor::bench
