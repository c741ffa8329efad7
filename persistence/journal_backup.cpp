#include "persistence/journal_backup.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <system_error>
#include <vector>

#include <rocksdb/db.h>
#include <rocksdb/utilities/checkpoint.h>

#include <proctor/journal.pb.h>

#include "persistence/id_floor.hpp"
#include "persistence/keys.hpp"
#include "persistence/rocksdb_store.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

namespace fs = std::filesystem;

namespace {

std::string info_text(const backup_info& b) {
  std::ostringstream out;
  // One "key value" per line: read by read_backup_info and by people.
  out << "format 1\n"
      << "node " << b.node << "\n"
      << "incarnation " << std::hex << b.incarnation << std::dec << "\n"
      << "lsn " << b.lsn << "\n"
      << "next_id " << b.next_id << "\n"
      << "taken_at_ms " << b.taken_at_ms << "\n";
  return out.str();
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Writes `text` to `path` whole or not at all (a temporary file beside it, renamed): the
/// BACKUP file and the RESTORED marker. False, with the reason, when it cannot.
bool write_whole(const fs::path& path, const std::string& text, std::string* why) {
  auto tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << text;
    f.flush();
    if (!f) {
      *why = "cannot write " + tmp.string();
      return false;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    *why = "cannot write " + path.string() + ": " + ec.message();
  return !ec;
}

/// The backup's database, opened read-only (a backup is never changed by a restore), with
/// every column family it has (a replica's database has the group's bookkeeping beside the
/// journal's default family).
struct read_only_db {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  ~read_only_db() {
    for (auto* h : handles)
      if (db)
        db->DestroyColumnFamilyHandle(h);
  }
};

rocksdb::Status open_read_only(const std::string& dir, read_only_db* out) {
  auto opts = journal_db_options();
  opts.create_if_missing = false;
  std::vector<std::string> names;
  auto st = rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(opts), dir, &names);
  if (!st.ok())
    return st;
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (const auto& n : names)
    descs.emplace_back(n, n == rocksdb::kDefaultColumnFamilyName
                            ? rocksdb::ColumnFamilyOptions(opts)
                            : rocksdb::ColumnFamilyOptions());
  rocksdb::DB* raw = nullptr;
  st = rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(opts), dir, descs, &out->handles, &raw);
  out->db.reset(raw);
  return st;
}

/// Visits the journal's records of the backup in key order (replica bookkeeping left out).
template <class F>
rocksdb::Status each_record(rocksdb::DB* db, F&& fn) {
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  ro.total_order_seek = true;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ro));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    uint64_t root = 0;
    uint64_t lsn = 0;
    if (!journal_keys::decode({it->key().data(), it->key().size()}, &root, &lsn))
      return rocksdb::Status::Corruption("a malformed journal key in the backup");
    if (root == journal_keys::replica_root)
      continue;
    if (!fn(root, lsn, std::string_view{it->value().data(), it->value().size()}))
      break;
  }
  return it->status();
}

}  // namespace

rocksdb::Status write_backup(rocksdb::DB* db, const std::string& dir, const backup_info& info) {
  std::error_code ec;
  if (fs::exists(dir, ec))
    return rocksdb::Status::InvalidArgument(dir + " exists; a backup goes to a new directory");
  auto parent = fs::path(dir).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    return rocksdb::Status::InvalidArgument(parent.string() + " is not a directory");
  if (!fs::create_directory(dir, ec))
    return rocksdb::Status::IOError("cannot create " + dir + ": " + ec.message());
  auto fail = [&](rocksdb::Status st) {
    fs::remove_all(dir, ec);
    return st;
  };
  rocksdb::Checkpoint* raw = nullptr;
  auto st = rocksdb::Checkpoint::Create(db, &raw);
  std::unique_ptr<rocksdb::Checkpoint> cp(raw);
  if (!st.ok())
    return fail(st);
  // log_size_for_flush 0: the memtable is flushed first, so the checkpoint is SST files
  // (hard-linked where the file system allows) and needs no WAL replay to read.
  st = cp->CreateCheckpoint((fs::path(dir) / backup_db_dir).string(), 0);
  if (!st.ok())
    return fail(st);
  if (std::string why; !write_whole(fs::path(dir) / backup_info_file, info_text(info), &why))
    return fail(rocksdb::Status::IOError(why));
  return rocksdb::Status::OK();
}

bool read_backup_info(const std::string& dir, backup_info* out, std::string* error) {
  auto path = fs::path(dir) / backup_info_file;
  std::ifstream f(path);
  if (!f) {
    *error = dir + " is not a Proctor backup (no " + path.filename().string()
             + " file; make one with `proctor backup DIR`)";
    return false;
  }
  std::map<std::string, std::string> kv;
  std::string line;
  while (std::getline(f, line)) {
    auto sp = line.find(' ');
    kv[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  if (kv["format"] != "1" || kv.count("lsn") == 0 || kv.count("next_id") == 0) {
    *error = path.string() + " is not a backup this proctord can read (format "
             + (kv["format"].empty() ? "missing" : kv["format"]) + ")";
    return false;
  }
  try {
    out->node = kv["node"];
    out->incarnation = std::stoull(kv["incarnation"], nullptr, 16);
    out->lsn = std::stoull(kv["lsn"]);
    out->next_id = std::stoull(kv["next_id"]);
    out->taken_at_ms = std::stoll(kv["taken_at_ms"]);
  } catch (const std::exception&) {
    *error = path.string() + " is damaged (a number does not parse)";
    return false;
  }
  return true;
}

namespace {

/// The checkpoint in `backup_dir`, opened read-only; false with the reason.
bool open_backup_journal(const std::string& backup_dir, read_only_db* src, std::string* error) {
  auto db_dir = (fs::path(backup_dir) / backup_db_dir).string();
  if (auto st = open_read_only(db_dir, src); !st.ok()) {
    *error = "cannot read the backup's journal in " + db_dir + ": " + st.ToString();
    return false;
  }
  return true;
}

}  // namespace

bool restored_from(const std::string& backup_dir, const std::string& marker_dir) {
  std::error_code ec;
  const auto marker = fs::path(marker_dir) / restored_marker_file;
  return fs::exists(marker, ec)
         && file_text(marker) == file_text(fs::path(backup_dir) / backup_info_file);
}

bool plan_restore(const std::string& backup_dir, const std::string& node, restore_report* out,
                  std::string* error) {
  if (!read_backup_info(backup_dir, &out->from, error))
    return false;
  if (out->from.node != node) {
    *error = "the backup in " + backup_dir + " is of node '" + out->from.node + "', not of '" + node
             + "': restore it under its own name";
    return false;
  }
  read_only_db src;
  if (!open_backup_journal(backup_dir, &src, error))
    return false;
  // Nothing is written until the backup is known to be whole and restorable.
  uint64_t floor = out->from.next_id;
  uint64_t max_lsn = journal_keys::id_floor_lsn;
  std::string spanning;  // trees not ended with parts on other nodes
  size_t spanning_count = 0;
  std::optional<tree_folder> folder;
  uint64_t current = 0;
  auto close = [&] {
    if (!folder)
      return;
    auto t = folder->finish();
    folder.reset();
    ++out->trees;
    auto root = t.procs.find(t.root_id);
    bool ended = t.finished && root != t.procs.end() && root->second.status != proc_state::failed;
    if (ended)
      return;
    for (const auto& [id, p] : t.procs)
      if (p.remote() || !p.parent_node.empty()) {
        if (++spanning_count <= 5)
          spanning += (spanning.empty() ? "" : ", ") + std::to_string(t.root_id) + " (part on "
                      + (p.remote() ? p.node : p.parent_node) + ")";
        break;
      }
  };
  auto st = each_record(src.db.get(), [&](uint64_t root, uint64_t lsn, std::string_view v) {
    if (root == journal_keys::replica_root)
      return true;  // the old group's members' directories: not part of what is restored
    ++out->records;
    max_lsn = std::max(max_lsn, lsn);
    if (root == journal_keys::meta_root) {
      pb::JournalRecord m;
      if (m.ParseFromArray(v.data(), static_cast<int>(v.size())) && m.has_id_floor()) {
        floor = std::max(floor, m.id_floor().next_id());
        if (m.id_floor().next_lsn() > 0)
          max_lsn = std::max(max_lsn, m.id_floor().next_lsn() - 1);
      }
      return true;
    }
    if (!folder || root != current) {
      close();
      current = root;
      folder.emplace(root);
    }
    folder->add(lsn, v);
    return true;
  });
  close();
  if (!st.ok()) {
    *error = "the backup's journal cannot be read (" + st.ToString() + "); nothing restored";
    return false;
  }
  if (spanning_count > 0) {
    *error = "the backup holds " + std::to_string(spanning_count)
             + " tree(s) not ended with parts on other nodes (" + spanning
             + (spanning_count > 5 ? ", ..." : "")
             + "): their parts elsewhere were resolved when the peers forgot this node's old "
               "incarnation, so they cannot be carried on from a copy. Nothing restored; "
               "restore an older backup taken when no such tree was running, or start empty";
    return false;
  }
  // The id floor stays within this node's ids (the top bits are its number).
  constexpr uint64_t node_bits = uint64_t{1} << 40;
  auto raised = floor + restore_id_gap;
  if (floor / node_bits != (raised - 1) / node_bits) {
    *error = "this node's procedure ids are nearly used up (" + std::to_string(floor)
             + "): a restore cannot leave room for the ids handed out after the backup";
    return false;
  }
  out->next_id = raised;
  out->next_lsn = max_lsn + 1;
  return true;
}

bool copy_restore(const std::string& backup_dir, const restore_report& plan, journal_store& dst,
                  const std::string& marker_dir, std::string* error) {
  read_only_db src;
  if (!open_backup_journal(backup_dir, &src, error))
    return false;
  // Copied, leaving the old incarnation, the old id floor and the old group's replicas behind.
  std::vector<store_op> batch;
  rocksdb::Status wst;
  auto flush = [&] {
    if (!batch.empty() && wst.ok())
      wst = dst.write(batch);
    batch.clear();
  };
  auto st = each_record(src.db.get(), [&](uint64_t root, uint64_t lsn, std::string_view v) {
    if (root == journal_keys::replica_root)
      return true;
    if (root == journal_keys::meta_root) {
      if (lsn == journal_keys::id_floor_lsn)
        return true;
      pb::JournalRecord m;
      if (m.ParseFromArray(v.data(), static_cast<int>(v.size())) && m.has_incarnation())
        return true;  // the restored journal draws an incarnation of its own
    }
    store_op op;
    op.root_id = root;
    op.lsn = lsn;
    op.value.assign(v);
    batch.push_back(std::move(op));
    if (batch.size() >= 4096)
      flush();
    return wst.ok();
  });
  store_op fl;
  fl.root_id = journal_keys::meta_root;
  fl.lsn = journal_keys::id_floor_lsn;
  fl.value = id_floor_record(plan.next_id, plan.next_lsn);
  batch.push_back(std::move(fl));
  flush();
  if (!st.ok() || !wst.ok()) {
    *error = "the restore stopped (" + (st.ok() ? wst : st).ToString() + ")";
    return false;
  }
  return marker_dir.empty() || mark_restored(backup_dir, marker_dir, error);
}

bool mark_restored(const std::string& backup_dir, const std::string& marker_dir,
                   std::string* error) {
  return write_whole(fs::path(marker_dir) / restored_marker_file,
                     file_text(fs::path(backup_dir) / backup_info_file), error);
}

bool restore_backup(const std::string& backup_dir, const std::string& data_dir,
                    const std::string& node, restore_report* out, std::string* error) {
  std::error_code ec;
  if (fs::exists(fs::path(data_dir) / "CURRENT", ec)) {
    if (restored_from(backup_dir, data_dir)) {
      out->already = true;
      return true;
    }
    *error = data_dir
             + " already holds a journal: a backup is restored into an empty data "
               "directory (move it aside first)";
    return false;
  }
  if (!plan_restore(backup_dir, node, out, error))
    return false;
  std::string open_error;
  auto dst = open_rocksdb_store(data_dir, &open_error);
  if (!dst) {
    *error = open_error;
    return false;
  }
  bool copied = copy_restore(backup_dir, *out, *dst, "", error);
  dst.reset();  // closed before the marker is written: the marker says the journal is whole
  if (copied && !mark_restored(backup_dir, data_dir, error))
    *error += "; the journal in " + data_dir + " is restored";
  else if (copied)
    return true;
  *error += "; remove " + data_dir + " before trying again";
  return false;
}

}  // namespace proctor
