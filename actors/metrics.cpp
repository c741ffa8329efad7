#include "actors/metrics.hpp"

#include <sstream>

namespace proctor {

void type_metrics::submitted(const std::string& type) {
  ++by_type_[type].submitted;
}

void type_metrics::ended(const std::string& type, proc_state state,
                         std::chrono::milliseconds runtime) {
  auto& c = by_type_[type];
  switch (state) {
    case proc_state::success: ++c.succeeded; break;
    case proc_state::failed: ++c.failed; break;
    case proc_state::rolledback: ++c.rolled_back; break;
    default: return;
  }
  if (runtime.count() < 0)
    return;
  size_t i = 0;
  while (i < buckets.size() && runtime.count() > buckets[i])
    ++i;
  ++c.runtime[i];
  ++c.runtime_count;
  c.runtime_sum_ms += static_cast<double>(runtime.count());
}

std::string type_metrics::render(const scheduler_stats& s, const journal_stats& j,
                                 const executor_gauges& g) const {
  std::ostringstream o;
  auto counter = [&](const char* name, const char* help, auto field) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n";
    for (const auto& [type, c] : by_type_)
      o << name << "{type=\"" << type << "\"} " << c.*field << '\n';
  };
  counter("proctor_procedures_submitted_total", "Procedures submitted or spawned.",
          &counters::submitted);
  counter("proctor_procedures_succeeded_total", "Procedures that ended SUCCESS.",
          &counters::succeeded);
  counter("proctor_procedures_failed_total", "Procedures that ended FAILED.", &counters::failed);
  counter("proctor_procedures_rolledback_total", "Procedures that ended ROLLEDBACK.",
          &counters::rolled_back);
  counter("proctor_procedures_no_progress_total",
          "Procedures flagged for committing the same state with the same data many times.",
          &counters::no_progress);
  o << "# HELP proctor_procedure_runtime_ms Submit-to-end time of procedures.\n"
       "# TYPE proctor_procedure_runtime_ms histogram\n";
  for (const auto& [type, c] : by_type_) {
    uint64_t cum = 0;
    for (size_t i = 0; i < buckets.size(); ++i) {
      cum += c.runtime[i];
      o << "proctor_procedure_runtime_ms_bucket{type=\"" << type << "\",le=\"" << buckets[i]
        << "\"} " << cum << '\n';
    }
    cum += c.runtime[buckets.size()];
    o << "proctor_procedure_runtime_ms_bucket{type=\"" << type << "\",le=\"+Inf\"} " << cum
      << '\n';
    o << "proctor_procedure_runtime_ms_sum{type=\"" << type << "\"} " << c.runtime_sum_ms << '\n';
    o << "proctor_procedure_runtime_ms_count{type=\"" << type << "\"} " << c.runtime_count
      << '\n';
  }
  auto gauge = [&](const char* name, const char* help, double v) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " gauge\n"
      << name << ' ' << v << '\n';
  };
  gauge("proctor_queue_depth", "Steps ready to run, waiting for a run slot.",
        static_cast<double>(s.queued));
  gauge("proctor_running_steps", "Steps running on workers.", static_cast<double>(s.running));
  gauge("proctor_run_slots", "Run slots (worker threads).", static_cast<double>(s.slots));
  gauge("proctor_waiting_procedures", "Procedures WAITING or WAITING_TIMEOUT.",
        static_cast<double>(g.waiting));
  gauge("proctor_hibernated_procedures",
        "Waiting roots without an actor, restarted from the journal when woken.",
        static_cast<double>(g.hibernated));
  gauge("proctor_lock_waiting_steps", "Steps waiting for a resource lock.",
        static_cast<double>(s.lock_waiting));
  gauge("proctor_lock_holders", "Procedures holding resource locks.",
        static_cast<double>(s.lock_owners));
  gauge("proctor_stuck_steps", "Running steps older than the stuck threshold.",
        static_cast<double>(s.stuck));
  gauge("proctor_quarantined_trees", "Trees whose journal records could not be read.",
        static_cast<double>(g.quarantined));
  gauge("proctor_procedures", "Procedures known to the node (live and retained).",
        static_cast<double>(g.procedures));
  gauge("proctor_rollbacks_in_progress", "Trees whose rollback is running.",
        static_cast<double>(g.rolling_back));
  o << "# HELP proctor_undos_total Undos of rollbacks done.\n"
       "# TYPE proctor_undos_total counter\nproctor_undos_total "
    << g.undos << "\n# HELP proctor_undo_failures_total Undos that threw; each is retried.\n"
       "# TYPE proctor_undo_failures_total counter\nproctor_undo_failures_total "
    << g.undo_failures << '\n';
  gauge("proctor_active_epoch",
        "The data directory's epoch this process holds (one more at every takeover).",
        static_cast<double>(g.epoch));
  gauge("proctor_active_since_seconds", "Since when this process is the node's active one "
        "(Unix time).", static_cast<double>(g.active_since_ms) / 1000.0);
  gauge("proctor_takeover_seconds", "How long this process took to take over as a standby "
        "(lock taken to serving; 0: it started without waiting).",
        static_cast<double>(g.takeover_ms) / 1000.0);
  gauge("proctor_journal_last_batch_size", "Appends in the journal's last WriteBatch.",
        static_cast<double>(j.last_batch_size));
  gauge("proctor_journal_last_fsync_us", "Duration of the journal's last synced write.",
        static_cast<double>(j.fsync_us_last));
  gauge("proctor_journal_max_fsync_us", "Duration of the journal's slowest synced write.",
        static_cast<double>(j.fsync_us_max));
  o << "# HELP proctor_journal_batches_total Synced WriteBatches.\n"
       "# TYPE proctor_journal_batches_total counter\nproctor_journal_batches_total "
    << j.batches << "\n# HELP proctor_journal_records_total Records appended.\n"
       "# TYPE proctor_journal_records_total counter\nproctor_journal_records_total "
    << j.records << "\n# HELP proctor_journal_range_deletes_total Range deletes written.\n"
       "# TYPE proctor_journal_range_deletes_total counter\nproctor_journal_range_deletes_total "
    << j.range_deletes << "\n# HELP proctor_journal_fsync_us_total Time in synced writes.\n"
       "# TYPE proctor_journal_fsync_us_total counter\nproctor_journal_fsync_us_total "
    << j.fsync_us_total << "\n# HELP proctor_journal_slow_writes_total Synced writes over "
    << slow_write_us / 1000 << " ms.\n# TYPE proctor_journal_slow_writes_total counter\n"
       "proctor_journal_slow_writes_total "
    << j.slow_writes << '\n';
  return o.str();
}

} // namespace proctor
