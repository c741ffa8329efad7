// What a data directory holds, and a restore from a backup into it (docs/operations.md,
// "Backups"). A plain node keeps its journal's RocksDB in the data directory itself; a
// replica keeps it in DATA/db beside its Raft state (DATA/raft) and its REPLICA file. A
// directory of one kind started as the other would start on an empty journal and leave the
// real one unread: both are refused, saying what the directory holds. A backup is restored
// into a plain node's directory, or by a replica founding a group of one: through its
// replicated store once it leads, so that the records are entries of the Raft log and every
// replica added afterwards receives them (a copy beside the log would reach only replicas
// that catch up by snapshot).
#pragma once

#include <string>

#include "actors/node/node_flags.hpp"
#include "persistence/journal_backup.hpp"

namespace proctor {

class journal_store;

/// Why `data_dir` cannot be started as a replica (`replica`) or as a plain node (not), or ""
/// when it can (an empty or new directory can be either).
std::string data_dir_mismatch(const std::string& data_dir, bool replica);

/// A plain node: restores f.restore_from into f.data_dir, logging what was restored. Does
/// nothing, saying so, when the directory was restored from that backup before. False, with
/// the reason in *error, when refused or failed.
bool restore_node_journal(const node_flags& f, std::string* error);

/// A replica's restore, in two steps around its election.
struct replica_restore {
  bool needed = false;  ///< false: no --restore-from, or restored from it before
  restore_report plan;
};

/// Before the replica opens: checks the backup and the data directory (no Raft state, unless
/// it was restored from this backup before, then nothing is to be done). False with the
/// reason, nothing written.
bool plan_replica_restore(const node_flags& f, replica_restore* out, std::string* error);

/// Once the replica leads its group of one, before the node starts on `store`: writes the
/// planned backup through it and marks the data directory restored. False with the reason.
bool finish_replica_restore(const node_flags& f, const replica_restore& r, journal_store& store,
                            std::string* error);

}  // namespace proctor
