// A journal_store replicated by Raft: a raft_group (raft_group.hpp) whose state machine is
// the journal's (journal_replica_db.hpp). Every write is one Raft log entry, acknowledged once
// a majority of the replicas has it on disk and this replica has applied it to its own
// RocksDB; scans and tree reads see what this replica applied. docs/replication.md describes
// the design, its guarantees and what is left to integrate into the node.
//
// Threading: as raft_group's; write() may be called from any thread, concurrently; scan() and
// read_tree() read the local RocksDB on the caller's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "persistence/journal_store.hpp"
#include "replication/raft_group.hpp"

namespace proctor {

class raft_store : public journal_store, public raft_group {
public:
  /// Closes the replica (raft_group) and its database.
  ~raft_store() override = default;

  /// The ops as one Raft entry (raft_group::propose, with its outcomes).
  rocksdb::Status write(const std::vector<store_op>& ops) override = 0;
};

/// Opens (creating) the replica in options.dir (its database in dir/db) and starts it. On
/// failure returns null and sets `error` to a one-line reason (bad options, a data directory
/// on a file system libraft cannot use, a database that is ahead of an empty Raft directory,
/// a port in use).
std::unique_ptr<raft_store> open_raft_store(const raft_store_options& options, std::string* error);

}  // namespace proctor
