// proctor-bench (l): a procedure that loops for a long time in a tree that compacts its own
// journal (docs/flow-control.md, "Self-compacting trees"). One demo.reconcile loops L times
// (each pass a journaled step past the point of no return; 100,000 by default, --loops
// 1000000 for the million, which takes one synced write per pass), then waits for an
// event. While it
// loops, the records the journal holds (appended minus replaced by compactions, sampled) stay
// under the threshold; after a SIGKILL, the node's recovery reads the compacted tree, so its
// time does not grow with L (compared with L / 100 loops, and with L / 100 uncompacted).
#include "apps/bench/bench.hpp"

namespace proctor::bench {

namespace {

const std::string event_key = "bench-loop-done";

/// The journal's records as the metrics tell: appended, less those compactions replaced.
double journal_records(caf::scoped_actor& self, const caf::actor& exec) {
  auto text = call(self, exec, metrics_req()).text();
  return metric(text, "proctor_journal_records_total")
         - metric(text, "proctor_compacted_records_total");
}

}  // namespace

void phase_loop_populate(reporter& r, const bench_options& o, const std::string& dir, size_t loops,
                         uint64_t compact_after) {
  node_in_child nc;
  nc.start(dir, o.workers, compact_after);
  caf::scoped_actor self{*nc.sys};
  auto exec = nc.exec();
  auto base = journal_records(self, exec);  // the node's own records (its incarnation, ...)
  auto t0 = clk::now();
  auto s = call(self, exec,
                submit_req("demo.reconcile", "{\"steps\":" + std::to_string(loops)
                                               + ",\"then_wait\":\"" + event_key + "\"}"));
  if (s.code() != pb::Response::OK)
    throw std::runtime_error("submit: " + s.error());
  double most = 0;
  for (;;) {
    most = std::max(most, journal_records(self, exec) - base);
    auto st = call(self, exec, status_req(s.id()));
    if (st.status().waiting_for() == "event " + event_key)
      break;
    if (is_final(from_pb(st.status().state())))
      throw std::runtime_error("the loop ended "
                               + std::string(to_string(from_pb(st.status().state()))) + ": "
                               + st.status().error());
    if (secs(clk::now() - t0) > 3500)
      throw std::runtime_error("the loop did not finish within 3500 s");
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  auto el = secs(clk::now() - t0);
  auto text = call(self, exec, metrics_req()).text();
  r.put("id", static_cast<double>(s.id()));
  r.put("seconds", el);
  r.put("loops_per_s", static_cast<double>(loops) / el);
  r.put("most_records", most);
  r.put("records_at_end", journal_records(self, exec) - base);
  r.put("compactions", metric(text, "proctor_tree_compactions_total"));
  r.finish();  // waits for the SIGKILL: no clean shutdown
}

void phase_loop_recover(reporter& r, const bench_options& o, const std::string& dir, uint64_t id,
                        size_t loops, uint64_t compact_after) {
  node_in_child nc;
  auto t0 = clk::now();
  nc.start(dir, o.workers, compact_after);
  auto started = secs(clk::now() - t0);
  caf::scoped_actor self{*nc.sys};
  auto exec = nc.exec();
  for (;;) {
    auto st = call(self, exec, status_req(id));
    if (st.status().waiting_for() == "event " + event_key)
      break;
    if (secs(clk::now() - t0) > 120)
      throw std::runtime_error("the loop's procedure was not back waiting within 120 s");
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  auto back = secs(clk::now() - t0);
  auto e = call(self, exec, event_req(event_key, "1"));
  if (e.code() != pb::Response::OK)
    throw std::runtime_error("event: " + e.error());
  auto w = call(self, exec, wait_req(id));
  if (w.status().state() != pb::SUCCESS)
    throw std::runtime_error("the loop ended " + std::string(to_string(from_pb(w.status().state())))
                             + ": " + w.status().error());
  auto want = "{\"loops\":" + std::to_string(loops) + "}";
  if (w.status().result_json() != want)
    throw std::runtime_error("the loop's result is " + w.status().result_json() + ", not " + want);
  r.put("start_s", started);
  r.put("back_s", back);
  r.put("records", static_cast<double>(nc.report.records));
  r.put("open_s", nc.report.open_seconds);  // RocksDB opens: replays its WAL
  r.put("scan_s", nc.report.scan_seconds);  // the journal read and folded
  r.finish();
}

}  // namespace proctor::bench
