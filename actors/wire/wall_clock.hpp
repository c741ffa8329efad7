// Wall-clock times as the cluster shows them to people: "node b unreachable since
// 2026-11-25T06:40:12Z", `proctor nodes`. Header-only: the CLI uses it without CAF.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <optional>
#include <string>

namespace proctor {

/// Milliseconds since the epoch, now.
inline int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// Milliseconds since the epoch as "2026-11-25T06:40:12Z" (UTC, to the second).
inline std::string utc_text(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// Milliseconds since the epoch as "2026-11-25T06:40:12.345Z" (UTC, to the millisecond): a
/// deadline or a timer's wake in `proctor history`.
inline std::string utc_ms_text(int64_t ms) {
  auto text = utc_text(ms);  // ...:12Z
  auto frac = std::to_string(1000 + ms % 1000).substr(1);
  return text.substr(0, text.size() - 1) + "." + frac + "Z";
}

/// "2026-11-25T06:40:12Z" (as utc_text writes it; no other zone) as milliseconds since the
/// epoch; nullopt when it is not that.
inline std::optional<int64_t> parse_utc(const std::string& text) {
  std::tm tm{};
  int used = 0;
  if (text.size() != 20
      || std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon,
                     &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used)
           != 6
      || used != 20 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31
      || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
    return std::nullopt;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<int64_t>(::timegm(&tm)) * 1000;
}

}  // namespace proctor
