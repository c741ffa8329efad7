#include "replication/journal_replica_db.hpp"

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

}  // namespace proctor
