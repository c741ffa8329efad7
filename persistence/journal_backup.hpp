// Online backups of a node's journal and restores from them (docs/operations.md, "Backups").
//
// A backup is a RocksDB checkpoint of the journal's database (hard links where it can, copies
// otherwise: consistent at one sequence number, taken while the node runs), beside a BACKUP
// file naming the node, its incarnation and its high-water marks when it was taken. A restore
// copies the checkpoint's journal records into an empty data directory as a *new incarnation*:
// the old one's NodeIncarnation record is left behind, and the id floor is raised past every
// id the old incarnation can have handed out after the backup (restore_id_gap), so no id is
// handed out twice and no peer mistakes the copy for the node it was taken from.
#pragma once

#include <cstdint>
#include <string>

#include <rocksdb/status.h>

namespace rocksdb {
class DB;
}

namespace proctor {

class journal_store;

/// What a BACKUP file says.
struct backup_info {
  std::string node;          ///< the node's name (empty: an unnamed single node)
  uint64_t incarnation = 0;  ///< the incarnation the journal belonged to
  uint64_t lsn = 0;          ///< every record up to this LSN is in the checkpoint
  uint64_t next_id = 0;      ///< ids below it had been handed out when it was taken
  int64_t taken_at_ms = 0;
};

/// The BACKUP file's name inside a backup directory, and the checkpoint's subdirectory.
inline constexpr const char* backup_info_file = "BACKUP";
inline constexpr const char* backup_db_dir = "journal";

/// How far a restore raises the id floor past the highest id in the backup: room for the ids
/// the old incarnation may have handed out after the backup was taken (2^34, some 17 billion:
/// two days at 100,000 procedures a second), 64 restores within a node's 2^40 ids. With peers,
/// the new incarnation also learns a floor from what they saw (docs/cluster.md, "Procedure ids").
inline constexpr uint64_t restore_id_gap = uint64_t{1} << 34;

/// Checkpoints `db` into `dir`/journal and writes `dir`/BACKUP from `info`. `dir` must not
/// exist (its parent must); on failure nothing is left under it.
rocksdb::Status write_backup(rocksdb::DB* db, const std::string& dir, const backup_info& info);

/// Reads `dir`/BACKUP. False, with a one-line reason, if it is missing or malformed.
bool read_backup_info(const std::string& dir, backup_info* out, std::string* error);

struct restore_report {
  backup_info from;
  uint64_t records = 0;   ///< journal records copied
  uint64_t trees = 0;     ///< trees among them
  uint64_t next_id = 0;   ///< the id floor the restored journal starts from
  uint64_t next_lsn = 0;  ///< the LSN it continues from
  /// The data directory was restored from this very backup before (its RESTORED file says
  /// so): nothing was done, the node starts on it as it is.
  bool already = false;
};

/// The file a restore leaves in the data directory once the copy is whole: the BACKUP file
/// of the backup it came from.
inline constexpr const char* restored_marker_file = "RESTORED";

/// Copies the backup in `backup_dir` into `data_dir`'s journal (created; it must hold no journal
/// yet, or was restored from this backup: out->already) as a new incarnation of the node named
/// `node` (a backup of another node is refused). Refuses, writing nothing, a backup holding a tree
/// not ended whose parts span nodes: its parts elsewhere were resolved when the peers forgot the
/// old incarnation, so restoring it here would run half a tree (named in the error). False with the
/// reason. (plan_restore, copy_restore, then the marker.)
bool restore_backup(const std::string& backup_dir, const std::string& data_dir,
                    const std::string& node, restore_report* out, std::string* error);

// -- a restore in two halves, for a journal that is not a plain directory (a replica's store,
//    written through Raft so that every replica added later receives it) ---------------------

/// Whether `marker_dir`'s RESTORED file says it was restored from the backup in `backup_dir`.
bool restored_from(const std::string& backup_dir, const std::string& marker_dir);

/// The first half: reads and checks the backup for node `node` (whole, of that node, no tree
/// not ended whose parts span nodes, room for the raised id floor) and plans the copy (out:
/// from, records, trees, next_id, next_lsn). Writes nothing. False with the reason.
bool plan_restore(const std::string& backup_dir, const std::string& node, restore_report* out,
                  std::string* error);

/// The second half: copies the planned backup's records into `dst` (not the old
/// incarnation's record, not its id floor, not the old replica group's members' directories),
/// then the raised id floor, then writes the RESTORED marker into `marker_dir` (none when
/// empty). False with the reason: what was written stays.
bool copy_restore(const std::string& backup_dir, const restore_report& plan, journal_store& dst,
                  const std::string& marker_dir, std::string* error);

/// Writes `marker_dir`/RESTORED, naming the backup in `backup_dir`. False with the reason.
bool mark_restored(const std::string& backup_dir, const std::string& marker_dir,
                   std::string* error);

}  // namespace proctor
