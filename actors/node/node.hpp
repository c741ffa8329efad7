// A node: the journal, scheduler and executor actors over one data directory, recovered
// from the journal when it starts. proctord, the in-process tests and the benchmark all
// run a node through this class.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include <proctor/registry.hpp>

#include "actors/base/node_env.hpp"
#include "actors/executor/executor.hpp"
#include "persistence/active_lock.hpp"
#include "persistence/journal.hpp"

namespace proctor {

struct node_options {
  std::string data_dir;
  /// The --auth-policy in force, shared with the caller, which replaces it on SIGHUP (null:
  /// none).
  std::shared_ptr<auth_policy_slot> auth_policy;
  /// `proctor tls reload` (node_env::reload_security; null: refused, nothing to reload).
  std::function<bool(std::string* text)> reload_security;
  /// Counts the requests refused at every door of the process (proctor_refused_requests_total;
  /// null: the node's own).
  std::shared_ptr<std::atomic<uint64_t>> refused_requests;
  size_t workers = 8;  ///< run slots: steps running at once
  executor_config executor;
  std::chrono::milliseconds stuck_after{std::chrono::seconds{30}};
  /// Called on a journal write error instead of terminating the process (tests).
  std::function<void(const std::string&)> on_journal_fatal;
  /// Called when a system actor (executor, scheduler, journal) dies unexpectedly, instead of
  /// terminating the process (tests). Their state is derived from the journal, so the only
  /// safe restart is the whole node's: fail-stop, and recovery carries everything on.
  std::function<void(const std::string&)> on_system_failure;
  /// See node_env::on_procedure_start.
  std::function<void(uint64_t id)> on_procedure_start;
  /// Services by name (see node_env::services).
  std::map<std::string, caf::actor> services;
  /// Replaces the RocksDB store (tests inject faults through it).
  std::shared_ptr<journal_store> store;
  /// The data directory's lock, when the caller took it (a standby that waited for it);
  /// otherwise start() takes it, failing if another process holds it. Unused with `store`.
  std::shared_ptr<active_lock> lock;
  /// With `store`: the incarnation to report (a replica's Raft term); otherwise the lock's.
  uint64_t epoch = 0;
  /// Recovery hands the executor the trees it read back in parts of at least this many
  /// procedures (a tree is never split), while it reads the next ones. Tests set 1: every
  /// tree a part of its own, the most interleaving of the take-over with the scan.
  size_t recovery_part_procs = 4096;

  // -- across nodes (docs/cluster.md) ---------------------------------------------------
  /// This node's name and number (ids it hands out carry the number in their high bits:
  /// id_node_shift); "" and 0 for a node on its own.
  std::string name;
  uint16_t number = 0;
  /// The other nodes' names.
  std::vector<std::string> peer_names;
  /// Carries requests to other nodes ((peer_request_atom, name, bytes, timeout_ms) ->
  /// bytes, actors/cluster/outbox.hpp); tests route between in-process nodes with it.
  caf::actor transport;
  /// How long a delivery to another node may take before it is tried again.
  std::chrono::milliseconds peer_reply_timeout{10'000};
  /// Its peers answer heartbeats over links (proctord): a new journal hands out no id before
  /// each of them said where this name's earlier incarnations ended (docs/cluster.md,
  /// "Procedure ids"). Off for in-process test nodes, whose transport has no links.
  bool ids_from_peers = false;
  /// The cluster group's id floor for this name (a node joining with --seeds: the seed's
  /// word): a new journal's ids begin `fresh_id_gap` above it (persistence/id_floor.hpp).
  uint64_t id_floor = 0;
  /// Asked for that floor when the journal is new and id_floor is 0 (a node run as replicas
  /// that follows the cluster group asks its seeds then only): false with a one-line reason
  /// stops the start before anything is journaled.
  std::function<bool(uint64_t* id_floor, std::string* error)> ask_id_floor;
  /// Serves `proctor cluster ...` (node_env::cluster_member); unset without a cluster group.
  caf::actor cluster_member;
};

/// What recovery found, for logs and the benchmark.
struct recovery_report {
  size_t trees = 0;
  size_t procedures = 0;
  size_t records = 0;
  size_t quarantined = 0;
  double open_seconds = 0;  ///< opening the store (RocksDB replays its WAL here)
  double scan_seconds = 0;  ///< reading and folding the journal
  double seconds = 0;       ///< all of node::start, actors spawned
};

/// Settings a node's actor system should run with: quiet CAF logging, and the "sharing"
/// scheduler. CAF 0.17's work-stealing queues remove from the tail by walking the whole
/// queue, so when one actor spawns many (recovery starts every tree at once, a wide tree
/// spawns its children) every steal costs O(queue length); a shared FIFO queue does not,
/// and its workers sleep instead of spinning on an idle 2-core machine. One worker per core
/// (at least two): with glibc's malloc two spare workers gained 15-20 % on durable steps/s,
/// but with jemalloc they only add futex sleeps and wake-ups (node.cpp has the figures).
void tune_actor_system(caf::actor_system_config& cfg);

class node {
public:
  node(caf::actor_system& sys, const registry& types);
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Opens the data directory, folds the journal and starts the actors. A one-line error on
  /// failure (directory locked by another process, not writable, damaged beyond reading).
  caf::expected<recovery_report> start(node_options opts);

  /// Serves the client protocol (proto/WIRE.md) on host:port (port 0 = any); returns the
  /// port. Needs CAF's middleman loaded in the actor system.
  caf::expected<uint16_t> serve_clients(const std::string& host, uint16_t port);

  /// Stops every actor of the node (graceful: nothing half-written is acknowledged).
  void stop();

  caf::actor executor() const { return executor_; }
  caf::actor journal() const { return env_ ? env_->journal : caf::actor{}; }
  caf::actor scheduler() const { return env_ ? env_->scheduler : caf::actor{}; }
  caf::actor timeout() const { return env_ ? env_->timeout : caf::actor{}; }
  caf::actor outbox() const { return outbox_; }
  /// What the node's actors share (null before start): its name, number, incarnation, ids.
  std::shared_ptr<const node_env> env() const { return env_; }

  /// Records how long this process's takeover took (`proctor nodes`, metrics).
  void note_takeover(std::chrono::milliseconds took);

private:
  caf::actor_system& sys_;
  const registry& types_;
  std::shared_ptr<node_env> env_;
  caf::actor executor_;
  caf::actor supervisor_;     ///< the node supervisor: watches the system actors
  caf::actor client_server_;  ///< the client protocol's broker (serve_clients)
  caf::actor outbox_;
  size_t max_args_bytes_ = 0;
  bool audit_submits_ = false;  ///< its door says who sent submits too (--audit-submits)
};

}  // namespace proctor
