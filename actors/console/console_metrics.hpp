// The node's metrics for the web console's charts (GET /api/metrics): the Prometheus text
// the node answers a metrics request with (`proctor metrics`), read back into numbers.
// Reading the text rather than the counters keeps one source of truth for what the node
// exports, whichever library renders it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace proctor {

/// Each metric of a Prometheus text exposition summed over its label sets, by name
/// ("proctor_waiting_procedures" -> 3). Comment lines and lines that do not parse are
/// skipped; a histogram's series keep their suffixed names (_bucket, _sum, _count).
std::map<std::string, double> sum_metrics(std::string_view text);

/// The console's metrics object (one line of JSON):
///   {"at_ms":1764052812345,"steps_total":120,"waiting":3,"failures_total":1,
///    "running_steps":2,"queue_depth":0,"procedures":40,"metrics":{"proctor_...":1,...}}
/// `steps_total`: journal records appended (one per committed step, plus a procedure's
/// submit and end), the counter behind the steps/s chart; `failures_total`: procedures that
/// ended FAILED or ROLLEDBACK (proctor_procedures_failed_total plus
/// proctor_procedures_rolledback_total; docs/metrics.md); `metrics`: every metric summed.
std::string metrics_to_json(std::string_view prometheus_text, int64_t at_ms);

}  // namespace proctor
