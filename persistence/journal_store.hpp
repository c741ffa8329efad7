// The journal's storage, behind an interface so tests can inject I/O errors and crashes.
// A node uses RocksDB (rocksdb_store.hpp), or, run as a replica group, RocksDB replicated
// across the group by Raft (raft_store.hpp, docs/replication.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <rocksdb/status.h>

namespace proctor {

struct backup_info;  // journal_backup.hpp

/// One write of a batch.
struct store_op {
  enum class kind : uint8_t {
    put,           ///< key (root_id, lsn) := value
    delete_range,  ///< delete keys (root_id, from_lsn) <= k < (root_id, lsn);
                   ///< lsn = UINT64_MAX: to the end of the tree; empty if from_lsn >= lsn
    delete_trees,  ///< delete the whole trees root_id..last_root_id (one range tombstone)
  };
  kind what = kind::put;
  uint64_t root_id = 0;
  uint64_t lsn = 0;
  std::string value;
  uint64_t from_lsn = 0;      ///< delete_range only: first LSN deleted
  uint64_t last_root_id = 0;  ///< delete_trees only: the last tree deleted
};

/// A record as stored.
struct stored_record {
  uint64_t root_id = 0;
  uint64_t lsn = 0;
  std::string value;
};

class journal_store {
public:
  virtual ~journal_store() = default;

  /// Applies `ops` atomically, in order, and durably (fsync'd) before returning OK.
  virtual rocksdb::Status write(const std::vector<store_op>& ops) = 0;

  /// Visits every record in key order (root_id, then lsn). `fn` returns false to stop.
  /// Records whose key is malformed are reported as a Corruption status after the scan.
  virtual rocksdb::Status scan(const std::function<bool(const stored_record&)>& fn) = 0;

  /// Every record of one tree, ascending LSN.
  virtual rocksdb::Status read_tree(uint64_t root_id, std::vector<stored_record>* out) = 0;

  /// An online backup into `dir` (journal_backup.hpp: a checkpoint and the BACKUP file
  /// holding `info`), consistent with every write acknowledged before it was asked for.
  virtual rocksdb::Status backup(const std::string& dir, const backup_info& info) {
    (void)dir;
    (void)info;
    return rocksdb::Status::NotSupported("this journal cannot be backed up online");
  }
};

/// A store that passes every call on to another: the base of a store that watches or
/// changes some calls and leaves the others alone (as RocksDB's EnvWrapper is for an Env).
/// The tests' stores that record what is written or crash at one record derive from it.
class forwarding_store : public journal_store {
public:
  explicit forwarding_store(std::shared_ptr<journal_store> inner) : inner_(std::move(inner)) {}

  rocksdb::Status write(const std::vector<store_op>& ops) override { return inner_->write(ops); }
  rocksdb::Status scan(const std::function<bool(const stored_record&)>& fn) override {
    return inner_->scan(fn);
  }
  rocksdb::Status read_tree(uint64_t root_id, std::vector<stored_record>* out) override {
    return inner_->read_tree(root_id, out);
  }
  rocksdb::Status backup(const std::string& dir, const backup_info& info) override {
    return inner_->backup(dir, info);
  }

private:
  std::shared_ptr<journal_store> inner_;
};

/// Opens (creating if missing) the RocksDB journal under `dir`. Fails with a one-line
/// reason if the directory is not writable or another process holds its lock.
std::unique_ptr<journal_store> open_rocksdb_store(const std::string& dir, std::string* error);

}  // namespace proctor
