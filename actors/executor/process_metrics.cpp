#include "actors/executor/process_metrics.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace proctor {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily family(const char* name, const char* help, MetricType type, double v) {
  ClientMetric m;
  if (type == MetricType::Counter)
    m.counter.value = v;
  else
    m.gauge.value = v;
  return MetricFamily{name, help, type, {std::move(m)}};
}

/// The fields of /proc/self/stat after the command name (which may hold spaces and ')'):
/// field 3 (state) is fields[0], so field N is fields[N - 3] (proc(5)).
std::vector<std::string> stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line))
    return {};
  auto close = line.rfind(')');
  if (close == std::string::npos)
    return {};
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;)
    fields.push_back(f);
  return fields;
}

/// The system's boot time (Unix seconds), from /proc/stat's btime line; 0 if unreadable.
double boot_time() {
  std::ifstream in("/proc/stat");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("btime ", 0) == 0)
      return std::stod(line.substr(6));
  return 0;
}

/// The soft limit of open files from /proc/self/limits; -1 if unreadable or unlimited.
double max_fds() {
  std::ifstream in("/proc/self/limits");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Max open files", 0) != 0)
      continue;
    std::istringstream fields(line.substr(14));
    std::string soft;
    fields >> soft;
    return soft == "unlimited" ? -1 : std::stod(soft);
  }
  return -1;
}

}  // namespace

std::vector<MetricFamily> process_metric_families() {
  std::vector<MetricFamily> out;
  auto f = stat_fields();
  // utime (14), stime (15), num_threads (20), starttime (22), vsize (23), rss (24).
  if (f.size() > 24 - 3) {
    double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
    double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
    double cpu = (std::stod(f[14 - 3]) + std::stod(f[15 - 3])) / ticks;
    out.push_back(family("process_cpu_seconds_total",
                         "Total user and system CPU time spent in seconds.", MetricType::Counter,
                         cpu));
    out.push_back(family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                         MetricType::Gauge, std::stod(f[23 - 3])));
    out.push_back(family("process_resident_memory_bytes", "Resident memory size in bytes.",
                         MetricType::Gauge, std::stod(f[24 - 3]) * page));
    out.push_back(family("process_threads", "Number of OS threads in the process.",
                         MetricType::Gauge, std::stod(f[20 - 3])));
    if (double boot = boot_time(); boot > 0)
      out.push_back(family("process_start_time_seconds",
                           "Start time of the process since unix epoch in seconds.",
                           MetricType::Gauge, boot + std::stod(f[22 - 3]) / ticks));
  }
  std::error_code ec;
  double open = 0;
  for (std::filesystem::directory_iterator i("/proc/self/fd", ec), end; !ec && i != end;
       i.increment(ec))
    ++open;
  if (!ec)
    out.push_back(
      family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, open));
  if (double max = max_fds(); max >= 0)
    out.push_back(family("process_max_fds", "Maximum number of open file descriptors.",
                         MetricType::Gauge, max));
  return out;
}

}  // namespace proctor
