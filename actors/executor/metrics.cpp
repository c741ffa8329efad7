#include "actors/executor/metrics.hpp"

#include <limits>
#include <map>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "actors/executor/process_metrics.hpp"
#include "persistence/actor_messages.hpp"

namespace proctor {

namespace {

using prometheus::ClientMetric;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Histogram;
using prometheus::MetricFamily;
using prometheus::MetricType;

Histogram::BucketBoundaries runtime_buckets() {
  return {type_metrics::buckets.begin(), type_metrics::buckets.end()};
}

/// A family of one sample whose value another part of the node owns (a gauge, or a counter
/// the journal or the executor keeps): made at each render instead of mirrored in the
/// registry, where a counter could only be incremented.
MetricFamily one_sample(std::string name, std::string help, MetricType type, double v) {
  ClientMetric m;
  if (type == MetricType::Counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  return MetricFamily{std::move(name), std::move(help), type, {std::move(m)}};
}

/// A family of one sample per item of `items`, labelled `label`="key(item)": per peer, per
/// procedure type.
template <class Item>
MetricFamily per_label(std::string name, std::string help, MetricType type, const char* label,
                       const std::vector<Item>& items, const std::string Item::*key,
                       double (*value)(const Item&)) {
  MetricFamily f{std::move(name), std::move(help), type, {}};
  for (const auto& x : items) {
    ClientMetric m;
    m.label.push_back({label, x.*key});
    if (type == MetricType::Counter)
      m.counter.value = value(x);
    else
      m.gauge.value = value(x);
    f.metric.push_back(std::move(m));
  }
  return f;
}

/// A family of one sample per peer, labelled peer="NAME".
MetricFamily per_peer(std::string name, std::string help, MetricType type,
                      const std::vector<peer_sample>& peers, double (*value)(const peer_sample&)) {
  return per_label(std::move(name), std::move(help), type, "peer", peers, &peer_sample::name,
                   value);
}

/// The journal's synced writes by duration (journal_stats::sync_buckets), in seconds.
MetricFamily sync_histogram(const journal_stats& j) {
  ClientMetric m;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < sync_bucket_us.size(); ++i) {
    cumulative += j.sync_buckets[i];
    m.histogram.bucket.push_back({cumulative, static_cast<double>(sync_bucket_us[i]) / 1e6});
  }
  cumulative += j.sync_buckets.back();
  m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = static_cast<double>(j.fsync_us_total) / 1e6;
  return MetricFamily{"proctor_journal_sync_seconds",
                      "Duration of the journal's synced writes (each a WriteBatch every append in "
                      "it waited for).",
                      MetricType::Histogram,
                      {std::move(m)}};
}

}  // namespace

/// The counters kept here, one sample per procedure type in each family.
struct type_metrics::families {
  prometheus::Registry registry;
  Family<Counter>& submitted = prometheus::BuildCounter()
                                 .Name("proctor_procedures_submitted_total")
                                 .Help("Procedures submitted or spawned.")
                                 .Register(registry);
  Family<Counter>& succeeded = prometheus::BuildCounter()
                                 .Name("proctor_procedures_succeeded_total")
                                 .Help("Procedures that ended SUCCESS.")
                                 .Register(registry);
  Family<Counter>& failed = prometheus::BuildCounter()
                              .Name("proctor_procedures_failed_total")
                              .Help("Procedures that ended FAILED.")
                              .Register(registry);
  Family<Counter>& rolled_back = prometheus::BuildCounter()
                                   .Name("proctor_procedures_rolledback_total")
                                   .Help("Procedures that ended ROLLEDBACK.")
                                   .Register(registry);
  Family<Counter>& retry_outcomes =
    prometheus::BuildCounter()
      .Name("proctor_procedures_retry_outcomes_total")
      .Help("Procedures that had ended FAILED, were retried by an operator and ended again, by "
            "the state they ended in (counted once, in failed_total, before the retry).")
      .Register(registry);
  Family<Counter>& no_progress =
    prometheus::BuildCounter()
      .Name("proctor_procedures_no_progress_total")
      .Help("Procedures flagged for committing the same state with the same data many times.")
      .Register(registry);
  Family<Histogram>& runtime = prometheus::BuildHistogram()
                                 .Name("proctor_procedure_runtime_seconds")
                                 .Help("Submit-to-end time of procedures.")
                                 .Register(registry);

  /// One type's samples, found once per type (Family::Add hashes the labels under a lock).
  struct of_type {
    Counter& submitted;
    Counter& succeeded;
    Counter& failed;
    Counter& rolled_back;
    Counter& no_progress;
    Histogram& runtime;
  };
  std::map<std::string, of_type, std::less<>> by_type;

  of_type& of(const std::string& type) {
    if (auto i = by_type.find(type); i != by_type.end())
      return i->second;
    prometheus::Labels labels{{"type", type}};
    of_type t{submitted.Add(labels),   succeeded.Add(labels),
              failed.Add(labels),      rolled_back.Add(labels),
              no_progress.Add(labels), runtime.Add(labels, runtime_buckets())};
    return by_type.emplace(type, t).first->second;
  }
};

type_metrics::type_metrics() : families_(std::make_unique<families>()) {}

type_metrics::~type_metrics() = default;
type_metrics::type_metrics(type_metrics&&) noexcept = default;
type_metrics& type_metrics::operator=(type_metrics&&) noexcept = default;

void type_metrics::submitted(const std::string& type) {
  families_->of(type).submitted.Increment();
}

void type_metrics::ended_after_retry(const std::string& type, proc_state state) {
  auto name = state == proc_state::success      ? "SUCCESS"
              : state == proc_state::failed     ? "FAILED"
              : state == proc_state::rolledback ? "ROLLEDBACK"
                                                : nullptr;
  if (name != nullptr)
    families_->retry_outcomes.Add({{"type", type}, {"state", name}}).Increment();
}

void type_metrics::no_progress(const std::string& type) {
  families_->of(type).no_progress.Increment();
}

void type_metrics::ended(const std::string& type, proc_state state,
                         std::chrono::milliseconds runtime) {
  auto& t = families_->of(type);
  switch (state) {
    case proc_state::success:
      t.succeeded.Increment();
      break;
    case proc_state::failed:
      t.failed.Increment();
      break;
    case proc_state::rolledback:
      t.rolled_back.Increment();
      break;
    default:
      return;
  }
  if (runtime.count() >= 0)
    t.runtime.Observe(static_cast<double>(runtime.count()) / 1000.0);
}

std::string type_metrics::render(const step_scheduler_stats& s, const journal_stats& j,
                                 const executor_gauges& g) const {
  auto out = families_->registry.Collect();
  auto gauge = [&](const char* name, const char* help, double v) {
    out.push_back(one_sample(name, help, MetricType::Gauge, v));
  };
  auto counter = [&](const char* name, std::string help, uint64_t v) {
    out.push_back(one_sample(name, std::move(help), MetricType::Counter, static_cast<double>(v)));
  };
  gauge("proctor_queue_depth", "Steps ready to run, waiting for a run slot.",
        static_cast<double>(s.queued));
  gauge("proctor_running_steps", "Steps running on workers.", static_cast<double>(s.running));
  gauge("proctor_run_slots", "Run slots (worker threads).", static_cast<double>(s.slots));
  gauge("proctor_waiting_procedures", "Procedures WAITING or WAITING_TIMEOUT.",
        static_cast<double>(g.waiting));
  gauge("proctor_passivated_roots",
        "Waiting roots without an actor, restarted from the journal when woken.",
        static_cast<double>(g.passivated));
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
  counter("proctor_undos_total", "Undos of rollbacks done.", g.undos);
  counter("proctor_undo_failures_total", "Undos that threw; each is retried.", g.undo_failures);
  counter("proctor_retries_total",
          "Operators' retries of a failed or backing-off step (proctor retry), journaled.",
          g.retries);
  counter("proctor_resubmits_total",
          "Operators' resubmits of a ROLLEDBACK tree under a new id (proctor resubmit), "
          "journaled.",
          g.resubmits);
  counter("proctor_passivation_attempts_total",
          "Trees asked whether every procedure only waits (each attempt messages the whole "
          "tree).",
          g.passivation_attempts);
  gauge("proctor_passivated_procedures",
        "Procedures without an actor held by a live ancestor's actor until their timer, event "
        "or reply, or until one in their subtree comes (the others without one are in "
        "passivated trees).",
        static_cast<double>(g.passivated_procedures));
  counter("proctor_queued_wakes_total",
          "Wake-ups of passivated procedures that waited until a sibling's actor went down (a "
          "parent spawns at most max_live_children of its children for them at once).",
          g.queued_wakes);
  counter("proctor_refused_requests_total",
          "Requests refused because the certificate that sent them may not (its role, or a "
          "node it claims to be and is not: docs/security.md); each is logged at a falling rate.",
          g.refused_requests);
  counter("proctor_procedure_actors_started_total",
          "Procedure actors started in this process: one per procedure run, and one more each "
          "time a passivated or recovered one is woken.",
          g.actors_started);
  {
    MetricFamily f{"proctor_actor_messages_total",
                   "Messages taken by this process's engine actors, by kind of actor (requests, "
                   "answers, down and exit messages alike).",
                   MetricType::Counter,
                   {}};
    for (size_t k = 0; k < actor_kinds; ++k) {
      ClientMetric m;
      m.label.push_back({"actor", actor_kind_name(static_cast<actor_kind>(k))});
      m.counter.value = static_cast<double>(actor_messages(static_cast<actor_kind>(k)));
      f.metric.push_back(std::move(m));
    }
    out.push_back(std::move(f));
  }
  counter("proctor_tree_compactions_total",
          "Trees' journals compacted into one record each (--compact-after, a type's "
          "compact_after).",
          g.compactions);
  counter("proctor_compacted_records_total",
          "Journal records those compactions replaced (each compaction leaves one).",
          g.compacted_records);
  counter("proctor_cancelled_children_total",
          "Children cancelled by their parent's join policy (join::any, join::at_least(k) met "
          "without them): stopped, and their steps undone.",
          g.cancelled_children);
  counter("proctor_contained_failures_total",
          "Children's failures a join policy contained (undone, reported to the parent) "
          "instead of failing their tree.",
          g.contained_failures);
  counter("proctor_misdirected_heartbeats_total",
          "Heartbeats this node answered from a node not in its --peers, or from one that "
          "expects another node at this address (a --peers mistake on that node).",
          g.misdirected_pings);
  counter("proctor_peer_refusals_total",
          "Heartbeat answers from a peer's address that refused this node or named another "
          "node (a --peers mistake on one side).",
          g.peer_refusals);
  counter("proctor_peer_stray_answers_total",
          "Answers from peers that the link could not read or match to a request (dropped; "
          "the request they answered fails at its deadline, and the peer stays up).",
          g.peer_stray_answers);
  counter("proctor_tree_views_incomplete_total",
          "tree views that show placeholders for the parts of a node that did not answer.",
          g.incomplete_views);
  gauge("proctor_calls_in_flight",
        "Calls to services made for waiting procedures and not answered yet (each by a "
        "caller actor, whether the procedure has its actor or not).",
        static_cast<double>(g.calls_in_flight));
  gauge("proctor_active_epoch",
        "The data directory's epoch this process holds (one more at every takeover).",
        static_cast<double>(g.epoch));
  gauge("proctor_active_since_seconds",
        "Since when this process is the node's active one "
        "(Unix time).",
        static_cast<double>(g.active_since_ms) / 1000.0);
  gauge("proctor_takeover_seconds",
        "How long this process took to take over as a standby "
        "(lock taken to serving; 0: it started without waiting).",
        static_cast<double>(g.takeover_ms) / 1000.0);
  gauge("proctor_journal_last_batch_size", "Appends in the journal's last WriteBatch.",
        static_cast<double>(j.last_batch_size));
  gauge("proctor_journal_last_sync_seconds", "Duration of the journal's last synced write.",
        static_cast<double>(j.fsync_us_last) / 1e6);
  out.push_back(sync_histogram(j));
  counter("proctor_journal_batches_total", "Synced WriteBatches.", j.batches);
  counter("proctor_journal_records_total", "Records appended.", j.records);
  counter("proctor_journal_range_deletes_total", "Range deletes written.", j.range_deletes);
  counter("proctor_journal_slow_writes_total",
          "Synced writes over " + std::to_string(slow_write_us / 1000) + " ms.", j.slow_writes);
  if (!g.peers.empty()) {
    out.push_back(
      per_peer("proctor_peer_up", "1 while the peer answers heartbeats, 0 while it is down.",
               MetricType::Gauge, g.peers, [](const peer_sample& p) { return p.up ? 1.0 : 0.0; }));
    out.push_back(
      per_peer("proctor_peer_rtt_seconds",
               "The round trip of the last heartbeat the peer answered.", MetricType::Gauge,
               g.peers, [](const peer_sample& p) { return static_cast<double>(p.rtt_us) / 1e6; }));
    out.push_back(
      per_peer("proctor_peer_outbox_messages",
               "Messages for the peer (remote children, their ends, events) journaled and not "
               "acknowledged by it yet.",
               MetricType::Gauge, g.peers,
               [](const peer_sample& p) { return static_cast<double>(p.outbox); }));
    out.push_back(per_peer("proctor_peer_downs_total",
                           "Times a peer's link found it down after it was up (heartbeats "
                           "unanswered, the connection closed): link flaps.",
                           MetricType::Counter, g.peers,
                           [](const peer_sample& p) { return static_cast<double>(p.downs); }));
  }
  gauge("proctor_schedules", "Recurring schedules (paused ones included).",
        static_cast<double>(g.schedules.size()));
  if (!g.schedules.empty()) {
    auto per_schedule = [&](const char* name, const char* help, MetricType type,
                            double (*value)(const schedule_sample&)) {
      out.push_back(
        per_label(name, help, type, "schedule", g.schedules, &schedule_sample::name, value));
    };
    per_schedule("proctor_schedule_firings_total",
                 "Fire times the schedule submitted a run for (operators' triggers apart).",
                 MetricType::Counter,
                 [](const schedule_sample& x) { return static_cast<double>(x.fired); });
    per_schedule("proctor_schedule_triggers_total",
                 "Runs of the schedule an operator triggered (proctor schedule trigger).",
                 MetricType::Counter,
                 [](const schedule_sample& x) { return static_cast<double>(x.triggered); });
    per_schedule("proctor_schedule_skipped_total",
                 "Fire times the schedule skipped: its previous run had not ended (overlap "
                 "skip, or buffer-one with one held already), or the run could not be submitted.",
                 MetricType::Counter,
                 [](const schedule_sample& x) { return static_cast<double>(x.skipped); });
    per_schedule("proctor_schedule_missed_total",
                 "Fire times that came while the node was down and that the catch-up policy "
                 "did not run.",
                 MetricType::Counter,
                 [](const schedule_sample& x) { return static_cast<double>(x.missed); });
    per_schedule(
      "proctor_schedule_next_fire_timestamp_seconds",
      "The schedule's next fire time, jitter included (Unix time; 0: paused).", MetricType::Gauge,
      [](const schedule_sample& x) { return static_cast<double>(x.next_fire_ms) / 1000.0; });
    per_schedule("proctor_schedule_paused", "1 while the schedule is paused.", MetricType::Gauge,
                 [](const schedule_sample& x) { return x.paused ? 1.0 : 0.0; });
  }
  if (!g.queues.empty()) {
    auto per_queue = [&](const char* name, const char* help, MetricType type,
                         double (*value)(const queue_sample&)) {
      out.push_back(per_label(name, help, type, "queue", g.queues, &queue_sample::name, value));
    };
    per_queue("proctor_task_queue_depth",
              "Tasks queued for external workers and not leased (docs/workers.md).",
              MetricType::Gauge,
              [](const queue_sample& x) { return static_cast<double>(x.depth); });
    per_queue("proctor_task_queue_leased", "Tasks leased to a worker now.", MetricType::Gauge,
              [](const queue_sample& x) { return static_cast<double>(x.leased); });
    per_queue("proctor_task_queue_pollers", "Workers' polls waiting for a task now.",
              MetricType::Gauge,
              [](const queue_sample& x) { return static_cast<double>(x.pollers); });
    per_queue("proctor_task_queue_oldest_age_seconds",
              "How long the oldest queued task of the queue has waited (0: none queued).",
              MetricType::Gauge,
              [](const queue_sample& x) { return static_cast<double>(x.oldest_age_ms) / 1000.0; });
    per_queue("proctor_tasks_dispatched_total", "Tasks steps dispatched to the queue.",
              MetricType::Counter,
              [](const queue_sample& x) { return static_cast<double>(x.dispatched); });
    per_queue("proctor_tasks_completed_total", "Tasks a worker completed (result journaled).",
              MetricType::Counter,
              [](const queue_sample& x) { return static_cast<double>(x.completed); });
    per_queue("proctor_tasks_failed_total",
              "Tasks that failed for good (not retryable, or out of attempts).",
              MetricType::Counter,
              [](const queue_sample& x) { return static_cast<double>(x.failed); });
    per_queue("proctor_task_leases_timed_out_total",
              "Attempts whose lease ran out (no complete within start-to-close, or no heartbeat).",
              MetricType::Counter,
              [](const queue_sample& x) { return static_cast<double>(x.timed_out); });
  }
  if (!s.types.empty()) {
    auto per_type = [&](const char* name, const char* help, MetricType type,
                        double (*value)(const type_limit_view&)) {
      out.push_back(per_label(name, help, type, "type", s.types, &type_limit_view::type, value));
    };
    per_type("proctor_type_running_steps",
             "Steps of procedures of the type running now (forward steps; undos are not "
             "counted).",
             MetricType::Gauge, [](const type_limit_view& v) { return double(v.running); });
    per_type("proctor_type_limit_waiting_steps",
             "Steps of the type its limits hold back now (RUNNABLE, waiting for a slot of "
             "the type or a start token).",
             MetricType::Gauge, [](const type_limit_view& v) { return double(v.waiting); });
    per_type("proctor_type_throttled_steps_total",
             "Steps of the type its limits held back at least once.", MetricType::Counter,
             [](const type_limit_view& v) { return double(v.throttled); });
    per_type("proctor_type_max_running",
             "The type's limit of steps running at once in force (0: none).", MetricType::Gauge,
             [](const type_limit_view& v) { return double(v.effective.max_running); });
    per_type("proctor_type_start_rate_per_second",
             "The type's limit of starts per second in force (0: none).", MetricType::Gauge,
             [](const type_limit_view& v) {
               return v.effective.rate == 0 || v.effective.per.count() <= 0
                        ? 0.0
                        : v.effective.rate * 1000.0 / static_cast<double>(v.effective.per.count());
             });
  }
  ClientMetric info;
  info.label = {{"version", PROCTOR_VERSION}};
  info.gauge.value = 1;
  out.push_back(MetricFamily{"proctor_build_info",
                             "The version this process runs (always 1).",
                             MetricType::Gauge,
                             {std::move(info)}});
  for (auto& f : process_metric_families())
    out.push_back(std::move(f));
  return prometheus::TextSerializer{}.Serialize(out);
}

}  // namespace proctor
