// The peer link's state and the functions its two files share (peer_link.cpp: the
// connection, heartbeats and requests; peer_link_answers.cpp: what a heartbeat's answer says,
// the peer's incarnation among it). Only those two files include this.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include <caf/io/all.hpp>

#include <proctor/wire.pb.h>

#include "actors/cluster/peer_link.hpp"

namespace proctor::peer_link_detail {

using caf::io::connection_handle;
using caf::io::receive_policy;
using clock_type = std::chrono::steady_clock;

using link_tick_atom = caf::atom_constant<caf::atom("lnktick")>;
using link_fd_atom = caf::atom_constant<caf::atom("lnkfd")>;
using link_close_atom = caf::atom_constant<caf::atom("lnkclose")>;

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
std::optional<size_t> learn_address(link_actor* self, const std::string& text);

/// Tells the parent the peer's status.
void notify(link_actor* self);

/// The connection is gone (or never came): the peer is down from now, every request in
/// flight fails, and the next connect comes after the back-off. `close_now`: close the
/// connection here (never inside a data handler: CAF 0.17 touches the servant after it).
void go_down(link_actor* self, const std::string& reason, bool close_now);

/// The answer to the heartbeat in flight: the peer up (its status, types, addresses, ids),
/// down (a replica that does not lead, a refusal, another name) or refused (an incarnation
/// that is not the one this node knows).
void on_pong(link_actor* self, const pb::Response& r);

}  // namespace proctor::peer_link_detail
