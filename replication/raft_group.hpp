// A Raft group (libraft 0.15, libuv) replicating a raft_state_machine: proposals are log
// entries, acknowledged once a majority of the members has them on disk and this member has
// applied them to its state machine. Generic: the journal's group (raft_store.hpp) and the
// cluster's own group (cluster_group.hpp) are both one, with their own state machine.
// docs/replication.md describes the design and its guarantees.
//
// Threading: one thread per group runs a libuv loop that owns libraft's `struct raft`
// (libraft is not thread-safe; uv_async_send is the only call other threads make into that
// loop). propose() may be called from any thread, concurrently; it queues its entry, wakes the
// loop and blocks until the entry's outcome is known. The observers (is_leader() ...) read
// atomics the loop thread updates after each of its iterations. Leadership callbacks run on a
// notifier thread of the group, one at a time, in order.
//
// Process-wide side effect: opening a group ignores SIGPIPE in the whole process (libuv and
// libraft write to sockets with write(2), and a peer that vanished would otherwise kill the
// process with SIGPIPE; there is no per-socket way with write(2) on Linux).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <rocksdb/status.h>

#include "replication/raft_state_machine.hpp"
#include "tls/tls_in_use.hpp"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace proctor {

struct raft_member {
  uint64_t id = 0;      ///< > 0, unique in the group
  std::string address;  ///< IPv4 dotted quad and port: "127.0.0.1:7001" (raft_uv_tcp)
  /// Kept with the member in the group's configuration (in the Raft log), so that every
  /// replica learns it with the membership: the node stores the replica's name and client
  /// address here. Must not contain '#'.
  std::string label;
  friend bool operator==(const raft_member&, const raft_member&) = default;
};

/// A change of the group's membership (raft_group::change_membership).
struct membership_change {
  enum class kind : uint8_t {
    /// Adds `member` as a standby (it receives the log, or a snapshot, and does not vote),
    /// waits until it is at most a few entries behind, then makes it a voter. Repeating an
    /// add that timed out resumes it; an add of a standby promotes it the same way.
    add,
    /// Removes the member of id `member.id`.
    remove,
    /// Adds `member` as a standby and leaves it one (OK at once if it is a standby or a
    /// voter already).
    add_standby,
    /// Makes the voter `member.id` a standby (not the leader itself).
    demote
  } what = kind::add;
  raft_member member;
  /// add: how long the new member may take to catch up before the change gives up (it stays
  /// a standby, which keeps catching up and does not count for the majority).
  std::chrono::milliseconds catch_up_timeout{120'000};
};

struct membership_outcome {
  /// OK; Busy (not the leader, or another change under way: nothing was changed);
  /// InvalidArgument / NotFound (nothing was changed); TimedOut (add: the member is a
  /// standby, not yet a voter); Incomplete (leadership was lost during the change: it may or
  /// may not have committed); ShutdownInProgress.
  rocksdb::Status status;
  std::string text;  ///< what was done, for the operator
};

/// Parses "ID=HOST:PORT" items separated by commas and/or spaces. False with a one-line
/// reason on a malformed item, a zero or repeated id, or a repeated address.
bool parse_raft_members(std::string_view spec, std::vector<raft_member>* out, std::string* error);

struct raft_store_options {
  uint64_t id = 0;      ///< this replica's id (one of `members`)
  std::string address;  ///< this replica's HOST:PORT (its entry in `members`)
  /// The initial group. Used only the first time `dir` is opened (bootstrap); later the
  /// configuration is the one in the Raft log.
  std::vector<raft_member> members;
  /// Data directory: libraft's files in dir/raft (must support O_DIRECT and kernel AIO, so
  /// not tmpfs); the journal's group keeps the replica's RocksDB in dir/db.
  std::string dir;

  /// A follower that hears no leader for 1-2x this long starts an election; a leader that
  /// hears from no majority for this long steps down. 500 ms (libraft's default is 1000):
  /// the election is most of a failover (proctor-bench (k), 100,000 waiting: elected after
  /// 1.94 s and the first step at 2.37 s with 1000 ms; 0.89 s and 1.19 s with 500 ms), and
  /// ten minutes of steps through the group with a compile on both cores beside it began no
  /// election with 500 ms (docs/benchmarks.md, "A replica group's failover").
  unsigned election_timeout_ms = 500;
  unsigned heartbeat_timeout_ms = 100;
  /// Pre-vote: a candidate first asks whether it could win. Halves failover here (a follower
  /// that still trusts the old leader does not split the vote): 1.2-1.9 s instead of 2.3-3.2.
  bool pre_vote = true;
  /// libraft's open segment size. Each segment close stalls the loop thread 30-55 ms; larger
  /// segments close less often (libraft's default is 8 MiB).
  size_t segment_size = 64u << 20;
  /// A snapshot is taken every `snapshot_threshold` applied entries, after which the log
  /// keeps only the last `snapshot_trailing` entries (so a follower a little behind catches
  /// up from the log instead of a snapshot install). Entries since the last snapshot plus
  /// the trailing ones stay in memory.
  unsigned snapshot_threshold = 1024;
  unsigned snapshot_trailing = 1024;
  /// The threshold grows with the state (raft_fsm_binding::max_log_bytes): after each
  /// snapshot it becomes as many entries as hold the snapshot's bytes, at most this many
  /// bytes of them, at least `snapshot_threshold`. A snapshot serializes the whole state, so
  /// a fixed 1024 entries would cost a 100 MB state 100 MB per 1024 entries. 0: fixed.
  uint64_t snapshot_max_log_bytes = uint64_t{256} << 20;
  /// How long a leader waits for an InstallSnapshot to complete before retrying it: above a
  /// real snapshot's transfer time, but not libraft's 30 s (a rejoining follower would stall
  /// that long after every install).
  unsigned install_snapshot_timeout_ms = 5000;
  /// A fresh directory is not bootstrapped with `members`: the replica waits, a member of no
  /// group, until a leader adds it (membership_change::kind::add) and sends it a snapshot and
  /// the log. An existing directory ignores it.
  bool join = false;
  /// Forces the group to be `members` before the replica starts (libraft's raft_recover: a
  /// new configuration appended to this replica's log), for a group that lost its majority
  /// for good. Only on a directory with Raft state, while no other member runs, once, on the
  /// survivor with the longest log (docs/replication.md, "Losing a majority").
  bool recover = false;
  /// Writes queued or uncommitted at once; further writers wait for room.
  size_t max_in_flight = 64;
  /// 0: write() waits for the outcome libraft reports (committed and applied, or leadership
  /// lost: a leader that cannot reach a majority steps down within 1-2 election timeouts).
  /// Otherwise write() gives up after this long with TimedOut (the entry may still commit).
  unsigned write_timeout_ms = 0;
  /// Sync RocksDB's WAL on each apply. Off by default: the Raft log and snapshots are synced
  /// and replayed past the applied index after a crash (docs/replication.md).
  bool sync_applies = false;
  /// How logs name a member, from its label ("b2" for the node's "b2=HOST:PORT/RAFT_PORT");
  /// unset, or an answer of "": "#ID". This replica is named the same way.
  std::function<std::string(const raft_member&)> name_of;
  /// Mutual TLS on the Raft port (raft_tls_transport.hpp), with this context: the node's
  /// (make_tls_context, tls/tls_options.hpp). Every replica of the group must have
  /// one, with certificates from one CA. Null: plain TCP (raft_uv_tcp).
  std::shared_ptr<ssl_ctx_st> tls;
  /// With `tls`: the node every other member's certificate must name (a replica group: its
  /// own node's name), or "" for any node's certificate (the cluster group, whose members
  /// are nodes); a client's certificate never joins a Raft group (docs/security.md).
  std::string tls_peer_node;
  /// With `tls`: where a reload (SIGHUP) puts the node's new context; each new connection
  /// takes the current one (null: `tls` always).
  std::shared_ptr<tls_context_slot> tls_reload;
  /// With `tls`: a member dialled must carry the host dialled in its certificate
  /// (--tls-check-host, tls/tls_options.hpp).
  bool tls_check_host = false;
};

/// A member of a Raft group. Closing it (destroying it) fails pending proposals
/// (ShutdownInProgress or Incomplete), stops the loop thread and releases the state machine;
/// callbacks are not called after that.
class raft_group {
public:
  struct leader_info {
    uint64_t id = 0;  ///< 0: no leader known
    std::string address;
  };

  virtual ~raft_group() = default;

  /// Appends `entry` as one Raft entry and returns OK once a majority stored it and this
  /// member applied it (raft_state_machine::apply). The entry is padded with zero bytes to a
  /// multiple of 8 (libraft's requirement: raft_codec.hpp), and every member applies it so
  /// padded: its format must tell its own length. Not OK otherwise, and never OK for an
  /// entry that is not committed:
  ///  - Busy("not the leader; leader is ID at ADDR" / "... no leader known"): nothing was
  ///    appended;
  ///  - Incomplete("leadership lost ..."): the entry was appended but this member stopped
  ///    being leader before it committed; it may still commit under the next leader;
  ///  - TimedOut (write_timeout_ms), ShutdownInProgress (group closing), or the error that
  ///    stopped this member from applying (IOError, Corruption).
  virtual rocksdb::Status propose(std::string_view entry) = 0;

  // -- leadership and progress ------------------------------------------------------------

  /// This member's id in the group (raft_store_options::id).
  virtual uint64_t id() const = 0;

  /// True once this replica is leader and has applied every entry committed before its
  /// term (it appends a barrier when elected and waits for it): a node acting on true sees
  /// the whole state. False as soon as it steps down.
  virtual bool is_leader() const = 0;
  /// Whether this replica is sure it still leads at this moment: is_leader(), and its loop has run
  /// within half an election timeout, and, after a stall of the loop longer than that (the process
  /// frozen by SIGSTOP, a paused VM), a majority answered it in a round of heartbeats that began at
  /// least half an election timeout after the stall. A leader that is not sure runs no step
  /// (actors/base/leader_fence.hpp): a frozen leader, woken, starts nothing before it learns of the
  /// newer term. Cheap (one atomic); any thread.
  virtual bool sure_to_lead() const = 0;
  /// The leader this replica knows of (itself when leader), as of the loop's last iteration.
  virtual leader_info leader() const = 0;
  virtual uint64_t term() const = 0;
  virtual uint64_t commit_index() const = 0;
  /// The last Raft index applied here (commands, barriers and configuration changes).
  virtual uint64_t applied_index() const = 0;
  /// The index of libraft's last snapshot: the log holds no entries much older than this.
  virtual uint64_t snapshot_index() const = 0;

  /// The group as this replica last saw it (refreshed at most every 100 ms by the loop).
  struct member_status {
    uint64_t id = 0;
    std::string address;
    std::string label;  ///< raft_member::label
    enum class role_kind : uint8_t { voter, standby, spare } role = role_kind::voter;
    /// Only a leader knows these of the others (0 and false elsewhere): the highest index
    /// the member reported as stored, and whether it answered within an election timeout.
    uint64_t match_index = 0;
    bool recently_heard = false;
  };
  virtual std::vector<member_status> members() const = 0;
  /// libraft's state: "leader" (once ready), "follower", "candidate", "unavailable".
  virtual std::string role() const = 0;

  /// How long acknowledged proposals took, from propose() to committed on a majority and
  /// applied here: a histogram since the group opened (bucket upper bounds in seconds, counts not
  /// cumulative).
  struct latency_histogram {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  ///< bounds.size() + 1: the last counts what is above all
    double sum_seconds = 0;
    uint64_t count = 0;
  };
  virtual latency_histogram commit_latency() const = 0;

  /// Registers `fn`, called with true when is_leader() becomes true and with false when it
  /// becomes false. Calls run on the group's notifier thread, in order, never concurrently;
  /// `fn` may call the observers and propose(). Not called for the state at registration:
  /// register first, then read is_leader().
  virtual void on_leadership_change(std::function<void(bool leader)> fn) = 0;

  // -- membership -------------------------------------------------------------------------

  /// Changes the group's membership through Raft (one change at a time, on the leader).
  /// The future is ready once the change committed, or failed (membership_outcome). It is
  /// always made ready: at the latest when the catch-up timeout passes, leadership is lost,
  /// or the group closes.
  virtual std::future<membership_outcome> change_membership(membership_change change) = 0;
};

/// True when `data_dir` holds no Raft state (no term, no vote: libraft's metadata files are
/// absent), as in a directory never used or wiped.
bool raft_state_is_fresh(const std::string& data_dir);

/// Opens (creating) a member of a group replicating `state` in options.dir and starts it.
/// On failure returns null and sets `error` to a one-line reason (bad options, a data
/// directory on a file system libraft cannot use, a state machine that is ahead of an empty
/// Raft directory, a port in use).
std::unique_ptr<raft_group> open_raft_group(const raft_store_options& options,
                                            std::unique_ptr<raft_state_machine> state,
                                            std::string* error);

}  // namespace proctor
