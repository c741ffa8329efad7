// The RocksDB implementation of journal_store: one database per data directory, every
// record in the default column family under its journal key (keys.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <rocksdb/db.h>

#include "persistence/journal_store.hpp"

namespace proctor {

/// The RocksDB options of the journal's database (proctor-bench's raw phase uses them too,
/// so that it measures the same database with nothing on top).
rocksdb::Options journal_db_options();

class rocksdb_store : public journal_store {
public:
  /// Takes ownership of an open database. Use open_rocksdb_store() to get one.
  explicit rocksdb_store(std::unique_ptr<rocksdb::DB> db);

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

private:
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace proctor
