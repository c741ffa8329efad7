// proctor-bench's report (apps/proctor_bench.cpp runs the phases): what each phase gave, the
// table of figures and ratios (stdout, or stderr with --json), and the --json object.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "bench.hpp"

namespace proctor::bench {

/// A phase's result until it runs: "not run (--phases)".
inline phase_result not_run() {
  phase_result p;
  p.error = "not run (--phases)";
  return p;
}

/// What one run of proctor-bench gave, phase by phase.
struct bench_run {
  phase_result raw = not_run(), steps = not_run(), cal = not_run(), lat = not_run(),
               floor = not_run(), pop = not_run(), rec = not_run(), fan = not_run(),
               remote = not_run(), spread = not_run(), takeover = not_run(), timers = not_run(),
               timers_pop = not_run(), failover = not_run(), placing = not_run(),
               workers = not_run();
  /// (l): "small", "big" and "uncompacted", each populated then recovered.
  struct loop_run {
    phase_result pop, rec;
  };
  std::map<std::string, loop_run> loops;
  double total_s = 0;
};

/// 1234567.8 as "1,234,568" (decimals after the point as asked).
std::string fmt_num(double v, int decimals = 0);

/// Prints the table and, with --json, the JSON object; the exit code: 0 when every phase
/// asked for ran.
int report_run(const bench_options& o, bench_run& res);

}  // namespace proctor::bench
