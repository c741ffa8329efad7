#include "actors/node/echo_service.hpp"

#include <string>
#include <unordered_map>

#include "actors/base/node_env.hpp"

namespace proctor {

namespace {

struct echo_state {
  static inline const char* name = "proctor.echo";
  std::unordered_map<std::string, std::string> replies;  // by call id
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

caf::behavior echo(caf::stateful_actor<echo_state>* self) {
  return {
    [self](service_call_atom, const std::string& call_id, const std::string& request) {
      auto& r = self->state.replies;
      auto i = r.find(call_id);
      if (i == r.end())
        i = r.emplace(call_id, "{\"echo\":" + json_string(request) + "}").first;
      return i->second;
    },
  };
}

}  // namespace

caf::actor spawn_echo_service(caf::actor_system& sys) {
  return sys.spawn(echo);
}

}  // namespace proctor
