#include "actors/node/node_restore.hpp"

#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

#include "actors/wire/wall_clock.hpp"
#include "persistence/journal_store.hpp"
#include "replication/raft_group.hpp"

namespace proctor {

namespace fs = std::filesystem;

namespace {

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

void log_restored(const node_flags& f, const restore_report& rr, bool replica) {
  spdlog::warn("restored node {} from the backup in {} (taken at {}, incarnation {:016x}, "
               "LSN {}){}: {} record(s), {} tree(s); a new incarnation, its ids from {}; "
               "what the old one did after the backup is not here",
               f.name.empty() ? "(unnamed)" : f.name, f.restore_from, utc_text(rr.from.taken_at_ms),
               rr.from.incarnation, rr.from.lsn,
               replica ? " into replica " + f.replica + ", founding a group of one" : "",
               rr.records, rr.trees, rr.next_id);
}

void log_already(const node_flags& f) {
  spdlog::info("{} was already restored from the backup in {}: starting on it", f.data_dir,
               f.restore_from);
}

}  // namespace

std::string data_dir_mismatch(const std::string& data_dir, bool replica) {
  const fs::path d{data_dir};
  if (replica && present(d / "CURRENT"))
    return "data directory " + data_dir
           + " holds a plain node's journal, which a replica would not read (a replica keeps "
             "its journal in "
           + (d / "db").string()
           + "): start it as the plain node it is, or, to run it as a replica group, take a "
             "backup of it (`proctor backup DIR`) and restore that on a new replica founding a "
             "group of one (--restore-from DIR; docs/operations.md, \"Backups\")";
  if (!replica && (present(d / "REPLICA") || present(d / "db" / "CURRENT")))
    return "data directory " + data_dir
           + " holds a replica's journal and Raft state, which a plain node would not read: "
             "start it with --replica and --replicas, as the replica it is";
  return {};
}

bool restore_node_journal(const node_flags& f, std::string* error) {
  std::error_code ec;
  fs::create_directories(f.data_dir, ec);
  restore_report rr;
  if (!restore_backup(f.restore_from, f.data_dir, f.name, &rr, error))
    return false;
  if (rr.already)
    log_already(f);
  else
    log_restored(f, rr, false);
  return true;
}

bool plan_replica_restore(const node_flags& f, replica_restore* out, std::string* error) {
  out->needed = false;
  if (f.restore_from.empty())
    return true;
  if (restored_from(f.restore_from, f.data_dir)) {
    log_already(f);
    return true;
  }
  if (!raft_state_is_fresh(f.data_dir)) {
    *error = f.data_dir
             + " holds a replica's Raft state: a backup is restored by a replica on an empty "
               "data directory (move it aside first)";
    return false;
  }
  if (!plan_restore(f.restore_from, f.name, &out->plan, error))
    return false;
  out->needed = true;
  return true;
}

bool finish_replica_restore(const node_flags& f, const replica_restore& r, journal_store& store,
                            std::string* error) {
  if (!r.needed)
    return true;
  if (!copy_restore(f.restore_from, r.plan, store, f.data_dir, error)) {
    *error += "; remove " + f.data_dir + " before trying again";
    return false;
  }
  log_restored(f, r.plan, true);
  return true;
}

}  // namespace proctor
