#include "actors/node/replica_group.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace proctor {

uint64_t replica_raft_id(std::string_view name) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h == 0 ? 1 : h;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

bool parse_item(std::string_view item, replica_member* m, std::string* error) {
  auto eq = item.find('=');
  auto slash = item.rfind('/');
  if (eq == std::string_view::npos || slash == std::string_view::npos || slash < eq) {
    *error = "'" + std::string(item) + "' is not NAME=HOST:PORT/RAFT_PORT";
    return false;
  }
  m->name = std::string(trim(item.substr(0, eq)));
  if (m->name.empty() || m->name.find_first_of(" ,=/|#@") != std::string::npos) {
    *error = "'" + std::string(item) + "': the replica's name is empty or has one of ' ,=/|#@'";
    return false;
  }
  auto addr = std::string(trim(item.substr(eq + 1, slash - eq - 1)));
  auto ep = parse_endpoint(addr, false);
  if (!ep) {
    *error = "replica " + m->name + ": '" + addr + "' is not HOST:PORT";
    return false;
  }
  in_addr probe{};
  if (inet_pton(AF_INET, ep->host.c_str(), &probe) != 1) {
    *error = "replica " + m->name + ": '" + ep->host
             + "' is not an IPv4 address (Raft's transport takes no host names)";
    return false;
  }
  auto port_text = trim(item.substr(slash + 1));
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port == 0
      || port > 65535) {
    *error = "replica " + m->name + ": '" + std::string(port_text) + "' is not a Raft port";
    return false;
  }
  m->client = *ep;
  m->raft_address = ep->host + ":" + std::to_string(port);
  m->raft_id = replica_raft_id(m->name);
  return true;
}

}  // namespace

bool parse_replica(std::string_view item, replica_member* out, std::string* error) {
  replica_member m;
  if (!parse_item(trim(item), &m, error))
    return false;
  if (m.raft_address == client_address(m)) {
    *error = "replica " + m.name + ": its Raft port is its client port";
    return false;
  }
  *out = std::move(m);
  return true;
}

std::string client_address(const replica_member& m) {
  return m.client.host + ":" + std::to_string(m.client.port);
}

std::string replica_spec(const replica_member& m) {
  auto raft_port = m.raft_address.substr(m.raft_address.rfind(':') + 1);
  return m.name + "=" + client_address(m) + "/" + raft_port;
}

std::string replica_group_spec(const std::vector<replica_member>& group) {
  std::string out;
  for (const auto& m : group)
    out += (out.empty() ? "" : ",") + replica_spec(m);
  return out;
}

bool same_members(std::vector<replica_member> a, std::vector<replica_member> b) {
  auto by_name = [](const replica_member& x, const replica_member& y) { return x.name < y.name; };
  std::sort(a.begin(), a.end(), by_name);
  std::sort(b.begin(), b.end(), by_name);
  return replica_group_spec(a) == replica_group_spec(b);
}

bool parse_replica_group(std::string_view spec, std::vector<replica_member>* out,
                         std::string* error) {
  out->clear();
  while (!spec.empty()) {
    auto comma = spec.find(',');
    auto item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (item.empty())
      continue;
    replica_member m;
    if (!parse_item(item, &m, error))
      return false;
    for (const auto& o : *out) {
      if (o.name == m.name || o.raft_id == m.raft_id) {
        *error = "replica " + m.name + " is listed twice";
        return false;
      }
      if (o.raft_address == m.raft_address
          || (o.client.host == m.client.host && o.client.port == m.client.port)) {
        *error = "replicas " + o.name + " and " + m.name + " have the same address";
        return false;
      }
      auto client_of = [](const replica_member& x) {
        return x.client.host + ":" + std::to_string(x.client.port);
      };
      if (o.raft_address == client_of(m) || m.raft_address == client_of(o)) {
        *error = "replicas " + o.name + " and " + m.name + " share a port";
        return false;
      }
    }
    if (m.raft_address == m.client.host + ":" + std::to_string(m.client.port)) {
      *error = "replica " + m.name + ": its Raft port is its client port";
      return false;
    }
    out->push_back(std::move(m));
  }
  if (out->empty()) {
    *error = "no replica listed";
    return false;
  }
  return true;
}

const replica_member* find_replica(const std::vector<replica_member>& group,
                                   std::string_view name) {
  for (const auto& m : group)
    if (m.name == name)
      return &m;
  return nullptr;
}

const replica_member* find_replica(const std::vector<replica_member>& group, uint64_t raft_id) {
  for (const auto& m : group)
    if (m.raft_id == raft_id)
      return &m;
  return nullptr;
}

}  // namespace proctor
