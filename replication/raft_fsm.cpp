#include "replication/raft_fsm.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "persistence/keys.hpp"
#include "replication/raft_codec.hpp"

namespace proctor {

namespace {

constexpr const char* raft_family_name = "raft";
constexpr std::string_view applied_key = "applied_index";
/// A snapshot is handed to libraft in chunks of about this size (it writes them with one
/// vectored write, and copies them into one buffer only to send them to a follower).
constexpr size_t snapshot_chunk = 4 << 20;

std::string encode_index(uint64_t v) {
  std::string s(8, '\0');
  journal_keys::put_be64(s.data(), v);
  return s;
}

rocksdb::Slice as_slice(std::string_view s) {
  return {s.data(), s.size()};
}

/// Past every key of the journal's family: its keys are 16 bytes (journal_keys), and a
/// restore clears the family with one range tombstone up to this.
std::string past_all_keys() {
  return std::string(32, '\xff');
}

}  // namespace

raft_replica_db::raft_replica_db(std::unique_ptr<rocksdb_store> store, bool sync_applies,
                                 uint64_t applied)
    : store_(std::move(store)), sync_applies_(sync_applies), applied_(applied) {
  // nop
}

std::unique_ptr<raft_replica_db> raft_replica_db::open(const std::string& dir, bool sync_applies,
                                                       std::string* error) {
  auto store = open_rocksdb_store_with(dir, {raft_family_name}, error);
  if (!store)
    return nullptr;
  std::string v;
  uint64_t applied = 0;
  auto st = store->db()->Get(rocksdb::ReadOptions(), store->extra_family(0), applied_key, &v);
  if (st.ok() && v.size() == 8) {
    applied = journal_keys::get_be64(v.data());
  } else if (st.ok() || !st.IsNotFound()) {
    if (error != nullptr)
      *error = "cannot read the applied index in " + dir + ": "
               + (st.ok() ? std::string{"malformed"} : st.ToString());
    return nullptr;
  }
  return std::unique_ptr<raft_replica_db>(
    new raft_replica_db(std::move(store), sync_applies, applied));
}

rocksdb::Status raft_replica_db::apply(uint64_t index, std::string_view entry) {
  if (index <= applied_.load(std::memory_order_relaxed))
    return rocksdb::Status::OK();  // replayed after a restart: already in the database
  std::vector<store_op> ops;
  if (!raft_codec::decode_ops(entry, &ops))
    return rocksdb::Status::Corruption("raft entry " + std::to_string(index)
                                       + " is not a well-formed journal write");
  rocksdb::WriteBatch batch(entry.size() + ops.size() * 24 + 64);
  if (auto st = add_journal_ops(ops, &batch); !st.ok())
    return st;
  if (auto st = batch.Put(raft_family(), as_slice(applied_key), encode_index(index)); !st.ok())
    return st;
  if (auto st = store_->write_batch(&batch, sync_applies_); !st.ok())
    return st;
  applied_.store(index, std::memory_order_release);
  return rocksdb::Status::OK();
}

void raft_replica_db::begin_snapshot(uint64_t index) {
  snapshot_ = store_->db()->GetSnapshot();
  snapshot_index_ = index;
}

rocksdb::Status raft_replica_db::serialize_snapshot(std::vector<std::string>* chunks) {
  chunks->clear();
  chunks->push_back(raft_codec::snapshot_header(snapshot_index_));
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot_;
  ro.fill_cache = false;
  ro.verify_checksums = true;
  ro.total_order_seek = true;  // every tree (the memtable's prefix is one tree)
  std::unique_ptr<rocksdb::Iterator> it(store_->db()->NewIterator(ro));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (chunks->back().size() >= snapshot_chunk)
      chunks->emplace_back();
    auto k = it->key();
    auto v = it->value();
    raft_codec::append_record(&chunks->back(), {k.data(), k.size()}, {v.data(), v.size()});
  }
  return it->status();
}

void raft_replica_db::end_snapshot() {
  if (snapshot_ != nullptr)
    store_->db()->ReleaseSnapshot(snapshot_);
  snapshot_ = nullptr;
}

rocksdb::Status raft_replica_db::restore(std::string_view data, bool* replaced) {
  *replaced = false;
  uint64_t index = 0;
  size_t records = 0;
  // First pass: validate the whole snapshot before anything is deleted.
  if (!raft_codec::read_snapshot(data, &index, [&](std::string_view, std::string_view) {
        ++records;
        return true;
      }))
    return rocksdb::Status::Corruption("raft snapshot is malformed");
  if (index <= applied_.load(std::memory_order_relaxed))
    return rocksdb::Status::OK();
  rocksdb::WriteBatch batch(data.size() + records * 8 + 64);
  auto st = batch.DeleteRange(std::string{}, past_all_keys());
  raft_codec::read_snapshot(data, &index, [&](std::string_view k, std::string_view v) {
    if (st.ok())
      st = batch.Put(as_slice(k), as_slice(v));
    return st.ok();
  });
  if (st.ok())
    st = batch.Put(raft_family(), as_slice(applied_key), encode_index(index));
  // Synced whatever sync_applies says: a restore is rare, and it replaces everything.
  if (st.ok())
    st = store_->write_batch(&batch, true);
  if (!st.ok())
    return st;
  applied_.store(index, std::memory_order_release);
  *replaced = true;
  return rocksdb::Status::OK();
}

// -- libraft's callbacks --------------------------------------------------------------------

namespace {

raft_fsm_binding* binding_of(struct raft_fsm* fsm) {
  return static_cast<raft_fsm_binding*>(fsm->data);
}

void fail(raft_fsm_binding* b, const rocksdb::Status& st) {
  if (b->failed)
    return;
  b->failed = true;
  spdlog::error("raft replica: applying to the database failed, the replica stops applying: {}",
                st.ToString());
  if (b->on_fatal)
    b->on_fatal(st);
}

int fsm_apply(struct raft_fsm* fsm, const struct raft_buffer* buf, void** result) {
  auto* b = binding_of(fsm);
  *result = nullptr;
  // libraft applies entries in index order and advances last_applied only after this
  // returns, so the entry being applied is the one after it (replicationApply, 0.15).
  uint64_t index = raft_last_applied(b->raft) + 1;
  ++b->entries_since;
  b->bytes_since += buf->len;
  auto st = b->db->apply(index, {static_cast<const char*>(buf->base), buf->len});
  if (!st.ok()) {
    fail(b, st);
    return RAFT_IOERR;
  }
  if (b->on_applied)
    b->on_applied(index);
  return 0;
}

int fsm_snapshot(struct raft_fsm* fsm, struct raft_buffer* bufs[], unsigned* n_bufs) {
  auto* b = binding_of(fsm);
  // On the loop thread, between two applies: the pinned state is exactly last_applied.
  b->db->begin_snapshot(raft_last_applied(b->raft));
  b->snap_entries = b->entries_since;
  b->snap_bytes = b->bytes_since;
  b->entries_since = b->bytes_since = 0;
  *bufs = nullptr;
  *n_bufs = 0;
  return 0;
}

int fsm_snapshot_async(struct raft_fsm* fsm, struct raft_buffer* bufs[], unsigned* n_bufs) {
  auto* b = binding_of(fsm);
  auto st = b->db->serialize_snapshot(&b->chunks);
  if (!st.ok()) {
    spdlog::warn("raft replica: taking a snapshot failed (retried later): {}", st.ToString());
    b->chunks.clear();
    return RAFT_IOERR;
  }
  auto* out =
    static_cast<struct raft_buffer*>(raft_malloc(sizeof(struct raft_buffer) * b->chunks.size()));
  if (out == nullptr)
    return RAFT_NOMEM;
  for (size_t i = 0; i < b->chunks.size(); ++i)
    out[i] = {b->chunks[i].data(), b->chunks[i].size()};
  *bufs = out;
  *n_bufs = static_cast<unsigned>(b->chunks.size());
  return 0;
}

int fsm_snapshot_finalize(struct raft_fsm* fsm, struct raft_buffer* bufs[], unsigned* n_bufs) {
  auto* b = binding_of(fsm);
  // With snapshot_finalize set, libraft owns none of the buffers: the array is ours.
  if (*bufs != nullptr)
    raft_free(*bufs);
  *bufs = nullptr;
  *n_bufs = 0;
  uint64_t state_bytes = 0;
  for (const auto& c : b->chunks)
    state_bytes += c.size();
  if (state_bytes > 0) {  // not a snapshot that failed
    unsigned t = adapted_threshold(*b, state_bytes);
    if (t != b->threshold) {
      raft_set_snapshot_threshold(b->raft, t);
      if (t > 2 * std::max(b->threshold, b->min_threshold) || 2 * t < b->threshold)
        spdlog::info("raft replica: snapshot threshold now {} entries (state {} bytes, entries "
                     "of {} bytes on average)",
                     t, state_bytes, b->snap_entries ? b->snap_bytes / b->snap_entries : 0);
      b->threshold = t;
    }
  }
  b->chunks.clear();
  b->chunks.shrink_to_fit();
  b->db->end_snapshot();
  return 0;
}

int fsm_restore(struct raft_fsm* fsm, struct raft_buffer* buf) {
  auto* b = binding_of(fsm);
  bool replaced = false;
  auto st = b->db->restore({static_cast<const char*>(buf->base), buf->len}, &replaced);
  if (!st.ok()) {
    spdlog::error("raft replica: restoring a snapshot failed: {}", st.ToString());
    return RAFT_IOERR;  // libraft keeps (and frees) the buffer
  }
  if (replaced)
    spdlog::info("raft replica: state replaced by a snapshot at index {}", b->db->applied_index());
  raft_free(buf->base);  // on success the buffer is ours (snapshotRestore, 0.15)
  return 0;
}

}  // namespace

unsigned adapted_threshold(const raft_fsm_binding& b, uint64_t state_bytes) {
  if (b.max_log_bytes == 0 || b.snap_entries == 0 || b.snap_bytes == 0)
    return b.min_threshold;
  uint64_t per_entry = std::max<uint64_t>(1, b.snap_bytes / b.snap_entries);
  uint64_t entries = std::min(state_bytes, b.max_log_bytes) / per_entry;
  return static_cast<unsigned>(
    std::clamp<uint64_t>(entries, b.min_threshold, std::numeric_limits<unsigned>::max()));
}

void init_raft_fsm(struct raft_fsm* fsm, raft_fsm_binding* binding) {
  std::memset(fsm, 0, sizeof(*fsm));
  fsm->version = 3;
  fsm->data = binding;
  fsm->apply = fsm_apply;
  fsm->snapshot = fsm_snapshot;
  fsm->restore = fsm_restore;
  fsm->snapshot_finalize = fsm_snapshot_finalize;
  fsm->snapshot_async = fsm_snapshot_async;
}

}  // namespace proctor
