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
#include "actors/cluster/outbox.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wall_clock.hpp"
#include "actors/wire/wire_client.hpp"
#include "actors/wire/wire_frame.hpp"
#include "persistence/journal.hpp"
#include "persistence/keys.hpp"
#include "tls/caf_tls.hpp"

namespace proctor {

namespace {

using caf::io::connection_handle;
using caf::io::receive_policy;
using clock_type = std::chrono::steady_clock;

using link_tick_atom = caf::atom_constant<caf::atom("lnktick")>;
using link_fd_atom = caf::atom_constant<caf::atom("lnkfd")>;
using link_close_atom = caf::atom_constant<caf::atom("lnkclose")>;

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0)
    return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

struct outstanding {
  caf::typed_response_promise<std::string> rp;
  clock_type::time_point sent;
  clock_type::time_point deadline;
};

struct link_state {
  static inline const char* name = "proctor.peer_link";
  peer_link_config cfg;
  peer_status status;

  // -- the connection -------------------------------------------------------------------------
  bool connected = false;
  connection_handle hdl;
  uint32_t want = 0;  ///< 0: awaiting a frame header, else the payload's length
  bool connecting = false;
  uint64_t attempt = 0;  ///< of the connect in progress (older results are dropped)
  clock_type::time_point next_connect{};
  std::chrono::milliseconds backoff{0};
  size_t address_index = 0;  ///< of cfg.addresses: the one connected or tried next
  /// cfg.addresses as configured (--peers); those after them were learned from the peer: its
  /// leader's hint, its group's members (a replica replaced at a new address).
  size_t configured = 0;

  // -- requests -------------------------------------------------------------------------------
  uint64_t next_tag = 0;
  std::unordered_map<uint64_t, outstanding> requests;  ///< by tag
  uint64_t ping_tag = 0;                               ///< the heartbeat in flight (0: none)
  uint64_t not_leader_answers = 0;  ///< pings a replica that does not lead answered
  clock_type::time_point ping_sent{};
  bool want_types = true;  ///< the next ping asks for the peer's types
  bool answered = false;   ///< the connection brought an answer (its TLS handshake went through)
  /// The last answer that could not be matched to a request (unreadable, or untagged):
  /// when, and what it was, for the requests that then run out of time.
  clock_type::time_point stray_at{};
  std::string stray;

  // -- the peer's incarnation (docs/cluster.md, "Incarnations") -------------------------------
  bool expect_known = false;         ///< the node recovered and said which incarnation it knows
  caf::actor journal;                ///< records the first incarnation heard
  bool recording = false;            ///< ... which is being recorded now
  uint64_t refused_incarnation = 0;  ///< the other incarnation last refused (for the log)
  /// Incarnations an operator forgot (`node forget`): refused for good, whatever else.
  std::set<uint64_t> forgotten;
  /// The peer said it stops in order (a ping with `leaving`): down as "left" until it answers
  /// again, logged at info and not counted as a failure.
  bool left = false;
};

using link_actor = caf::io::stateful_broker<link_state>;

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

void fail_requests(link_actor* self, const std::string& why) {
  auto requests = std::move(self->state.requests);
  self->state.requests.clear();
  for (auto& [tag, r] : requests)
    r.rp.deliver(caf::make_error(caf::sec::runtime_error, why));
}

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
    auto scribe =
      new_tls_scribe(self->system(), fd, "node " + st.cfg.peer_name + " at " + st.status.address);
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

std::string incarnation_text(uint64_t i) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(i));
  return buf;
}

/// The peer answered as incarnation `heard`, which is refused (`why`): down, the refusal
/// counted and logged at a falling rate (and whenever another incarnation is refused).
bool refuse_incarnation(link_actor* self, uint64_t heard, const std::string& why) {
  auto& st = self->state;
  auto n = ++st.status.refusals;
  if (log_nth(n) || st.refused_incarnation != heard)
    spdlog::error("link to node {}: {} ({} answer(s) so far; logged at a falling rate)",
                  st.cfg.peer_name, why, n);
  st.refused_incarnation = heard;
  go_down(self, why, false);
  notify(self);
  return false;
}

/// Whether the peer that answered is the incarnation this node knows. Until the node
/// recovered (it does not know yet), no; the first incarnation heard is journaled before it
/// is taken (the next heartbeat then finds it known); another one than the journal's makes
/// the peer down: it came back with an empty journal, and what the old one held is lost.
/// A peer of a version without incarnations (0) is taken as it is.
bool incarnation_taken(link_actor* self, uint64_t heard) {
  auto& st = self->state;
  auto& s = st.status;
  if (heard == 0)
    return true;
  if (!st.expect_known)
    return false;  // asked again at the next heartbeat
  if (st.forgotten.count(heard) > 0)
    return refuse_incarnation(
      self, heard,
      "node " + st.cfg.peer_name + " at " + s.address + " came back as incarnation "
        + incarnation_text(heard)
        + ", which an operator forgot (proctor node forget): what it held was declared lost and "
          "undone elsewhere, so it is refused for good; to bring the name back, start it with "
          "an empty data directory");
  if (s.incarnation == heard)
    return true;
  if (s.incarnation == 0) {
    if (!st.recording && st.journal) {
      st.recording = true;
      pb::JournalRecord rec;
      auto* p = rec.mutable_peer_incarnation();
      p->set_peer(st.cfg.peer_name);
      p->set_incarnation(heard);
      p->set_first_seen_ms(wall_ms());
      journal_batch b;
      b.entries.push_back(make_entry(journal_keys::meta_root, rec));
      self->request(st.journal, caf::infinite, append_atom::value, std::move(b))
        .then(
          [self, heard](uint64_t) {
            auto& st = self->state;
            st.recording = false;
            st.status.incarnation = heard;
            st.status.journal_lsn = 0;  // the other journal's LSN is not this one's
            spdlog::info("node {}: incarnation {} recorded (its first answer)", st.cfg.peer_name,
                         incarnation_text(heard));
          },
          [self](caf::error& e) {
            self->state.recording = false;
            spdlog::warn("node {}: recording its incarnation failed ({}); tried again",
                         self->state.cfg.peer_name, caf::to_string(e));
          });
    }
    return false;
  }
  return refuse_incarnation(
    self, heard,
    "node " + st.cfg.peer_name + " at " + s.address
      + " came back with another journal (incarnation " + incarnation_text(heard)
      + "; this node knew " + incarnation_text(s.incarnation)
      + "): what the node that left held is lost, and the new one's answers are not taken for "
        "its; once it is lost for good, declare it so on every node that knew it: proctor node "
        "forget "
      + st.cfg.peer_name + " --confirm-lost");
}

void on_pong(link_actor* self, const pb::Response& r) {
  auto& st = self->state;
  auto rtt =
    std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - st.ping_sent);
  st.ping_tag = 0;
  st.answered = true;
  if (r.code() == pb::Response::NOT_LEADER) {
    // A replica of the node that does not lead it (docs/replication.md): the leader it
    // names is tried next, wherever it is (a replica replaced at a new address leads there),
    // else the next address.
    if (!r.leader().empty())
      if (auto i = learn_address(self, r.leader())) {
        const auto n = st.cfg.addresses.size();
        st.address_index = (*i + n - 1) % n;  // go_down moves on by one
      }
    auto n = ++st.not_leader_answers;
    if (log_nth(n))
      spdlog::info("link to node {}: {} ({} such answer(s); logged at a falling rate)",
                   st.cfg.peer_name, r.error(), n);
    return go_down(self, r.error(), false);
  }
  if (r.code() == pb::Response::OK && r.pong().name() == st.cfg.peer_name) {
    // Ids are the name's, whichever incarnation reports them: an incarnation refused here
    // (a node restarted empty, not forgotten yet) hands out ids too, and the next one must
    // begin above them (docs/cluster.md, "Procedure ids"). Its journal's LSN is not taken:
    // it is another journal's.
    auto& s = st.status;
    s.next_id = r.pong().next_id();
    s.heard_next_id = r.pong().your_next_id();
    s.heard_incarnation = r.pong().your_incarnation();
    s.heard_journal_lsn = r.pong().your_journal_lsn();
    s.heard_forgotten_incarnation = r.pong().your_forgotten_incarnation();
    s.heard_forgotten_at_ms = r.pong().your_forgotten_at_ms();
    s.heard = true;
    s.members.assign(r.pong().members().begin(), r.pong().members().end());
    s.forgotten.clear();
    for (const auto& f : r.pong().forgotten())
      s.forgotten.push_back({f.name(), f.incarnation(), f.at_ms()});
    if (!incarnation_taken(self, r.pong().incarnation()))
      return;
  }
  if (r.code() != pb::Response::OK || r.pong().name() != st.cfg.peer_name) {
    auto why = r.code() != pb::Response::OK
                 ? "it refuses this node: " + r.error()
                 : st.status.address + " answers as node '" + r.pong().name() + "', not '"
                     + st.cfg.peer_name + "'";
    // Every heartbeat gets the same answer until someone fixes --peers: logged at a falling
    // rate, counted in proctor_peer_refusals_total.
    auto n = ++st.status.refusals;
    if (log_nth(n))
      spdlog::error("link to node {}: {} ({} answer(s) so far; logged at a falling rate)",
                    st.cfg.peer_name, why, n);
    go_down(self, why, false);
    notify(self);  // the count, for the metric, also when the reason stays the same
    return;
  }
  // Every answer goes to the parent, not only a change: its load (`live`) is what
  // placement on any node weighs.
  auto& s = st.status;
  s.rtt_us = rtt.count();
  s.number = static_cast<uint16_t>(r.pong().number());
  s.live = r.pong().live();
  s.started_at_ms = r.pong().started_at_ms();
  s.group = r.pong().has_group() ? r.pong().group().SerializeAsString() : std::string{};
  // Its group's members as its leader knows them: where to look when this one goes.
  for (const auto& m : r.pong().group().replicas())
    if (!m.address().empty())
      learn_address(self, m.address());
  s.journal_lsn = r.pong().journal_lsn();  // (its ids: above, whatever its incarnation)
  if (st.want_types) {
    s.types.assign(r.pong().types().begin(), r.pong().types().end());
    std::sort(s.types.begin(), s.types.end());
    s.types_known = true;
    st.want_types = false;
  }
  st.backoff = std::chrono::milliseconds{0};
  if (!s.up) {
    st.left = false;
    spdlog::info("node {} is up ({})", st.cfg.peer_name, s.address);
    s.up = true;
    s.since_ms = wall_ms();
    s.reason.clear();
  }
  notify(self);
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

caf::actor spawn_peer_link(caf::actor_system& sys, peer_link_config cfg) {
  return sys.middleman().spawn_broker(link_fn, std::move(cfg));
}

}  // namespace proctor
