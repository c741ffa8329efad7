// How an incarnation (or a Raft id, which is one) is written everywhere — logs, messages,
// JSON, the CLI: 16 hex digits, so that one can be searched for across them all (a JSON
// number would also lose its low bits past 2^53).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace proctor {

inline std::string incarnation_hex(uint64_t incarnation) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(incarnation));
  return buf;
}

}  // namespace proctor
