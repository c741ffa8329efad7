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

/// What `c` means, in words, for an error of it made without a text.
inline const char* errc_text(errc c) {
  switch (c) {
    case errc::none:
      return "no error";
    case errc::step_crashed:
      return "a step crashed";
    case errc::escalated:
      return "escalated: a supervisor gave up";
    case errc::quarantined:
      return "tree quarantined: its journal records are damaged";
    case errc::journal_failed:
      return "the journal could not write";
    case errc::already_ended:
      return "already ended";
    case errc::passivated:
      return "passivated";
  }
  return "unknown error";
}

/// An error as a user reads it: every message that shows one (a procedure's error, an
/// answer the CLI prints, a log line) goes through here, never through
/// actor_system::render. Proctor's own errors (errc) read as the text they were made with:
/// make_error(errc::step_crashed, "picker robot jammed") is "picker robot jammed", not
/// `error(1, 'proctor', ("picker robot jammed"))`; without a text, as what the code means.
/// CAF's own (sec, exit_reason) read as their name and their text ("request_timeout"),
/// except a sec::runtime_error, the way Proctor raises its errors through CAF elsewhere,
/// which reads as its text alone ("node b unreachable since …"). Anything else as CAF
/// renders it.
inline std::string error_text(caf::actor_system& sys, const caf::error& e) {
  if (!e)
    return "no error";
  const auto& ctx = e.context();
  std::string text;
  if (ctx.match_elements<std::string>())
    text = ctx.get_as<std::string>(0);
  else if (!ctx.empty())
    text = caf::to_string(ctx);
  std::string name;
  if (e.category() == caf::atom("proctor")) {
    if (!text.empty())
      return text;  // its own words
    return errc_text(static_cast<errc>(e.code()));
  }
  if (e.category() == caf::atom("system")) {
    auto code = static_cast<caf::sec>(e.code());
    if (code == caf::sec::runtime_error && !text.empty())
      return text;
    name = caf::to_string(code);
  } else if (e.category() == caf::atom("exit")) {
    name = caf::to_string(static_cast<caf::exit_reason>(e.code()));
  } else {
    return sys.render(e);
  }
  return text.empty() ? name : name + ": " + text;
}

}  // namespace proctor
