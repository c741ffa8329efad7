#include "replication/raft_fsm.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include <spdlog/spdlog.h>

namespace proctor {

// -- libraft's callbacks --------------------------------------------------------------------

namespace {

raft_fsm_binding* binding_of(struct raft_fsm* fsm) {
  return static_cast<raft_fsm_binding*>(fsm->data);
}

void fail(raft_fsm_binding* b, const rocksdb::Status& st) {
  if (b->failed)
    return;
  b->failed = true;
  spdlog::error("raft replica {}: an entry cannot be applied, the replica stops applying: {}",
                b->name, st.ToString());
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
  auto st = b->sm->apply(index, {static_cast<const char*>(buf->base), buf->len});
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
  b->sm->begin_snapshot(raft_last_applied(b->raft));
  b->snap_entries = b->entries_since;
  b->snap_bytes = b->bytes_since;
  b->entries_since = b->bytes_since = 0;
  *bufs = nullptr;
  *n_bufs = 0;
  return 0;
}

int fsm_snapshot_async(struct raft_fsm* fsm, struct raft_buffer* bufs[], unsigned* n_bufs) {
  auto* b = binding_of(fsm);
  auto st = b->sm->serialize_snapshot(&b->chunks);
  if (!st.ok()) {
    spdlog::warn("raft replica {}: taking a snapshot failed (retried later): {}", b->name,
                 st.ToString());
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
        spdlog::info("raft replica {}: snapshot threshold now {} entries (state {} bytes, "
                     "entries of {} bytes on average)",
                     b->name, t, state_bytes,
                     b->snap_entries ? b->snap_bytes / b->snap_entries : 0);
      b->threshold = t;
    }
  }
  b->chunks.clear();
  b->chunks.shrink_to_fit();
  b->sm->end_snapshot();
  return 0;
}

int fsm_restore(struct raft_fsm* fsm, struct raft_buffer* buf) {
  auto* b = binding_of(fsm);
  bool replaced = false;
  auto st = b->sm->restore({static_cast<const char*>(buf->base), buf->len}, &replaced);
  if (!st.ok()) {
    spdlog::error("raft replica {}: restoring a snapshot failed: {}", b->name, st.ToString());
    return RAFT_IOERR;  // libraft keeps (and frees) the buffer
  }
  if (replaced)
    spdlog::info("raft replica {}: state replaced by a snapshot at index {}", b->name,
                 b->sm->applied_index());
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
