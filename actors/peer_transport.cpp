#include "actors/peer_transport.hpp"

#include <sstream>

#include "actors/outbox.hpp"
#include "actors/rpc.hpp"
#include "actors/wire_client.hpp"

namespace proctor {

namespace {

std::string trim(std::string s) {
  auto b = s.find_first_not_of(" \t\r");
  auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

} // namespace

bool parse_peers(const std::string& text, const std::string& self_name,
                 std::map<std::string, peer_address>* out, std::string* err) {
  std::string all = text;
  for (auto& c : all)
    if (c == '\n')
      c = ',';
  std::istringstream in(all);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (auto hash = item.find('#'); hash != std::string::npos)
      item = item.substr(0, hash);
    item = trim(item);
    if (item.empty())
      continue;
    auto eq = item.find('=');
    auto colon = item.rfind(':');
    if (eq == std::string::npos || eq == 0 || colon == std::string::npos || colon < eq) {
      *err = "peer '" + item + "' is not NAME=HOST:PORT";
      return false;
    }
    auto name = item.substr(0, eq);
    auto host = item.substr(eq + 1, colon - eq - 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    unsigned long port = 0;
    try {
      port = std::stoul(item.substr(colon + 1));
    } catch (...) {
      port = 0;
    }
    if (host.empty() || port == 0 || port > 65535) {
      *err = "peer '" + item + "' is not NAME=HOST:PORT";
      return false;
    }
    if (name == self_name) {
      *err = "peer '" + name + "' is this node itself";
      return false;
    }
    if (out->count(name) > 0) {
      *err = "peer '" + name + "' is named twice";
      return false;
    }
    (*out)[name] = peer_address{host, static_cast<uint16_t>(port)};
  }
  return true;
}

namespace {

caf::behavior transport_fn(caf::event_based_actor* self,
                           std::map<std::string, peer_address> peers) {
  return {
    [self, peers](peer_request_atom, const std::string& name, const std::string& bytes,
                  uint32_t timeout_ms) -> caf::result<std::string> {
      auto p = peers.find(name);
      if (p == peers.end())
        return caf::make_error(caf::sec::runtime_error, "no peer named '" + name + "'");
      wire_call_options opts;
      opts.connect_timeout = std::chrono::milliseconds{std::min<uint32_t>(timeout_ms, 5'000)};
      opts.reply_timeout = std::chrono::milliseconds{timeout_ms};
      auto caller = self->spawn<caf::detached>(
        [addr = p->second, name, bytes, opts](caf::event_based_actor* a) {
          return caf::behavior{[=](rpc_atom) -> caf::result<std::string> {
            a->quit();
            auto r = wire_call(addr.host, addr.port, bytes, opts);
            if (!r.ok())
              return caf::make_error(caf::sec::runtime_error, "node " + name + ": " + r.reason);
            return std::move(r.reply);
          }};
        });
      auto rp = self->make_response_promise<std::string>();
      self->request(caller, opts.connect_timeout + opts.reply_timeout + std::chrono::seconds{1},
                    rpc_atom::value)
        .then([rp](std::string& reply) mutable { rp.deliver(std::move(reply)); },
              [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
      return rp;
    },
  };
}

} // namespace

caf::actor spawn_peer_transport(caf::actor_system& sys,
                                std::map<std::string, peer_address> peers) {
  return sys.spawn(transport_fn, std::move(peers));
}

} // namespace proctor
