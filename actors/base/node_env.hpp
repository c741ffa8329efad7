// What every actor of a node shares: the system actors' handles and the type registry.
// Built once at start-up, before the first procedure actor; read-only afterwards.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <caf/all.hpp>

#include <proctor/registry.hpp>

#include "actors/base/auth_policy.hpp"
#include "actors/base/cluster_view.hpp"

namespace proctor {

class journal_store;  // persistence/journal_store.hpp

/// A service's protocol: (service_call_atom, std::string call_id, std::string request)
/// -> std::string reply (or an error). The same call id may arrive more than once.
using service_call_atom = caf::atom_constant<caf::atom("svccall")>;

/// Ids handed out by node number n are (n << id_node_shift) + 1, + 2, ...: unique in the
/// cluster, below 2^53 (exact in JSON numbers) for the 12-bit node numbers.
constexpr int id_node_shift = 40;
inline uint16_t owner_of(uint64_t id) {
  return static_cast<uint16_t>(id >> id_node_shift);
}

struct node_env {
  caf::actor journal;
  /// What the journal writes to: for an online backup only (`proctor backup`), which a
  /// store checkpoints while the journal goes on writing. Weak: the node owns the store, and
  /// closing it (its directory's lock released) must not wait for the last holder of env.
  std::weak_ptr<journal_store> store;
  caf::actor scheduler;
  caf::actor executor;
  /// Keeps every deadline of the node (timeout_actor.hpp).
  caf::actor timeout;
  const registry* types = nullptr;
  /// The next procedure id to hand out (shared with the journal, which persists its floor).
  std::shared_ptr<std::atomic<uint64_t>> next_id;
  /// The journal's last durable LSN (set by the journal after each synced write), and what it
  /// was when the node started (read back from the journal).
  std::shared_ptr<std::atomic<uint64_t>> durable_lsn = std::make_shared<std::atomic<uint64_t>>(0);
  /// Set for good once a lock is held on this node (by the scheduler, which holds them, and
  /// by the executor before it has the scheduler restore a recovered tree's): while false, a
  /// tree that ends sends the scheduler no unlock_tree_atom, which would find nothing to
  /// release. Read with acquire: a tree's lock was taken before its end, which the message
  /// chain from the scheduler's grant (or the executor's restore) to the end orders after the
  /// store. (b) of proctor-bench: one message of 18 per procedure, to another actor.
  std::shared_ptr<std::atomic<bool>> locks_taken = std::make_shared<std::atomic<bool>>(false);
  uint64_t recovered_lsn = 0;
  /// The journal was created by this start (its incarnation drawn now), and peers answer
  /// heartbeats (node_options::ids_from_peers): before it hands out an id, the node learns
  /// from them where the ids of its name's earlier incarnations ended (docs/cluster.md,
  /// "Procedure ids").
  bool new_journal = false;
  /// A step running longer than this is reported as stuck.
  std::chrono::milliseconds stuck_after{std::chrono::seconds{30}};
  /// A state machine that commits the same state this many times in a row is flagged.
  int no_progress_limit = 1000;
  /// See executor_config::passivate_after.
  std::chrono::milliseconds passivate_after{std::chrono::seconds{1}};
  /// Observability hook for tests: called (on an actor thread) whenever a procedure's actor
  /// starts, including restarts by a supervisor and recovery. May be empty.
  std::function<void(uint64_t id)> on_procedure_start;
  /// Every registered type, true while limits are in force for it (type_limits, the
  /// code's or an operator's): its steps then always ask the scheduler, never take the
  /// direct path of a nonblocking step. Filled before the first procedure actor; the
  /// executor flips a flag when an operator changes the type's limits.
  mutable std::map<std::string, std::atomic<bool>, std::less<>> limited_types;
  bool limited(std::string_view type) const {
    auto i = limited_types.find(type);
    return i != limited_types.end() && i->second.load(std::memory_order_relaxed);
  }
  /// Services procedures of this node may call by name (outcome::call), and that other
  /// nodes may call through the executor: (service_call_atom, call_id, request) -> reply.
  std::map<std::string, caf::actor> services;

  // -- across nodes (docs/cluster.md) ---------------------------------------------------
  /// This node's name ("" when started without --name: then no child is placed elsewhere);
  /// the nodes it knows, with their numbers, are in `cluster` (cluster_view: they grow as
  /// nodes join).
  std::string node_name;
  /// Delivers the messages to other nodes that must not be lost (actors/cluster/outbox.hpp).
  caf::actor outbox;
  /// This node's number (node.hpp: owner_of), and what carries a request to a peer
  /// (outbox.hpp: peer_request_atom); a query for an id another node handed out goes there
  /// (the peers by number: cluster->peer_of_number).
  uint16_t node_number = 0;
  caf::actor transport;
  /// Serves `proctor cluster ...` and joining nodes from the node's member of the cluster
  /// group (actors/node/cluster_member.hpp): (rpc_atom, bytes of a pb::Request) -> bytes of a
  /// pb::Response. Unset: the node takes no part in a cluster group.
  caf::actor cluster_member;
  /// Each peer's status as its link last reported it, and this node's load (written by the
  /// executor, read by procedure actors).
  std::shared_ptr<cluster_view> cluster = std::make_shared<cluster_view>();
  /// When this node started (wall clock, ms): its NodeInfo for peers and `proctor nodes`.
  int64_t started_at_ms = 0;
  /// This node's incarnation (journal.proto NodeIncarnation), set by the recovery.
  uint64_t incarnation = 0;
  /// The data directory's epoch this process holds (active_lock.hpp; 0 without a lock) and
  /// how long its takeover took when it was a standby (set once it serves; 0 otherwise).
  uint64_t epoch = 0;
  std::atomic<int64_t> takeover_ms{0};
  /// Passivation attempts of this node's trees (proc_passivate_tree.cpp; a metric).
  mutable std::atomic<uint64_t> passivation_attempts{0};
  /// Procedures held passivated by a live parent, without an actor (proc_passivated_children.cpp; a
  /// gauge).
  mutable std::atomic<int64_t> passivated_procedures{0};
  /// Wake-ups of passivated children queued by their parent (max_live_children; a metric).
  mutable std::atomic<uint64_t> queued_wakes{0};
  /// A tree whose journal holds this many records is compacted into one record (0: never;
  /// a root's type's compact_after overrides it; actors/procedure/tree_compaction.cpp).
  uint64_t compact_after = 0;
  /// Compactions of trees' journals, and the records they replaced (metrics).
  mutable std::atomic<uint64_t> compactions{0};
  /// The --auth-policy in force (actors/base/auth_policy.hpp), read by the client door.
  std::shared_ptr<auth_policy_slot> policy = std::make_shared<auth_policy_slot>();
  /// `proctor tls reload`: what SIGHUP does (actors/node/node_security.hpp): true and what
  /// was read again in `*text`, or false and why not (null: a node run without run_node, as
  /// in tests). Safe from any thread.
  std::function<bool(std::string* text)> reload_security;
  /// Requests the authoriser refused at the client door (actors/base/authoriser.hpp).
  std::shared_ptr<std::atomic<uint64_t>> refused_requests =
    std::make_shared<std::atomic<uint64_t>>(0);
  mutable std::atomic<uint64_t> compacted_records{0};
  /// Children cancelled by their parent's join policy, and children's failures a join policy
  /// contained (actors/procedure/proc_cancel.cpp; metrics).
  mutable std::atomic<uint64_t> cancelled_children{0};
  mutable std::atomic<uint64_t> contained_failures{0};

  /// True when `name` is another node this node knows.
  bool is_peer(const std::string& name) const { return cluster->is_peer(name); }
};

using env_ptr = std::shared_ptr<const node_env>;

}  // namespace proctor
