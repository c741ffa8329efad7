// The RocksDB implementation of journal_store: one database per data directory, every
// record in the default column family under its journal key (keys.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "persistence/journal_store.hpp"

namespace proctor {

/// The RocksDB options of the journal's database (proctor-bench's raw phase uses them too,
/// so that it measures the same database with nothing on top).
rocksdb::Options journal_db_options();

/// Adds `ops` to `batch` exactly as rocksdb_store::write() would write them (the journal's
/// records, in the default column family). The replicated store (raft_store) applies the
/// same ops with this, plus its own bookkeeping, in one batch.
rocksdb::Status add_journal_ops(const std::vector<store_op>& ops, rocksdb::WriteBatch* batch);

class rocksdb_store : public journal_store {
public:
  /// Takes ownership of an open database and of the handles of its column families other
  /// than the default one (`extra`, in the order they were asked for). Use
  /// open_rocksdb_store() or open_rocksdb_store_with() to get one.
  explicit rocksdb_store(std::unique_ptr<rocksdb::DB> db,
                         std::vector<rocksdb::ColumnFamilyHandle*> extra = {});

  /// Closes the database (releasing its directory lock).
  ~rocksdb_store() override;

  rocksdb_store(const rocksdb_store&) = delete;
  rocksdb_store& operator=(const rocksdb_store&) = delete;

  // -- journal_store --------------------------------------------------------------------

  /// One WriteBatch, written with sync = true.
  rocksdb::Status write(const std::vector<store_op>& ops) override;

  /// Reads with checksum verification and large readahead, bypassing the block cache, on a
  /// thread of its own; `fn` runs on the caller's thread.
  rocksdb::Status scan(const std::function<bool(const stored_record&)>& fn) override;

  rocksdb::Status read_tree(uint64_t root_id, std::vector<stored_record>* out) override;

  /// A RocksDB checkpoint (write_backup).
  rocksdb::Status backup(const std::string& dir, const backup_info& info) override;

  // -- for stores layered on this one (raft_store) -----------------------------------------

  rocksdb::DB* db() const { return db_.get(); }

  /// The i-th column family asked for with open_rocksdb_store_with().
  rocksdb::ColumnFamilyHandle* extra_family(size_t i) const { return extra_.at(i); }

  /// Writes a batch built with add_journal_ops() (and whatever the caller added).
  rocksdb::Status write_batch(rocksdb::WriteBatch* batch, bool sync);

private:
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> extra_;  // owned: destroyed before closing db_
};

/// As open_rocksdb_store(), with further column families beside the journal's default one,
/// created if missing (plain RocksDB options: they are meant for a few bookkeeping keys).
/// A database that has such families can only be opened this way, naming all of them.
std::unique_ptr<rocksdb_store> open_rocksdb_store_with(const std::string& dir,
                                                       const std::vector<std::string>& families,
                                                       std::string* error);

}  // namespace proctor
