#include <proctor/outcome.hpp>

#include <google/protobuf/util/json_util.h>

#include <proctor/proc_state.hpp>

namespace proctor {

outcome outcome::done(const google::protobuf::Message& result) {
  std::string json;
  auto st = google::protobuf::util::MessageToJsonString(result, &json);
  if (!st.ok())
    throw std::runtime_error("cannot render result as JSON: " + st.ToString());
  return done(std::move(json));
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
