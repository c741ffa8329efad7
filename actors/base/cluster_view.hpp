// How this node sees the cluster right now: each peer's status as its link last reported it
// (peer_link.hpp), and this node's own load. Written by the executor, read by procedure
// actors (placing a child "on any node", showing "node b unreachable since …"); shared
// between threads behind a mutex (a few reads per spawn step and per status change).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/base/peer_status.hpp"

namespace proctor {

class cluster_view {
public:
  /// A peer's new status.
  void set(const peer_status& s);

  /// The peer's status, if it is a peer.
  std::optional<peer_status> get(const std::string& name) const;

  /// True if `name` is a peer seen up (without copying its status, as get() does).
  bool is_up(const std::string& name) const;

  /// Every peer's status (a copy of each: for views and metrics, not per request).
  std::vector<peer_status> all() const;

  /// The sum over the peers of one of their counters (peer_status::refusals ...).
  uint64_t total(uint64_t peer_status::*count) const;

  struct forgotten_peer {
    std::string name;
    uint64_t incarnation = 0;
    int64_t at_ms = 0;
  };
  /// The peers an operator forgot (what a heartbeat answer tells the others).
  std::vector<forgotten_peer> forgotten_peers() const;

  /// The first peer that is up, was heard, is neither forgotten nor gone (set_gone) and
  /// says it places on other `members` than these (a peer that says none, of an earlier
  /// version, does not count): its name and its members.
  std::optional<std::pair<std::string, std::vector<std::string>>>
  first_disagreeing(const std::vector<std::string>& members) const;

  /// An operator forgot `name` (its NodeForgotten record at `lsn`): kept across the link's
  /// reports from now on.
  void forget(const std::string& name, uint64_t lsn, uint64_t incarnation, int64_t at_ms);

  /// True when `name` was forgotten after a procedure placed there was journaled at
  /// `submitted_lsn`: that procedure's part is lost. An unknown LSN (0) is never lost: a
  /// tree is failed only on what its journal says.
  bool lost(const std::string& name, uint64_t submitted_lsn) const;

  /// "not undone: node b forgotten by an operator at 2026-11-28T10:01:02Z (what it held is
  /// lost)": the error of a part lost with its node.
  std::string lost_text(const std::string& name) const;

  /// What a procedure waiting for `node` shows: "node b", or why it is unreachable.
  std::string waiting_text(const std::string& node) const;

  /// The nodes a step may place a child on (ctx.nodes()): this node and its peers, sorted,
  /// without those an operator forgot and those the cluster group says take no new work. A
  /// snapshot, replaced (never changed) by set_self(), add_peer(), set_placeable() and
  /// forget(): a step holds the one it started with.
  std::shared_ptr<const std::vector<std::string>> node_names() const {
    return names_.load(std::memory_order_acquire);
  }

  // -- the members: this node and its peers, each with the number its ids carry -------------
  // Set at start (--peers, and the cluster group's members as last known), and grown while
  // the node runs as the cluster group says nodes joined (docs/cluster-group.md). A peer is
  // never removed: one that left or was forgotten stays known (its ids, its trees).

  /// This node (a node with no name has no members and no peers).
  void set_self(const std::string& name, uint16_t number);
  /// Adds peer `name`, whose ids carry `number`: "" when added or known already under that
  /// number, else why not (the number is this node's or another peer's: ids would collide).
  std::string add_peer(const std::string& name, uint16_t number);
  /// True when `name` is a peer (another node this one knows).
  bool is_peer(const std::string& name) const;
  /// The peer whose ids carry `number` ("" when none).
  std::string peer_of_number(uint16_t number) const;
  /// The peers by number (a copy).
  std::map<uint16_t, std::string> peer_numbers() const;
  /// The nodes that take new work, as the cluster group says (its active members). Every
  /// other name known here (a member draining, left or forgotten; a peer the group does not
  /// list, such as a --peers entry or every node at a change replayed from before this
  /// node's join; this node among them or not) is left out of node_names() while it stays
  /// known. Replaces the previous set; until the first, every name takes new work.
  void set_placeable(std::set<std::string> names);
  /// True when the group has spoken and `name` is not among those.
  bool is_not_placeable(const std::string& name) const;
  /// The members that left the cluster group (removed after a drain): they hear the group
  /// no more, so what they say they place on is not asked (a node that left and still runs
  /// must not hold up everyone's keyed submits). Replaces the previous set.
  void set_gone(std::set<std::string> names);

  /// Procedures this node holds that have not ended (its load, for placement).
  std::atomic<uint64_t> local_live{0};

  /// Where a child of `type` placed on any node goes: among this node (`self`, when it has
  /// the type) and the peers known to have it, the one with the fewest live procedures
  /// (counting `placed`, the children placed by the same step so far) among those that are
  /// up; a peer that is down only when no node that is up has the type. "" when no node is
  /// known to have it.
  std::string pick(const std::string& type, const std::string& self, bool self_has,
                   const std::map<std::string, uint64_t>& placed) const;

private:
  void publish_names();  // under mtx_

  mutable std::mutex mtx_;
  std::map<std::string, peer_status> peers_;
  std::string self_;                                // mtx_
  uint16_t self_number_ = 0;                        // mtx_
  std::map<uint16_t, std::string> numbers_;         // mtx_: the peers by number
  std::vector<std::string> all_names_;              // mtx_: this node and its peers, sorted
  std::optional<std::set<std::string>> placeable_;  // mtx_: none before the group spoke
  std::set<std::string> gone_;                      // mtx_
  std::atomic<std::shared_ptr<const std::vector<std::string>>> names_{
    std::make_shared<const std::vector<std::string>>()};
};

/// What a node whose journal (`incarnation`) peer `peer` forgot at `at_ms` logs as it stops,
/// and what a start on that journal answers (issue 46.11).
std::string journal_forgotten_text(const std::string& node, const std::string& peer,
                                   uint64_t incarnation, int64_t at_ms);

}  // namespace proctor
