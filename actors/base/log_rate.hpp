// Repeated problems logged at a falling rate: a misconfiguration that lasts (a wrong --peers
// name, answered every heartbeat) is seen at once and again later, without a line every half
// second forever. What the log leaves out, a metric counts.
#pragma once

#include <cstdint>

namespace proctor {

/// Whether the `n`-th occurrence (1-based) of a repeated problem is logged: the 1st, 2nd, 4th,
/// 8th, ... (every power of two).
constexpr bool log_nth(uint64_t n) noexcept {
  return n != 0 && (n & (n - 1)) == 0;
}

}  // namespace proctor
