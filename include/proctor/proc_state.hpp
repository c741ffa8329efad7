// The seven procedure states.
#pragma once

#include <cstdint>
#include <string_view>

#include <proctor/journal.pb.h>

namespace proctor {

/// The seven states of HBase's Procedure V2; numbers equal the journal's pb::ProcState.
enum class proc_state : uint8_t {
  initializing = pb::INITIALIZING,
  runnable = pb::RUNNABLE,
  waiting = pb::WAITING,
  waiting_timeout = pb::WAITING_TIMEOUT,
  rolledback = pb::ROLLEDBACK,
  success = pb::SUCCESS,
  failed = pb::FAILED,
};

/// The upper-case name used on the wire and in JSON (e.g. "WAITING_TIMEOUT").
std::string_view to_string(proc_state s) noexcept;

/// True for SUCCESS, ROLLEDBACK and FAILED.
constexpr bool is_final(proc_state s) noexcept {
  return s == proc_state::success || s == proc_state::rolledback || s == proc_state::failed;
}

inline pb::ProcState to_pb(proc_state s) noexcept {
  return static_cast<pb::ProcState>(s);
}
inline proc_state from_pb(pb::ProcState s) noexcept {
  return static_cast<proc_state>(s);
}

}  // namespace proctor
