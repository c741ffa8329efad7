#include "actors/cluster/peer_transport.hpp"

#include <algorithm>
#include <memory>
#include <sstream>

#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/cluster/outbox.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

std::string trim(std::string s) {
  auto b = s.find_first_not_of(" \t\r");
  auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string{} : s.substr(b, e - b + 1);
}

}  // namespace

bool parse_peers(const std::string& text, const std::string& self_name,
                 std::map<std::string, peer_address>* out, std::string* err) {
  // A comment runs from '#' to the end of its line (commas in it included); then lines and
  // commas separate the items alike.
  std::string all;
  std::istringstream lines_in(text);
  for (std::string line; std::getline(lines_in, line);) {
    if (auto hash = line.find('#'); hash != std::string::npos)
      line.resize(hash);
    all += line + ",";
  }
  std::istringstream in(all);
  std::string item;
  while (std::getline(in, item, ',')) {
    item = trim(item);
    if (item.empty())
      continue;
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      *err = "peer '" + item + "' is not NAME=HOST:PORT";
      return false;
    }
    auto name = item.substr(0, eq);
    peer_address addr;
    auto rest = item.substr(eq + 1);
    std::istringstream alts(rest);
    std::string one;
    while (std::getline(alts, one, '|')) {
      auto ep = parse_endpoint(trim(one));
      if (!ep) {
        *err = "peer '" + item + "' is not NAME=HOST:PORT (or NAME=HOST:PORT|HOST:PORT...)";
        return false;
      }
      addr.endpoints.push_back(peer_endpoint{ep->host, ep->port});
    }
    // getline drops a last empty piece ("h:1|"): count the separators instead.
    if (addr.endpoints.empty()
        || addr.endpoints.size() != size_t(std::count(rest.begin(), rest.end(), '|')) + 1) {
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
    (*out)[name] = std::move(addr);
  }
  return true;
}

std::string peer_address::text() const {
  std::string out;
  for (const auto& e : endpoints)
    out += (out.empty() ? "" : "|") + e.text();
  return out;
}

namespace {

struct transport_state {
  static inline const char* name = "proctor.peers";
  peer_transport_config cfg;
  std::map<std::string, caf::actor> links;
  std::map<std::string, peer_status> status;
  /// Each link's addresses as last configured (--peers, or the cluster group's word).
  std::map<std::string, std::string> addresses;
  std::vector<caf::actor> subscribers;
  /// The journal of the last peer_expect (unset before): a link added later hears it too.
  caf::actor journal;
};

using transport_actor = caf::stateful_actor<transport_state>;

void add_link(transport_actor* self, const std::string& name, const peer_address& addr) {
  const auto& cfg = self->state.cfg;
  peer_link_config lc;
  lc.self_name = cfg.self_name;
  lc.peer_name = name;
  lc.addresses = addr.endpoints;
  lc.heartbeat_interval = cfg.heartbeat_interval;
  lc.heartbeat_timeout = cfg.heartbeat_timeout;
  lc.connect_timeout = cfg.connect_timeout;
  lc.parent = caf::actor_cast<caf::actor>(self);
  auto link = spawn_peer_link(self->system(), lc);
  self->link_to(link);  // a link goes with the transport, and the transport with a link
  self->state.links[name] = link;
  self->state.addresses[name] = addr.text();
  auto& s = self->state.status[name];
  s.name = name;
  s.address = addr.endpoints.front().text();
  s.reason = "not connected yet";
  s.since_ms = wall_ms();  // down since now: a node-loss deadline counts from here
  for (auto& sub : self->state.subscribers)
    self->send(sub, peer_status_atom::value, s);
}

caf::behavior transport_fn(transport_actor* self, peer_transport_config cfg) {
  self->state.cfg = std::move(cfg);
  for (const auto& [name, addr] : self->state.cfg.peers)
    add_link(self, name, addr);
  return {
    [self](peer_request_atom, const std::string& name, const std::string& bytes,
           uint32_t timeout_ms) -> caf::result<std::string> {
      auto l = self->state.links.find(name);
      if (l == self->state.links.end())
        return caf::make_error(caf::sec::runtime_error, "no peer named '" + name + "'");
      // The link bounds every request itself (its deadline, or at once when the peer is
      // down); the slack only covers a link that died with the request.
      auto rp = self->make_response_promise<std::string>();
      self
        ->request(l->second, std::chrono::milliseconds{timeout_ms} + std::chrono::seconds{5},
                  peer_request_atom::value, name, bytes, timeout_ms)
        .then([rp](std::string& r) mutable { rp.deliver(std::move(r)); },
              [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
      return rp;
    },
    [self](peer_status_atom, peer_status& s) {
      for (auto& sub : self->state.subscribers)
        self->send(sub, peer_status_atom::value, s);
      self->state.status[s.name] = std::move(s);
    },
    [self](peer_expect_atom, const std::map<std::string, uint64_t>& known, caf::actor& journal) {
      self->state.journal = journal;
      for (const auto& [name, link] : self->state.links) {
        auto k = known.find(name);
        self->send(link, peer_expect_atom::value, k == known.end() ? uint64_t{0} : k->second,
                   journal);
      }
    },
    // This node stops in order: each peer that is up hears it from a ping that says so
    // (its link to this node then shows "left", not a failure), within the bound.
    [self](peer_leaving_atom, uint32_t bound_ms) -> caf::result<bool> {
      pb::Request req;
      req.mutable_ping()->set_from(self->state.cfg.self_name);
      req.mutable_ping()->set_leaving(true);
      auto bytes = req.SerializeAsString();
      auto rp = self->make_response_promise<bool>();
      auto left = std::make_shared<size_t>(0);
      for (const auto& [name, link] : self->state.links)
        if (self->state.status[name].up)
          ++*left;
      if (*left == 0) {
        rp.deliver(true);
        return rp;
      }
      for (const auto& [name, link] : self->state.links) {
        if (!self->state.status[name].up)
          continue;
        auto one = [rp, left]() mutable {
          if (--*left == 0)
            rp.deliver(true);
        };
        self
          ->request(link, std::chrono::milliseconds{bound_ms}, peer_request_atom::value, name,
                    bytes, bound_ms)
          .then([one](std::string&) mutable { one(); }, [one](caf::error&) mutable { one(); });
      }
      return rp;
    },
    [self](peer_forget_atom, const std::string& name, uint64_t incarnation) {
      if (auto l = self->state.links.find(name); l != self->state.links.end())
        self->send(l->second, peer_forget_atom::value, incarnation);
    },
    [self](peer_left_atom, const std::string& name) {
      if (auto l = self->state.links.find(name); l != self->state.links.end())
        self->send(l->second, peer_left_atom::value);
    },
    // A node that joined the cluster (the cluster group said so): a link to it from now on.
    // Its incarnation is not known yet: the first one heard is recorded.
    [self](peer_add_atom, const std::string& name, const std::string& address) {
      auto& st = self->state;
      if (name == st.cfg.self_name)
        return;
      auto known = st.addresses.find(name);
      if (known != st.addresses.end() && known->second == address)
        return;
      std::map<std::string, peer_address> one;
      std::string err;
      if (!parse_peers(name + "=" + address, st.cfg.self_name, &one, &err)) {
        spdlog::error("peer {}: {}: {}", name,
                      known == st.addresses.end() ? "not linked" : "not moved", err);
        return;
      }
      if (known != st.addresses.end()) {
        // It joined the cluster group again at other addresses (a node restarted elsewhere,
        // a node run as replicas whose replicas changed): the link tries those from now on.
        spdlog::info("peer {}: its addresses are now {} (was {}), as the cluster group says", name,
                     address, known->second);
        known->second = address;
        self->send(st.links[name], peer_add_atom::value, one.begin()->second.text());
        return;
      }
      add_link(self, name, one.begin()->second);
      if (self->state.journal)
        self->send(self->state.links[name], peer_expect_atom::value, uint64_t{0},
                   self->state.journal);
      spdlog::info("peer {} at {}: linked (it joined the cluster)", name, address);
    },
    [self](peer_status_atom) {
      std::vector<peer_status> out;
      for (const auto& [name, s] : self->state.status)
        out.push_back(s);
      return out;
    },
    [self](peer_subscribe_atom, caf::actor& sub) {
      for (const auto& [name, s] : self->state.status)
        self->send(sub, peer_status_atom::value, s);
      self->state.subscribers.push_back(std::move(sub));
    },
  };
}

}  // namespace

caf::actor spawn_peer_transport(caf::actor_system& sys, peer_transport_config cfg) {
  return sys.spawn(transport_fn, std::move(cfg));
}

}  // namespace proctor
