// Exit reasons and errors of the runtime, in CAF's error category "proctor".
#pragma once

#include <cstdint>
#include <string>

#include <caf/all.hpp>

namespace proctor {

enum class errc : uint8_t {
  none = 0,
  step_crashed,    ///< a step threw something other than procedure_failure
  escalated,       ///< a supervisor gave up: restart intensity exceeded
  quarantined,     ///< the tree's journal records are damaged
  journal_failed,  ///< the journal could not write (the node fail-stops)
  already_ended,   ///< an abort reached a tree whose end is being written
  passivated,      ///< the tree only waits: its actors give way to the executor's entry
};

inline bool is(const caf::error& e, errc c) {
  return e.category() == caf::atom("proctor") && e.code() == static_cast<uint8_t>(c);
}

}  // namespace proctor

CAF_ERROR_CODE_ENUM_2(proctor::errc, "proctor")

namespace proctor {

/// An error's own words: the text it was made with (make_error(code, "text")), else CAF's
/// rendering of it. For messages a user reads ("node b unreachable since …", not
/// "error(1, runtime_error, \"node b …\")").
inline std::string error_text(caf::actor_system& sys, const caf::error& e) {
  const auto& ctx = e.context();
  if (ctx.match_elements<std::string>())
    return ctx.get_as<std::string>(0);
  return sys.render(e);
}

}  // namespace proctor
