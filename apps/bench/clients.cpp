// proctor-bench, the client actors that run inside a phase's child process: burst clients
// (run_burst: many procedures in flight, closed loop), the open-loop pacer (pacer: submits on
// a clock, records submit -> SUCCESS latencies), percentile() and report_journal().
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <proctor/wire.pb.h>

#include "alloc_count.hpp"
#include "bench.hpp"

namespace proctor::bench {

// -- a client that keeps many procedures in flight ------------------------------------------

namespace {

struct burst_state {
  caf::actor exec;
  size_t count = 0;
  size_t window = 0;  ///< procedures in flight at most
  std::function<std::string(size_t)> make;
  bool wait_end = true;  ///< wait for each procedure to end (else only for the submit ack)
  size_t offset = 0;     ///< this client's first index
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
    st->res.error = error_text(self->system(), e);
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

}  // namespace

/// Submits `count` procedures (at most `window` in flight), returns when all ended (or, with
/// wait_end = false, when all were acknowledged). Wall time from the first submit.
///
/// The work is split over client actors with at most `per_client` requests in flight each:
/// CAF 0.17 keeps an actor's pending requests in a flat map that is searched and erased
/// linearly, so one client with 20,000 requests in flight spends most of the run on its own
/// bookkeeping (17 % of the samples of phase b before this split), not on the node's.
burst_result run_burst(caf::actor_system& sys, const caf::actor& exec, size_t count, size_t window,
                       std::function<std::string(size_t)> make, bool wait_end) {
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

namespace {

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
  const auto scheduled = st->t_start
                         + std::chrono::duration_cast<clk::duration>(
                           std::chrono::duration<double>(static_cast<double>(st->sent) / st->rate));
  ++st->sent;
  st->measured_sent += measured ? 1 : 0;
  ++st->outstanding;
  auto t_sub = clk::now();
  const double late_us = std::chrono::duration<double, std::micro>(t_sub - scheduled).count();
  auto on_error = [self, st](caf::error& e) {
    st->res.error = error_text(self->system(), e);
    pacer_finish(self, st);
  };
  self->request(st->exec, caf::infinite, rpc_atom::value, st->req)
    .then(
      [self, st, t_sub, late_us, measured, on_error](std::string& bytes) {
        auto t_ack = clk::now();
        proctor::pb::Response r;
        if (!r.ParseFromString(bytes) || r.code() != proctor::pb::Response::OK) {
          st->res.error = "submit refused: " + r.error();
          return pacer_finish(self, st);
        }
        self->request(st->exec, caf::infinite, rpc_atom::value, wait_req(r.id()))
          .then(
            [self, st, t_sub, t_ack, late_us, measured](std::string& bytes) {
              auto t_end = clk::now();
              proctor::pb::Response w;
              using us = std::chrono::duration<double, std::micro>;
              if (!w.ParseFromString(bytes) || w.status().state() != proctor::pb::SUCCESS) {
                ++st->res.not_succeeded;
              } else if (measured) {
                st->res.latency_us.push_back(us(t_end - t_sub).count());
                st->res.late_us.push_back(late_us);
                st->res.ack_us.push_back(us(t_ack - t_sub).count());
                st->res.end_us.push_back(us(t_end - t_ack).count());
                st->res.sent_at_ms.push_back(
                  std::chrono::duration<double, std::milli>(t_sub - st->t_start).count());
              }
              --st->outstanding;
              if (st->stopped && st->outstanding == 0)
                pacer_finish(self, st);
            },
            on_error);
      },
      on_error);
}

}  // namespace

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
  auto fsync_us = metric(m, "proctor_journal_sync_seconds_sum") * 1e6;
  r.put(prefix + "journal_batches", batches);
  r.put(prefix + "journal_records", records);
  r.put(prefix + "journal_fsync_us", fsync_us);
  // A quantile of the synced writes, as the histogram knows it: the bound of the first
  // bucket whose cumulative count reaches that share of them (+Inf: over the last bound).
  auto count = metric(m, "proctor_journal_sync_seconds_count");
  auto bound_us = [&](double share) {
    const std::string bucket = "proctor_journal_sync_seconds_bucket{le=\"";
    std::istringstream lines(m);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(bucket, 0) == 0
          && std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr) >= share * count)
        return std::strtod(line.c_str() + bucket.size(), nullptr) * 1e6;
    return -1.0;
  };
  r.put(prefix + "journal_max_fsync_us", bound_us(1.0));
  r.put(prefix + "journal_p99_fsync_us", bound_us(0.99));
  r.put(prefix + "journal_slow_writes", metric(m, "proctor_journal_slow_writes_total"));
}

work_counts work_in_metrics(const std::string& m) {
  work_counts c;
  c.records = metric(m, "proctor_journal_records_total");
  c.writes = metric(m, "proctor_journal_batches_total");
  c.spawns = metric(m, "proctor_procedure_actors_started_total");
  for (size_t k = 0; k < actor_kinds; ++k) {
    c.messages_by_actor[k] = metric(m, std::string{"proctor_actor_messages_total{actor=\""}
                                         + actor_kind_name(static_cast<actor_kind>(k)) + "\"}");
    c.messages += c.messages_by_actor[k];
  }
  return c;
}

work_counts count_work(caf::scoped_actor& self, const caf::actor& exec) {
  auto c = work_in_metrics(call(self, exec, metrics_req()).text());
  c.allocations = static_cast<double>(heap_allocations());
  return c;
}

void report_costs(reporter& r, const work_counts& before, const work_counts& after, double procs,
                  double steps) {
  const std::pair<const char*, double work_counts::*> counts[] = {
    {"records", &work_counts::records},
    {"writes", &work_counts::writes},
    {"spawns", &work_counts::spawns},
    {"allocations", &work_counts::allocations},
    {"messages", &work_counts::messages}};
  auto put = [&](const std::string& name, double done) {
    r.put("cost_" + name, procs > 0 ? done / procs : 0);
    r.put("step_cost_" + name, steps > 0 ? done / steps : 0);
  };
  for (const auto& [name, field] : counts)
    put(name, after.*field - before.*field);
  for (size_t k = 0; k < actor_kinds; ++k)
    put(std::string{"messages_"} + actor_kind_name(static_cast<actor_kind>(k)),
        after.messages_by_actor[k] - before.messages_by_actor[k]);
}

}  // namespace proctor::bench
