#include "actors/console/console_metrics.hpp"

#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace proctor {

namespace {

/// A sample line "name{labels} value [timestamp]": its name and value.
bool parse_sample(std::string_view line, std::string_view* name, double* value) {
  size_t end = 0;
  while (end < line.size() && line[end] != '{' && line[end] != ' ')
    ++end;
  if (end == 0)
    return false;
  *name = line.substr(0, end);
  size_t at = end;
  if (at < line.size() && line[at] == '{') {
    // Label values may hold '}' inside quotes.
    bool quoted = false;
    for (++at; at < line.size(); ++at) {
      char c = line[at];
      if (quoted && c == '\\')
        ++at;
      else if (c == '"')
        quoted = !quoted;
      else if (c == '}' && !quoted)
        break;
    }
    if (at >= line.size())
      return false;
    ++at;
  }
  while (at < line.size() && line[at] == ' ')
    ++at;
  auto rest = std::string(line.substr(at, line.find(' ', at) - at));
  if (rest.empty())
    return false;
  char* stop = nullptr;
  *value = std::strtod(rest.c_str(), &stop);  // also reads +Inf, -Inf and NaN
  return stop == rest.c_str() + rest.size();
}

}  // namespace

std::map<std::string, double> sum_metrics(std::string_view text) {
  std::map<std::string, double> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty() || line.front() == '#')
      continue;
    std::string_view name;
    double value = 0;
    if (parse_sample(line, &name, &value) && std::isfinite(value))
      out[std::string(name)] += value;
  }
  return out;
}

std::string metrics_to_json(std::string_view prometheus_text, int64_t at_ms) {
  auto m = sum_metrics(prometheus_text);
  auto get = [&m](const char* name) {
    auto i = m.find(name);
    return i == m.end() ? 0.0 : i->second;
  };
  nlohmann::ordered_json j;
  j["at_ms"] = at_ms;
  j["steps_total"] = get("proctor_journal_records_total");
  j["waiting"] = get("proctor_waiting_procedures");
  // One meaning of failed (docs/metrics.md): procedures that ended other than SUCCESS:
  // FAILED or ROLLEDBACK. Undos that threw are retried, not failures of a procedure.
  j["failures_total"] =
    get("proctor_procedures_failed_total") + get("proctor_procedures_rolledback_total");
  j["running_steps"] = get("proctor_running_steps");
  j["queue_depth"] = get("proctor_queue_depth");
  j["procedures"] = get("proctor_procedures");
  auto& all = j["metrics"] = nlohmann::ordered_json::object();
  for (const auto& [name, value] : m)
    all[name] = value;
  return j.dump();
}

}  // namespace proctor
