#include "actors/cluster/peer_link.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <unordered_map>

#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/log_rate.hpp"
#include "actors/cluster/internal/peer_link_state.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wall_clock.hpp"
#include "actors/wire/wire_client.hpp"
#include "actors/wire/wire_frame.hpp"
#include "persistence/journal.hpp"
#include "persistence/keys.hpp"
#include "tls/caf_tls.hpp"

namespace proctor {
namespace peer_link_detail {
namespace {

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0)
    return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

}  // namespace

/// Learns an address of the peer: a leader it names, a member of its replica group. Kept
/// after the configured ones (the oldest learned dropped past max_learned); the answer from
/// there must still name the peer (on_pong), as from any address. Its index.
std::optional<size_t> learn_address(link_actor* self, const std::string& text) {
  constexpr size_t max_learned = 16;
  auto& st = self->state;
  auto& addrs = st.cfg.addresses;
  for (size_t i = 0; i < addrs.size(); ++i)
    if (addrs[i].text() == text)
      return i;
  auto ep = parse_endpoint(text);
  if (!ep)
    return std::nullopt;
  if (addrs.size() - st.configured >= max_learned) {
    auto oldest = st.configured;
    addrs.erase(addrs.begin() + static_cast<std::ptrdiff_t>(oldest));
    if (st.address_index > oldest)
      --st.address_index;
    else if (st.address_index == oldest)
      st.address_index = oldest % addrs.size();
  }
  addrs.push_back(peer_endpoint{ep->host, ep->port});
  spdlog::info("link to node {}: learned its address {} (its leader or its replica group names "
               "it)",
               st.cfg.peer_name, text);
  return addrs.size() - 1;
}

void notify(link_actor* self) {
  if (self->state.cfg.parent)
    self->send(self->state.cfg.parent, peer_status_atom::value, self->state.status);
}

namespace {

void fail_requests(link_actor* self, const std::string& why) {
  auto requests = std::move(self->state.requests);
  self->state.requests.clear();
  for (auto& [tag, r] : requests)
    r.rp.deliver(caf::make_error(caf::sec::runtime_error, why));
}

}  // namespace

/// The connection is gone (or never came): the peer is down from now, every request in
/// flight fails, and the next connect comes after the back-off. `close_now`: close the
/// connection here (never inside a data handler: CAF 0.17 touches the servant after it).
void go_down(link_actor* self, const std::string& reason, bool close_now) {
  auto& st = self->state;
  if (st.connected) {
    if (close_now)
      self->close(st.hdl);
    else
      self->send(self, link_close_atom::value, st.hdl);
    st.connected = false;
  }
  st.want = 0;
  st.ping_tag = 0;
  st.want_types = true;
  // The next address at once (its standby may be the active one by now); a full round of
  // them without an answer backs off.
  st.address_index = (st.address_index + 1) % st.cfg.addresses.size();
  if (st.address_index == 0) {
    st.backoff =
      std::min(st.cfg.backoff_max, std::max(std::chrono::milliseconds{100}, st.backoff * 2));
    st.next_connect = clock_type::now() + st.backoff;
  } else {
    st.next_connect = clock_type::now();
  }
  if (st.left && !st.status.up) {
    // Left in order: that is what it is down for, whatever connecting to it says now.
  } else if (st.status.up || st.status.reason.empty()) {
    if (st.status.up && st.left) {
      spdlog::info("node {} left ({})", st.cfg.peer_name, reason);
    } else if (st.status.up) {
      ++st.status.downs;
      spdlog::warn("node {} is down: {}", st.cfg.peer_name, reason);
    }
    st.status.up = false;
    st.status.since_ms = wall_ms();
    st.status.reason = reason;
    notify(self);
  } else if (st.status.reason != reason) {
    st.status.reason = reason;
    notify(self);
  }
  fail_requests(self, st.status.unreachable_text());
}

namespace {

void write_frame(link_actor* self, const std::string& payload) {
  char header[frame_header_bytes];
  put_frame_header(header, static_cast<uint32_t>(payload.size()));
  self->write(self->state.hdl, sizeof header, header);
  self->write(self->state.hdl, payload.size(), payload.data());
  self->flush(self->state.hdl);
}

void send_ping(link_actor* self) {
  auto& st = self->state;
  pb::Request req;
  req.mutable_ping()->set_from(st.cfg.self_name);
  req.mutable_ping()->set_want_types(st.want_types);
  req.mutable_ping()->set_to(st.cfg.peer_name);
  req.set_tag(++st.next_tag);
  st.ping_tag = req.tag();
  st.ping_sent = clock_type::now();
  write_frame(self, req.SerializeAsString());
}

/// A connect runs on a detached helper (it blocks up to connect_timeout) and hands the
/// connected socket back.
void start_connect(link_actor* self) {
  auto& st = self->state;
  st.connecting = true;
  auto attempt = ++st.attempt;
  const auto& at = st.cfg.addresses[st.address_index];
  st.status.address = at.text();
  auto host = at.host;
  auto port = at.port;
  auto timeout = st.cfg.connect_timeout;
  auto link = caf::actor_cast<caf::actor>(self);
  self->spawn<caf::detached>([=](caf::event_based_actor* a) {
    std::string why;
    int fd = wire_connect(host, port, timeout, &why);
    a->send(link, link_fd_atom::value, fd, why, attempt);
    a->quit();
  });
}

void on_connected(link_actor* self, int fd) {
  auto& st = self->state;
  if (tls_enabled(self->system())) {
    // Its certificate must name the node this link is to (docs/security.md), or no request
    // of this node's goes to it and no answer of it is taken; with --tls-check-host, carry
    // the host dialled too.
    auto scribe =
      new_tls_scribe(self->system(), fd, "node " + st.cfg.peer_name + " at " + st.status.address,
                     st.cfg.peer_name, st.cfg.addresses[st.address_index].host);
    if (!scribe)
      return go_down(self, "TLS with " + st.status.address + " failed (the log says why)", true);
    st.hdl = (*scribe)->hdl();
    self->add_scribe(std::move(*scribe));
  } else {
    st.hdl = self->add_scribe(fd);
  }
  st.connected = true;
  st.answered = false;
  st.want = 0;
  self->configure_read(st.hdl, receive_policy::exactly(frame_header_bytes));
  spdlog::debug("link to node {}: connected to {}", st.cfg.peer_name, st.status.address);
  send_ping(self);
}

/// An answer that matches no request: it cannot say which request it answers, so it fails
/// none (the one it answered runs out of time, saying so) and leaves the peer up: only the
/// heartbeats decide that, and the framing is intact (the frame's length was read).
/// Logged at a falling rate, counted in proctor_peer_stray_answers_total.
void on_stray(link_actor* self, std::string what) {
  auto& st = self->state;
  auto n = ++st.status.stray_answers;
  if (log_nth(n))
    spdlog::warn("link to node {}: {}; dropped ({} so far; logged at a falling rate)",
                 st.cfg.peer_name, what, n);
  st.stray_at = clock_type::now();
  st.stray = std::move(what);
  notify(self);  // the count, for the metric
}

void on_frame(link_actor* self, std::string payload) {
  auto& st = self->state;
  pb::Response r;
  if (!r.ParseFromString(payload))
    return on_stray(self, "an unreadable answer (" + std::to_string(payload.size()) + " bytes)");
  if (r.tag() == 0)
    return on_stray(self, "an answer without a tag ("
                            + (r.error().empty() ? pb::Response::Code_Name(r.code()) : r.error())
                            + ")");
  if (r.tag() == st.ping_tag)
    return on_pong(self, r);
  auto i = st.requests.find(r.tag());
  if (i == st.requests.end())
    return;  // answered already (failed at its deadline)
  auto rp = std::move(i->second.rp);
  st.requests.erase(i);
  rp.deliver(std::move(payload));
}

/// Every heartbeat_interval: ping, notice silence, fail requests past their deadline,
/// reconnect when it is time.
void tick(link_actor* self) {
  auto& st = self->state;
  auto now = clock_type::now();
  if (st.connected) {
    if (st.ping_tag != 0 && now - st.ping_sent > st.cfg.heartbeat_timeout)
      go_down(self, "no answer to heartbeats for " + duration_text(st.cfg.heartbeat_timeout), true);
    else if (st.ping_tag == 0)
      send_ping(self);
  }
  std::vector<uint64_t> late;
  for (auto& [tag, r] : st.requests)
    if (r.deadline <= now)
      late.push_back(tag);
  for (auto tag : late) {
    auto i = st.requests.find(tag);
    auto rp = std::move(i->second.rp);
    auto why = "node " + st.cfg.peer_name + " did not answer in time";
    if (st.stray_at >= i->second.sent)
      why += " (it sent " + st.stray + " meanwhile)";
    st.requests.erase(i);
    rp.deliver(caf::make_error(caf::sec::runtime_error, std::move(why)));
  }
  if (!st.connected && !st.connecting && now >= st.next_connect)
    start_connect(self);
  self->delayed_send(self, st.cfg.heartbeat_interval, link_tick_atom::value);
}

caf::behavior link_fn(link_actor* self, peer_link_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.configured = st.cfg.addresses.size();
  st.status.name = st.cfg.peer_name;
  st.status.address = st.cfg.addresses.front().text();
  st.status.since_ms = wall_ms();
  st.status.reason = "not connected yet";
  start_connect(self);
  self->delayed_send(self, st.cfg.heartbeat_interval, link_tick_atom::value);
  return {
    [self](peer_request_atom, const std::string&, const std::string& bytes,
           uint32_t timeout_ms) -> caf::result<std::string> {
      auto& st = self->state;
      if (!st.connected || !st.status.up)
        return caf::make_error(caf::sec::runtime_error, st.status.unreachable_text());
      auto tag = ++st.next_tag;
      auto rp = self->make_response_promise<std::string>();
      auto now = clock_type::now();
      st.requests.emplace(tag, outstanding{rp, now, now + std::chrono::milliseconds{timeout_ms}});
      write_frame(self, with_varint_field(bytes, request_tag_field, tag));
      return rp;
    },
    [self](peer_status_atom) { return self->state.status; },
    // Its addresses as the cluster group now says (peer_transport): they come first, and the
    // ones it had (configured or learned) stay after them as learned ones (a standby named
    // by --peers may take over before the group hears of it; at most 16 of them). A
    // connection that works stays; the next connect tries the new list from its start.
    [self](peer_add_atom, const std::string& text) {
      auto& st = self->state;
      std::vector<peer_endpoint> configured;
      for (size_t at = 0; at <= text.size();) {
        auto end = std::min(text.find('|', at), text.size());
        if (auto ep = parse_endpoint(text.substr(at, end - at)))
          configured.push_back(peer_endpoint{ep->host, ep->port});
        at = end + 1;
      }
      if (configured.empty())
        return;
      constexpr size_t max_kept = 16;
      auto addrs = configured;
      for (const auto& e : st.cfg.addresses)
        if (addrs.size() < configured.size() + max_kept
            && std::none_of(addrs.begin(), addrs.end(),
                            [&](const peer_endpoint& x) { return x.text() == e.text(); }))
          addrs.push_back(e);
      st.cfg.addresses = std::move(addrs);
      st.configured = configured.size();
      size_t at = st.cfg.addresses.size();
      for (size_t i = 0; i < st.cfg.addresses.size(); ++i)
        if (st.cfg.addresses[i].text() == st.status.address)
          at = i;
      // go_down moves on by one: from the last, to the first.
      st.address_index = at < st.cfg.addresses.size() ? at : st.cfg.addresses.size() - 1;
    },
    // The peer stops in order (it said so in a ping): down now, as "left", without a warning;
    // it is tried again after a second (its process is going away meanwhile).
    [self](peer_left_atom) {
      auto& st = self->state;
      if (!st.status.up)
        return;
      st.left = true;
      go_down(self, "left: stopped in order by its operator", true);
      st.next_connect = std::max(st.next_connect, clock_type::now() + std::chrono::seconds{1});
    },
    [self](peer_expect_atom, uint64_t incarnation, caf::actor& journal) {
      auto& st = self->state;
      st.expect_known = true;
      st.status.incarnation = incarnation;
      st.journal = std::move(journal);
    },
    // An operator forgot the peer (journaled): that incarnation is refused from now on, and
    // the next other one heard is recorded and taken (a new journal under the old name).
    [self](peer_forget_atom, uint64_t incarnation) {
      auto& st = self->state;
      if (incarnation != 0)
        st.forgotten.insert(incarnation);
      if (incarnation == 0 || st.status.incarnation == incarnation) {
        st.status.incarnation = 0;
        st.status.journal_lsn = 0;
      }
      if (st.status.up && incarnation != 0)
        go_down(self, "forgotten by an operator (proctor node forget)", true);
      notify(self);
    },
    [self](link_fd_atom, int fd, const std::string& why, uint64_t attempt) {
      auto& st = self->state;
      if (attempt != st.attempt || st.connected) {
        if (fd >= 0)
          ::close(fd);
        return;
      }
      st.connecting = false;
      if (fd < 0) {
        return go_down(self, "cannot connect to " + st.status.address + ": " + why, true);
      }
      on_connected(self, fd);
    },
    [self](caf::io::new_data_msg& m) {
      auto& st = self->state;
      if (!st.connected || m.handle != st.hdl)
        return;
      if (st.want == 0) {
        auto len = frame_length(m.buf.data());
        if (check_frame_length(len, st.cfg.max_reply_bytes, true) != frame_check::ok)
          return go_down(self, describe_refused_frame(len, st.cfg.max_reply_bytes), false);
        if (len == 0)
          return on_frame(self, {});
        st.want = len;
        self->configure_read(st.hdl, receive_policy::exactly(len));
        return;
      }
      st.want = 0;
      self->configure_read(st.hdl, receive_policy::exactly(frame_header_bytes));
      on_frame(self, std::string(m.buf.begin(), m.buf.end()));
    },
    [self](const caf::io::connection_closed_msg& m) {
      auto& st = self->state;
      if (st.connected && m.handle == st.hdl) {
        st.connected = false;  // closed already: nothing to close
        go_down(self,
                !st.answered && tls_enabled(self->system())
                  ? "connection closed before any answer (a refused TLS handshake? the logs "
                    "of both nodes say)"
                  : "connection closed",
                false);
      }
    },
    [self](link_close_atom, connection_handle hdl) { self->close(hdl); },
    [self](link_tick_atom) { tick(self); },
  };
}

}  // namespace
}  // namespace peer_link_detail

caf::actor spawn_peer_link(caf::actor_system& sys, peer_link_config cfg) {
  return sys.middleman().spawn_broker(peer_link_detail::link_fn, std::move(cfg));
}

}  // namespace proctor
