// The process families every Prometheus client exposes (process_cpu_seconds_total,
// process_resident_memory_bytes, ...), read from /proc/self. prometheus-cpp has no process
// collector (the Go, Java and Python clients do), so they are read here, with the names and
// meanings of those clients, so that their dashboards and alerts work unchanged.
#pragma once

#include <vector>

#include <prometheus/metric_family.h>

namespace proctor {

/// The process families of this process now. Linux only: an empty vector where /proc is
/// missing, and a family whose source cannot be read is left out rather than reported as 0.
std::vector<prometheus::MetricFamily> process_metric_families();

}  // namespace proctor
