// The cluster group's state machine (docs/cluster.md, "The cluster group"): the members of
// the cluster (name, incarnation, number, addresses, state, id floor), and the settings that
// hold for the whole cluster. A raft_group (cluster_group.hpp) replicates it; every member of
// the group applies the same commands (cluster.proto ClusterCommand) in the same order and
// decides each the same way, refusing those the state does not allow with a reason.
//
// The state is small (a few hundred bytes a member) and kept in memory only: libraft keeps
// the log and the snapshots, restores the last snapshot at a restart and replays the log
// after it, so nothing here is written to disk by the state machine itself.
//
// The placement table is not stored: it is a pure function of the active members
// (actors/base/placement.hpp), which every node computes the same from the same state.
//
// Threading: apply(), begin_snapshot(), end_snapshot() and restore() run on the Raft loop
// thread, serialize_snapshot() on a libuv worker; current(), outcome() and the subscribers'
// registration from any thread. Subscribers are called on the loop thread after each change
// and must not block.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <proctor/cluster.pb.h>

#include "replication/raft_state_machine.hpp"

namespace proctor {

/// What a command did: applied (it changed the state, or asked for what already held), or
/// refused with a one-line reason for the operator.
struct cluster_outcome {
  bool applied = false;
  std::string text;
};

/// A command as a Raft entry: the byte 'C', its length (4 bytes, little-endian), its
/// protobuf bytes. The length lets the entry carry the padding raft_group adds.
std::string encode_cluster_command(const pb::ClusterCommand& command);
/// False when `entry` is not one (the padding after it is ignored).
bool decode_cluster_command(std::string_view entry, pb::ClusterCommand* out);

// -- Feature levels (docs/cluster-group.md, "Rolling upgrades") ---------------------------
// Every member of the group must decide each command the same way, also while members run
// different releases. So each release knows the commands and rules up to its feature level,
// each command kind needs a level, and the cluster applies commands at one level (its
// state's): a command above it is refused by every member, whichever release it runs (one
// that does not know the command refuses it too). The level is the founder's at founding and
// rises, never falls, to the lowest level the members taking part know (each says its own at
// its join and in its reports); a node whose release is below the cluster's level is refused
// at its join, and a member whose release finds the state above its level stops applying
// rather than decide what it does not know (the node then says so; a newer release goes on).

/// The feature level of this release. Raise it with every command kind or rule change a
/// release adds (and give that command its level in command_feature_level).
inline constexpr uint32_t release_feature_level = 1;

/// The level `command` needs: its kind's, or above any level this release knows when it is of
/// a kind this release does not know (a newer release's).
uint32_t command_feature_level(const pb::ClusterCommand& command);

/// The level the cluster applies commands at (a state from before levels existed: 1).
uint32_t cluster_feature_level(const pb::ClusterState& state);

/// The rules, as a pure function: `command` applied at Raft `index` to `state` (changed in
/// place when applied). Deterministic; cluster_state::apply and the tests use it.
cluster_outcome apply_cluster_command(pb::ClusterState* state, const pb::ClusterCommand& command,
                                      uint64_t index);

/// The member of that name, or null.
const pb::ClusterMember* find_member(const pb::ClusterState& state, std::string_view name);

/// True when `m`'s incarnation takes part in the cluster: joining, active or draining (not
/// left, not forgotten).
bool member_takes_part(const pb::ClusterMember& m);

/// The names of the ACTIVE members, sorted: those placement tables are made of.
std::vector<std::string> active_members(const pb::ClusterState& state);

/// "joining", "active", ...
const char* member_state_name(pb::MemberState s);

class cluster_state final : public raft_state_machine {
public:
  using state_ptr = std::shared_ptr<const pb::ClusterState>;

  /// `release_level`: the feature level this member's release knows (a test may pose as an
  /// older or newer release).
  explicit cluster_state(uint32_t release_level = release_feature_level);

  /// The state as of the last applied command (never null; empty before the founding).
  state_ptr current() const;

  /// The outcome of the command with this request id, if it applied here recently (the
  /// last 4096 are kept, in memory: for the member that proposed them).
  std::optional<cluster_outcome> outcome(uint64_t request_id) const;

  /// Registers `fn`, called on the loop thread with the new state after each command that
  /// changed it and after a snapshot replaced it. Not called for the state at registration.
  void subscribe(std::function<void(const state_ptr&)> fn);

  /// Why this member stopped applying ("" while it applies): a command's result or a
  /// snapshot was above this release's feature level. It stays stopped: current() is the
  /// last state it could hold.
  std::string stopped() const;

  // -- raft_state_machine ------------------------------------------------------------------
  uint64_t applied_index() const override { return applied_.load(std::memory_order_acquire); }
  rocksdb::Status apply(uint64_t index, std::string_view entry) override;
  void begin_snapshot(uint64_t index) override;
  rocksdb::Status serialize_snapshot(std::vector<std::string>* chunks) override;
  void end_snapshot() override;
  rocksdb::Status restore(std::string_view data, bool* replaced) override;

private:
  static constexpr size_t kept_outcomes = 4096;

  /// Why this release must not hold `next` ("" when it may): its level is above this one's.
  std::string above_release(const pb::ClusterState& next) const;
  /// Records `why` as stopped() (the first reason stays) and returns it as Aborted.
  rocksdb::Status stop_applying(const std::string& why);

  const uint32_t release_level_;
  mutable std::mutex mtx_;
  state_ptr state_;                                          // mtx_
  std::unordered_map<uint64_t, cluster_outcome> outcomes_;   // mtx_
  std::deque<uint64_t> outcome_order_;                       // mtx_: oldest first
  std::vector<std::function<void(const state_ptr&)>> subs_;  // mtx_
  std::string stopped_;                                      // mtx_
  std::atomic<uint64_t> applied_{0};
  state_ptr pinned_;  // begin_snapshot .. end_snapshot
};

}  // namespace proctor
