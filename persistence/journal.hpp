// The journal actor: the node's only RocksDB writer. Appends that arrive while a write is in
// flight are collected into the next WriteBatch (group commit); a batch is written with
// sync = true and only then is every append in it acknowledged. It runs detached (its own
// thread), so blocking I/O never stalls CAF's cooperative workers.
//
// Messages:
//   (append_atom, journal_batch)      -> uint64_t  last LSN assigned, once durable
//   (append_atom, journal_batch, uint64_t tag)  sent, not requested: once durable, the
//       sender receives (appended_atom, tag, last LSN), a sender's appends in the order sent.
//       For actors with many appends in flight (CAF 0.17 keeps an actor's pending requests in
//       a flat map searched linearly) and for procedure actors (no response handler per step).
//   (read_tree_atom, uint64_t root)   -> journal_records  every record of the tree, ascending
//   (journal_stats_atom)              -> journal_stats
// A write error makes the node fail-stop: the `fatal` callback runs and no waiting append is
// ever acknowledged.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "persistence/journal_store.hpp"

namespace proctor::pb {
class JournalRecord;
}

namespace proctor {

using append_atom = caf::atom_constant<caf::atom("append")>;
using read_tree_atom = caf::atom_constant<caf::atom("readtree")>;
using journal_stats_atom = caf::atom_constant<caf::atom("jstats")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using appended_atom = caf::atom_constant<caf::atom("appended")>;

/// A record to append; the journal assigns its LSN.
struct journal_entry {
  uint64_t root_id = 0;
  std::string record;  ///< a serialized pb::JournalRecord
  /// Nonzero: written at this LSN of its tree, replacing the record there, and assigned no
  /// LSN of its own (a tree's compaction: persistence/tree_snapshot.hpp).
  uint64_t at_lsn = 0;
};

/// `rec` with its format set, serialized as an entry of tree `root_id`'s journal.
journal_entry make_entry(uint64_t root_id, pb::JournalRecord& rec);

/// One append: written atomically (all or nothing), in this order: the range deletes,
/// then the entries. A delete of tree r removes (r, from_lsn) <= key < (r, before_lsn), where
/// before_lsn = 0 means "every record of r written so far".
struct journal_batch {
  std::vector<journal_entry> entries;
  struct range_delete {
    uint64_t root_id = 0;
    uint64_t from_lsn = 0;    ///< first LSN deleted
    uint64_t before_lsn = 0;  ///< 0: up to this batch's first entry; UINT64_MAX: whole tree
    /// Nonzero: the whole trees root_id..last_root_id (from_lsn and before_lsn unused).
    uint64_t last_root_id = 0;
  };
  std::vector<range_delete> deletes;
};

using journal_records = std::vector<stored_record>;

/// A synced write slower than this is counted in journal_stats::slow_writes: every append in
/// it, and every append behind it, waited at least that long.
constexpr uint64_t slow_write_us = 10'000;

/// Upper bounds (microseconds) of the buckets journal_stats::sync_buckets counts synced
/// writes in (proctor_journal_sync_seconds); one bucket more counts the slower ones.
constexpr std::array<uint64_t, 12> sync_bucket_us{
  100, 250, 500, 1'000, 2'500, 5'000, 10'000, 25'000, 50'000, 100'000, 250'000, 1'000'000};

struct journal_stats {
  uint64_t batches = 0;          ///< WriteBatches written
  uint64_t records = 0;          ///< records appended
  uint64_t range_deletes = 0;    ///< range deletes written (each a RocksDB range tombstone)
  uint64_t last_batch_size = 0;  ///< appends in the last batch
  uint64_t fsync_us_total = 0;   ///< time spent in synced writes, microseconds
  uint64_t fsync_us_last = 0;
  uint64_t fsync_us_max = 0;  ///< the slowest synced write so far
  uint64_t slow_writes = 0;   ///< synced writes that took longer than slow_write_us
  /// Synced writes by duration: [i] those over sync_bucket_us[i-1] and at most
  /// sync_bucket_us[i]; the last, those over sync_bucket_us.back() (not cumulative).
  std::array<uint64_t, sync_bucket_us.size() + 1> sync_buckets{};
  uint64_t next_lsn = 0;
};

struct journal_config {
  std::shared_ptr<journal_store> store;
  uint64_t next_lsn = 1;  ///< first LSN to assign (recovery: max LSN seen + 1)
  /// Ids below this value have been handed out; written with every delete so that a
  /// deleted tree's ids are never reused after a restart. May be null.
  std::shared_ptr<std::atomic<uint64_t>> next_id;
  /// Set to the last LSN durable after every synced write (heartbeat answers tell peers; a
  /// copy of the journal restored later reads back lower). May be null.
  std::shared_ptr<std::atomic<uint64_t>> durable_lsn;
  /// Called once on a write error, before the journal stops acknowledging. The default
  /// (empty) logs and terminates the process (fail-stop).
  std::function<void(const std::string&)> fatal;
};

/// Spawns the journal actor (detached).
caf::actor spawn_journal(caf::actor_system& sys, journal_config cfg);

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::journal_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::journal_records)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::journal_stats)
