#include "actors/wire/endpoint.hpp"

namespace proctor {

std::optional<endpoint> parse_endpoint(const std::string& text, bool allow_any_port) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return std::nullopt;
  endpoint ep;
  ep.host = text.substr(0, colon);
  if (ep.host.size() >= 2 && ep.host.front() == '[' && ep.host.back() == ']')
    ep.host = ep.host.substr(1, ep.host.size() - 2);
  auto port_text = text.substr(colon + 1);
  if (ep.host.empty() || port_text.size() > 5
      || port_text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  auto port = std::stoul(port_text);
  if ((port == 0 && !allow_any_port) || port > 65535)
    return std::nullopt;
  ep.port = static_cast<uint16_t>(port);
  return ep;
}

}  // namespace proctor
