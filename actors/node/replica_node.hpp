// A node run as one replica of a group (proctord --replica NAME --replicas ...;
// docs/replication.md). The replica's journal is a raft_store in its data directory; its
// --listen address is served from the start by a front (replica_front.hpp) that refuses
// every request, naming the leader, until this replica leads. Then the caller starts the node
// over the store (the ordinary recovery, from this replica's RocksDB, which holds every
// committed entry by then) and hands the front its executor.
//
// Only a leader acts. The moment this replica stops leading (libraft's leader steps down when
// it has not heard from a majority for an election timeout, or a newer term appears), or its
// journal fails a write, the process re-executes itself with the same arguments: no step,
// timer or outbox delivery of the old term survives it, nothing it had not committed was
// acknowledged, and it comes back as a follower (its Raft log and RocksDB are on disk, as
// after a crash), with --replicas set to the group's membership at that moment.
//
// Membership (`proctor replicas add` / `remove`, on the leader) changes through Raft; each
// member of the configuration is labelled with its name and addresses, so every replica
// learns a new one with the change. A replica whose --replicas disagrees with the
// configuration in its data directory is refused at its start, as is a data directory that
// belongs to another replica (the file REPLICA beside NODE).
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/base/auth_policy.hpp"
#include "actors/node/replica_front.hpp"
#include "actors/node/replica_group.hpp"
#include "actors/node/replica_identity.hpp"
#include "replication/raft_store.hpp"

namespace proctor {

struct replica_setup {
  std::string replica;  ///< this replica's name in `group`
  std::vector<replica_member> group;
  std::string node_name;  ///< the node the group is (--name)
  std::string data_dir;   ///< dir/raft: libraft's files, dir/db: the replica's RocksDB
  size_t max_frame_bytes = size_t{2} << 20;
  std::shared_ptr<auth_policy_slot> auth_policy;  ///< the --auth-policy in force (null: none)
  bool audit_submits = false;  ///< its door says who sent submits too (--audit-submits)
  /// Counts the requests its door refuses (null: its own count, not exported).
  std::shared_ptr<std::atomic<uint64_t>> refused_requests;
  /// This process's command line, to re-execute it with (null-terminated, as main's argv).
  char** argv = nullptr;
  unsigned election_timeout_ms = raft_store_options{}.election_timeout_ms;
  /// An empty data directory joins the existing group (proctord --join) instead of founding
  /// it with `group`.
  bool join = false;
  /// proctord --recover-group: the group lost its majority for good; force it to be `group`
  /// (members of the logged group only) before this replica starts (raft_store_options::
  /// recover). Refused on a fresh directory, with --join, or while the group has a leader.
  bool recover = false;
  /// The node's TLS (docs/tls.md): how this replica asks the others which data directory
  /// they know it by (replica_identity.hpp).
  tls_options tls;
  /// Where a reload (SIGHUP) puts the node's new TLS context for the Raft port (null: none).
  std::shared_ptr<tls_context_slot> tls_reload;
  /// Its --http address as clients reach it ("" without --http): recorded in the group, so
  /// that the followers' HTTP API names the leader's (docs/http-api.md).
  std::string http_address;
};

class replica_node {
public:
  /// Opens the replica's store and serves its --listen address with the refusing front.
  /// Null and `error` set when it cannot (options, the data directory, a port in use).
  static std::unique_ptr<replica_node> open(caf::actor_system& sys, replica_setup setup,
                                            std::string* error);
  ~replica_node();

  /// Waits until this replica leads (true) or one of `sigs` but SIGHUP is pending (false).
  /// A SIGHUP meanwhile runs `on_hangup` (the reload of the TLS files and the policy: a
  /// follower keeps its Raft port and its door) and the wait goes on. Wakes every 100 ms.
  bool wait_to_lead(const sigset_t& sigs, const std::function<void()>& on_hangup);

  /// The replicated journal, for node_options::store.
  std::shared_ptr<raft_store> store() const { return store_; }
  const replica_member& self() const { return *self_; }
  uint16_t port() const { return port_; }
  /// What clients reach (the web console and /metrics ask through it too).
  caf::actor front() const { return front_; }

  /// From now on the front hands every request to `executor`; losing leadership
  /// re-executes the process. Re-executes at once if leadership was lost meanwhile.
  void lead(caf::actor executor);

  /// The process is shutting down: losing leadership or a failed write no longer
  /// re-executes it.
  void retire() { retired_ = true; }
  bool retired() const { return retired_.load(); }

  /// Re-executes the process (see above), logging `why` first.
  [[noreturn]] void step_down(const std::string& why);

  /// The group as its Raft configuration (the log) has it: every member labelled with its
  /// name and addresses (replica_spec). --replicas until this replica knows a configuration.
  std::vector<replica_member> group() const;

  /// Where peers reach the node: every replica's client address, this one's first
  /// ("HOST:PORT|HOST:PORT", as a --peers entry; its ClusterMember.peer_address).
  std::string peer_addresses() const;

private:
  replica_node() = default;
  not_leader_answer why_not() const;
  pb::ReplicasInfo replicas() const;
  std::string metrics_text() const;
  /// `replicas add` / `remove` on the leader: blocks until the store ended the change.
  pb::Response change(const pb::ReplicasRequest& request);
  /// True with `out` set when every member of the configuration carries a label.
  bool labelled_group(std::vector<replica_member>* out) const;

  caf::actor_system* sys_ = nullptr;
  replica_setup setup_;
  const replica_member* self_ = nullptr;
  std::shared_ptr<raft_store> store_;
  caf::actor front_;
  caf::actor server_;
  uint16_t port_ = 0;
  std::atomic<bool> leading_{false};
  std::atomic<bool> retired_{false};
  /// This replica's data directory's id (REPLICA), and, once it leads, the recorder of each
  /// member's (replica_identity.hpp).
  std::string dir_id_;
  std::unique_ptr<dir_recorder> recorder_;
};

/// Replaces this process's image with a fresh run of the same program and `argv` (every
/// descriptor closed on the way, so locks and ports are free for it). Exits with code 75 if
/// the exec fails.
[[noreturn]] void reexec_self(char** argv);

}  // namespace proctor
