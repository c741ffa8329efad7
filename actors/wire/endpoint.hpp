// HOST:PORT as given on command lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace proctor {

struct endpoint {
  std::string host;
  uint16_t port = 0;
};

/// Parses "HOST:PORT" ("[::1]:PORT" too). `allow_any_port` accepts port 0 ("any free port",
/// for listening); a client needs a real port.
std::optional<endpoint> parse_endpoint(const std::string& text, bool allow_any_port = false);

}  // namespace proctor
