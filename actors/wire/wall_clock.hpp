// Wall-clock times as the cluster shows them to people: "node b unreachable since
// 2026-11-25T06:40:12Z", `proctor nodes`. Header-only: the CLI uses it without CAF.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
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

}  // namespace proctor
