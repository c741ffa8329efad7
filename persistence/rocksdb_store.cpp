#include "persistence/rocksdb_store.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
#include <stop_token>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/perf_level.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "persistence/journal_backup.hpp"
#include "persistence/keys.hpp"
#include "persistence/tree_memtable.hpp"

namespace proctor {

namespace {

constexpr size_t scan_readahead = 2 * 1024 * 1024;
/// A scan hands records from its reading thread to the caller in batches of this many;
/// with this many batches, the reader can be a batch or two ahead.
constexpr size_t scan_batch_records = 512;
constexpr size_t scan_batches = 16;

/// The first key after every key of tree `root_id`. For the last possible root there is
/// no (root + 1, 0): a 17-byte key sorts after every 16-byte key with the same prefix.
std::string tree_end(uint64_t root_id) {
  if (root_id == UINT64_MAX)
    return std::string(journal_keys::key_size, '\xff') + '\0';
  return journal_keys::encode(root_id + 1, 0);
}

std::string range_end(const store_op& op) {
  if (op.lsn == UINT64_MAX)
    return tree_end(op.root_id);
  return journal_keys::encode(op.root_id, op.lsn);
}

rocksdb::Slice as_slice(std::string_view s) {
  return {s.data(), s.size()};
}

std::string one_line(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '\r')
      c = ' ';
  return s;
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

rocksdb::Options journal_db_options() {
  rocksdb::Options opts;
  opts.create_if_missing = true;
  // Fail on any sign of damage instead of opening a partial journal.
  opts.paranoid_checks = true;
  // Two cores: one flush and one compaction in the background at most.
  opts.IncreaseParallelism(2);
  // Start-up replays the WAL into a memtable, one skiplist insert per record (about a
  // microsecond each, on one thread), so the memtable's size bounds that work: 8 MB is some
  // 100k records, ~0.1 s; 32 MB took 0.4 s to replay 100k waiting procedures.
  opts.write_buffer_size = 8 << 20;
  opts.max_write_buffer_number = 3;
  opts.max_total_wal_size = 256 << 20;
  // RocksDB's own LOG files live in the data directory: keep them bounded.
  opts.keep_log_file_num = 5;
  opts.max_log_file_size = 16 << 20;
  // Every acknowledged write is synced, so a torn WAL tail holds only unacknowledged
  // writes: recovering to the last intact record is exactly right.
  opts.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
  // Keep what the WAL replay put in the memtable instead of writing (and syncing) a level-0
  // file before the node may start; the WAL files stay until that memtable is flushed. A
  // later recovery past a torn tail still replays the newer WALs: point-in-time recovery
  // goes on where the sequence numbers continue.
  opts.avoid_flush_during_recovery = true;
  // The memtable keeps each tree's records together (see tree_memtable.hpp): the journal
  // writes to thousands of trees at once, which a skiplist paid for with a search per record.
  // Its prefix is the root id; readers that cross trees ask for total order.
  opts.prefix_extractor = journal_prefix_transform();
  opts.memtable_factory = std::make_shared<tree_memtable_factory>();
  opts.allow_concurrent_memtable_write = false;  // one writer: the journal
  // Compact level 0 once it holds 16 files (128 MB), not RocksDB's 4. Keys are (tree, LSN)
  // and every flushed memtable holds records of all the trees being written, so each
  // level-0 file overlaps nearly all of level 1 and each compaction rewrites it whole:
  // fewer, larger compactions rewrite it less often. A firing of 1M timers (proctor-bench
  // (j), 2026-11-27 14:25-14:46, alternating) took 22.1-23.4 us of CPU per procedure and
  // ran at 86,430-91,058 resumed/s, against 25.5-28.1 us and 71,659-79,058 with 4; (b),
  // (d) and (f) did not move. Writes slow down at 48 files and stop at 64: the defaults
  // (20 and 36) would leave a compaction running behind little room before writes stall.
  opts.level0_file_num_compaction_trigger = 16;
  opts.level0_slowdown_writes_trigger = 48;
  opts.level0_stop_writes_trigger = 64;
  return opts;
}

// -- rocksdb_store ------------------------------------------------------------------------

rocksdb_store::rocksdb_store(std::unique_ptr<rocksdb::DB> db,
                             std::vector<rocksdb::ColumnFamilyHandle*> extra)
    : db_(std::move(db)), extra_(std::move(extra)) {
  // nop
}

rocksdb_store::~rocksdb_store() {
  if (!db_)
    return;
  // RocksDB asserts that every column family handle is gone before the database closes.
  for (auto* h : extra_)
    db_->DestroyColumnFamilyHandle(h);
  extra_.clear();
  auto st = db_->Close();
  if (!st.ok())
    spdlog::warn("closing the journal database failed: {}", st.ToString());
}

rocksdb::Status rocksdb_store::write(const std::vector<store_op>& ops) {
  if (ops.empty())
    return rocksdb::Status::OK();
  // Reserve the batch's buffer once: per record roughly key + value + a few header bytes.
  size_t bytes = 12;
  for (const auto& op : ops)
    bytes += 2 * journal_keys::key_size + op.value.size() + 8;
  rocksdb::WriteBatch batch(bytes);
  if (auto st = add_journal_ops(ops, &batch); !st.ok())
    return st;
  return write_batch(&batch, true);
}

rocksdb::Status rocksdb_store::write_batch(rocksdb::WriteBatch* batch, bool sync) {
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  return db_->Write(wo, batch);
}

rocksdb::Status add_journal_ops(const std::vector<store_op>& ops, rocksdb::WriteBatch* out) {
  auto& batch = *out;
  // Each run of puts goes in in key order. The memtable's skiplist remembers where its last
  // insert went and only searches the levels below the first one that still brackets the
  // next key, so ascending keys cost a short walk instead of a descent from the top; a
  // synced batch holds records of hundreds of trees at scattered places. Reordering puts
  // of distinct keys between two deletes changes nothing (a stable sort keeps puts of one
  // key in order); a delete stays between the puts before and after it, because it must
  // cover the first and not the second.
  std::vector<uint32_t> order;  // indices into ops of the current run of puts
  order.reserve(ops.size());
  char key[journal_keys::key_size];
  auto put_run = [&]() -> rocksdb::Status {
    std::stable_sort(order.begin(), order.end(), [&ops](uint32_t a, uint32_t b) {
      return std::tie(ops[a].root_id, ops[a].lsn) < std::tie(ops[b].root_id, ops[b].lsn);
    });
    for (auto i : order) {
      journal_keys::put_be64(key, ops[i].root_id);
      journal_keys::put_be64(key + 8, ops[i].lsn);
      auto st = batch.Put(rocksdb::Slice(key, sizeof(key)), as_slice(ops[i].value));
      if (!st.ok())
        return st;
    }
    order.clear();
    return rocksdb::Status::OK();
  };
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const auto& op = ops[i];
    if (op.what == store_op::kind::put) {
      order.push_back(i);
      continue;
    }
    auto st = put_run();
    if (!st.ok())
      return st;
    if (op.what == store_op::kind::delete_range) {
      // An empty range is a no-op; RocksDB is not asked to store an inverted tombstone.
      if (op.lsn == UINT64_MAX || op.from_lsn < op.lsn)
        st = batch.DeleteRange(journal_keys::encode(op.root_id, op.from_lsn), range_end(op));
    } else if (op.last_root_id >= op.root_id) {  // delete_trees
      st = batch.DeleteRange(journal_keys::encode(op.root_id, 0), tree_end(op.last_root_id));
    }
    if (!st.ok())
      return st;
  }
  return put_run();
}

rocksdb::Status rocksdb_store::scan(const std::function<bool(const stored_record&)>& fn) {
  // A second thread reads (block reads, checksums, decompression, merging the sorted runs)
  // while the caller consumes what was read before: a scan then takes about as long as the
  // slower of the two instead of their sum. Records go across in batches, one handoff per
  // batch, and batches are reused so their strings keep their capacity.
  struct batch {
    std::vector<stored_record> recs;
    size_t size = 0;
  };
  std::mutex mtx;
  std::condition_variable_any cv;
  std::deque<batch> full;  // read, in key order
  std::vector<batch> spare(scan_batches);
  for (auto& b : spare)
    b.recs.resize(scan_batch_records);
  bool read_all = false;  // the reader is done: all it read is in `full`, and its status set
  rocksdb::Status st;
  size_t malformed = 0;

  // Declared last, so that however this function is left (an exception from `fn`
  // included), the reader is asked to stop and joined before what it uses goes away.
  std::jthread reader([&](std::stop_token stopping) {
    rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);  // see open_rocksdb_store
    rocksdb::ReadOptions ro;
    ro.verify_checksums = true;
    ro.fill_cache = false;
    ro.readahead_size = scan_readahead;
    ro.total_order_seek = true;  // every tree (the memtable's prefix is one tree)
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    std::unique_lock<std::mutex> g(mtx);
    batch b = std::move(spare.back());
    spare.pop_back();
    g.unlock();
    size_t bad = 0;
    bool stopped = false;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      auto k = it->key();
      auto& rec = b.recs[b.size];
      if (!journal_keys::decode({k.data(), k.size()}, &rec.root_id, &rec.lsn)) {
        ++bad;
        continue;
      }
      auto v = it->value();
      rec.value.assign(v.data(), v.size());
      if (++b.size < b.recs.size())
        continue;
      g.lock();
      full.push_back(std::move(b));
      cv.notify_all();
      if (!cv.wait(g, stopping, [&] { return !spare.empty(); })) {
        stopped = true;
        break;
      }
      b = std::move(spare.back());
      spare.pop_back();
      b.size = 0;
      g.unlock();
    }
    if (!g.owns_lock())
      g.lock();
    // Every path from the move in the loop either reassigned `b` (spare.back()) or set
    // `stopped`: not a use after the move.
    // NOLINTNEXTLINE(bugprone-use-after-move)
    if (!stopped && b.size > 0)
      full.push_back(std::move(b));
    st = it->status();
    malformed = bad;
    read_all = true;
    cv.notify_all();
  });

  for (bool go_on = true; go_on;) {
    batch b;
    {
      std::unique_lock<std::mutex> g(mtx);
      cv.wait(g, [&] { return !full.empty() || read_all; });
      if (full.empty())
        break;
      b = std::move(full.front());
      full.pop_front();
    }
    for (size_t i = 0; go_on && i < b.size; ++i)
      go_on = fn(b.recs[i]);
    std::lock_guard<std::mutex> g(mtx);
    spare.push_back(std::move(b));
    cv.notify_all();
  }
  reader.request_stop();
  reader.join();
  if (!st.ok())
    return st;
  if (malformed > 0)
    return rocksdb::Status::Corruption("journal scan: " + std::to_string(malformed)
                                       + " record(s) with a malformed key");
  return rocksdb::Status::OK();
}

rocksdb::Status rocksdb_store::backup(const std::string& dir, const backup_info& info) {
  return write_backup(db_.get(), dir, info);
}

rocksdb::Status rocksdb_store::read_tree(uint64_t root_id, std::vector<stored_record>* out) {
  auto begin = journal_keys::encode(root_id, 0);
  auto end = tree_end(root_id);
  rocksdb::Slice upper(end);
  rocksdb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.iterate_upper_bound = &upper;
  // Prefix mode (no total_order_seek): the memtable hands over this tree's records only.
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  size_t malformed = 0;
  for (it->Seek(begin); it->Valid(); it->Next()) {
    auto k = it->key();
    stored_record rec;
    if (!journal_keys::decode({k.data(), k.size()}, &rec.root_id, &rec.lsn)) {
      ++malformed;
      continue;
    }
    auto v = it->value();
    rec.value.assign(v.data(), v.size());
    out->push_back(std::move(rec));
  }
  auto st = it->status();
  if (!st.ok())
    return st;
  if (malformed > 0)
    return rocksdb::Status::Corruption("journal tree " + std::to_string(root_id) + ": "
                                       + std::to_string(malformed)
                                       + " record(s) with a malformed key");
  return rocksdb::Status::OK();
}

// -- open ---------------------------------------------------------------------------------

std::unique_ptr<rocksdb_store> open_rocksdb_store_with(const std::string& dir,
                                                       const std::vector<std::string>& families,
                                                       std::string* error) {
  auto fail = [&](std::string msg) -> std::unique_ptr<rocksdb_store> {
    if (error != nullptr)
      *error = one_line(std::move(msg));
    return nullptr;
  };
  auto not_writable = [&](const std::string& why) {
    return fail("data directory " + dir + " is not writable: " + why);
  };
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return not_writable(ec.message());
  if (!std::filesystem::is_directory(dir, ec))
    return not_writable(ec ? ec.message() : std::string{"not a directory"});
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return not_writable(std::strerror(errno));
  // RocksDB counts every key comparison in thread-local perf counters unless told not to;
  // the replay of the WAL into the memtable (on this thread) spent a tenth of its time there.
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  auto opts = journal_db_options();
  rocksdb::Status st;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> extra;
  if (families.empty()) {
    rocksdb::DB* raw = nullptr;
    st = rocksdb::DB::Open(opts, dir, &raw);
    db.reset(raw);
  } else {
    opts.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> descs;
    descs.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions(opts));
    rocksdb::ColumnFamilyOptions small;
    small.write_buffer_size = 1 << 20;
    for (const auto& name : families)
      descs.emplace_back(name, small);
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    st = rocksdb::DB::Open(rocksdb::DBOptions(opts), dir, descs, &handles, &raw);
    db.reset(raw);
    if (st.ok()) {
      // handles[0] is the default family: the database owns that one.
      db->DestroyColumnFamilyHandle(handles[0]);
      extra.assign(handles.begin() + 1, handles.end());
    }
  }
  if (st.ok())
    return std::make_unique<rocksdb_store>(std::move(db), std::move(extra));
  auto msg = st.ToString();
  // Check permissions first: failing to *create* the LOCK file also mentions "lock".
  if (contains(msg, "Permission denied") || contains(msg, "Read-only file system"))
    return not_writable(msg);
  // Another process: flock gives EAGAIN ("While lock file"); this process: RocksDB's own
  // table of locked files ("lock hold by current process").
  if (st.IsIOError() && (contains(msg, "While lock file") || contains(msg, "lock hold")))
    return fail("data directory " + dir + " is in use by another proctord (lock held)");
  return fail("cannot open the journal in " + dir + ": " + msg);
}

std::unique_ptr<journal_store> open_rocksdb_store(const std::string& dir, std::string* error) {
  return open_rocksdb_store_with(dir, {}, error);
}

}  // namespace proctor
