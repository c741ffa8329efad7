#include <google/protobuf/util/json_util.h>

#include <proctor/context.hpp>
#include <proctor/outcome.hpp>
#include <proctor/proc_state.hpp>

#include "procedures/proto_json.hpp"

namespace proctor {

outcome outcome::done(const google::protobuf::Message& result) {
  return done(message_to_json(result));  // throws when protobuf cannot render it
}

outcome outcome::dispatch(std::string queue, const google::protobuf::Message& input, int32_t state,
                          std::chrono::milliseconds timeout) {
  return dispatch(std::move(queue), message_to_json(input), state, timeout);
}

bool child_result::parse_result(google::protobuf::Message& m, std::string* why_not) const {
  m.Clear();
  auto fail = [&](std::string why) {
    if (why_not != nullptr)
      *why_not = "child " + std::to_string(id) + "'s result " + std::move(why);
    return false;
  };
  if (state != proc_state::success)
    return fail("is not there: it ended " + std::string(to_string(state))
                + (error.empty() ? "" : " (" + error + ")"));
  if (result_json.empty())
    return true;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;  // another message's fields: a mismatch, not a default
  auto st = google::protobuf::util::JsonStringToMessage(result_json, &m, opts);
  if (!st.ok())
    return fail("is not a " + m.GetDescriptor()->full_name() + ": " + std::string(st.message()));
  return true;
}

bool context::parse_event(google::protobuf::Message& m, std::string* why_not) const {
  m.Clear();
  if (event_payload_.empty() || event_payload_ == "null")
    return true;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = false;  // another message's fields: a mismatch, not a default
  auto st = google::protobuf::util::JsonStringToMessage(event_payload_, &m, opts);
  if (st.ok())
    return true;
  if (why_not != nullptr)
    *why_not = "procedure " + std::to_string(id_) + "'s event payload is not a "
               + m.GetDescriptor()->full_name() + ": " + std::string(st.message());
  return false;
}

std::string_view to_string(proc_state s) noexcept {
  switch (s) {
    case proc_state::initializing:
      return "INITIALIZING";
    case proc_state::runnable:
      return "RUNNABLE";
    case proc_state::waiting:
      return "WAITING";
    case proc_state::waiting_timeout:
      return "WAITING_TIMEOUT";
    case proc_state::rolledback:
      return "ROLLEDBACK";
    case proc_state::success:
      return "SUCCESS";
    case proc_state::failed:
      return "FAILED";
  }
  return "UNKNOWN";
}

}  // namespace proctor
