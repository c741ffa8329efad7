#include "persistence/journal.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>

#include <rocksdb/perf_level.h>
#include <spdlog/spdlog.h>

#include <proctor/journal.pb.h>

#include "persistence/counted_actor.hpp"
#include "persistence/id_floor.hpp"
#include "persistence/keys.hpp"

namespace proctor {

journal_entry make_entry(uint64_t root_id, pb::JournalRecord& rec) {
  rec.set_format(1);
  return journal_entry{root_id, rec.SerializeAsString()};
}

std::string id_floor_record(uint64_t next_id, uint64_t next_lsn) {
  pb::JournalRecord rec;
  rec.set_format(1);
  rec.mutable_id_floor()->set_next_id(next_id);
  rec.mutable_id_floor()->set_next_lsn(next_lsn);
  return rec.SerializeAsString();
}

namespace {

/// An append waiting for the next synced write.
struct staged_append {
  journal_batch batch;
  uint64_t first_lsn = 0;  ///< LSN of the first entry; next free LSN if there are none
  uint64_t last_lsn = 0;   ///< the acknowledgement
  caf::typed_response_promise<uint64_t> rp;
  caf::actor tagged_sender;  ///< set: acknowledge with (appended_atom, tag, lsn) instead
  uint64_t tag = 0;
};

struct journal_state {
  journal_config cfg;
  uint64_t next_lsn = 1;
  std::vector<staged_append> staged;
  size_t staged_entries = 0;
  size_t staged_deletes = 0;
  /// A flush_atom is on its way: appends arriving before it ride along.
  bool flush_scheduled = false;
  /// A write failed: nothing is ever acknowledged again.
  bool failed = false;
  journal_stats stats;
  /// Reused between flushes to keep its capacity.
  std::vector<store_op> ops;

  static inline const char* name = "proctor.journal";
};

using journal_actor = caf::stateful_actor<journal_state, counted_actor<actor_kind::journal>>;

void fail_stop(journal_state& st, const std::string& msg) {
  st.failed = true;
  if (st.cfg.fatal) {
    spdlog::error("journal write failed: {}", msg);
    st.cfg.fatal(msg);
    return;
  }
  spdlog::critical("journal write failed, node fail-stops: {}", msg);
  spdlog::shutdown();
  std::_Exit(70);
}

/// Writes every staged append with one synced write, then acknowledges them in order.
void flush(journal_actor* self) {
  auto& st = self->state;
  if (st.failed || st.staged.empty())
    return;
  auto& ops = st.ops;
  ops.clear();
  ops.reserve(st.staged_entries + st.staged_deletes + 1);
  for (auto& a : st.staged) {
    for (const auto& d : a.batch.deletes) {
      auto& op = ops.emplace_back();
      op.root_id = d.root_id;
      if (d.last_root_id != 0) {
        op.what = store_op::kind::delete_trees;
        op.last_root_id = d.last_root_id;
        continue;
      }
      op.what = store_op::kind::delete_range;
      op.from_lsn = d.from_lsn;
      op.lsn = d.before_lsn == 0 ? a.first_lsn : d.before_lsn;
    }
    auto lsn = a.first_lsn;
    for (auto& e : a.batch.entries) {
      auto& op = ops.emplace_back();
      op.root_id = e.root_id;
      op.lsn = e.at_lsn != 0 ? e.at_lsn : lsn++;
      op.value = std::move(e.record);
    }
  }
  // Written after the deletes, so even a delete of the meta tree cannot remove it.
  if (st.staged_deletes > 0 && st.cfg.next_id) {
    auto& op = ops.emplace_back();
    op.root_id = journal_keys::meta_root;
    op.lsn = journal_keys::id_floor_lsn;
    op.value = id_floor_record(st.cfg.next_id->load(), st.next_lsn);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto status = st.cfg.store->write(ops);
  auto us = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
      .count());
  ops.clear();
  auto entries = std::exchange(st.staged_entries, 0);
  auto deletes = std::exchange(st.staged_deletes, 0);
  if (!status.ok()) {
    // The promises are dropped undelivered: their requesters time out, never see an ack.
    st.staged.clear();
    fail_stop(st, status.ToString());
    return;
  }
  if (st.cfg.durable_lsn)
    st.cfg.durable_lsn->store(st.next_lsn - 1, std::memory_order_relaxed);
  st.stats.batches += 1;
  st.stats.records += entries;
  st.stats.range_deletes += deletes;
  st.stats.last_batch_size = st.staged.size();
  st.stats.fsync_us_last = us;
  st.stats.fsync_us_total += us;
  st.stats.fsync_us_max = std::max(st.stats.fsync_us_max, us);
  st.stats.slow_writes += us > slow_write_us ? 1 : 0;
  auto bucket = std::lower_bound(sync_bucket_us.begin(), sync_bucket_us.end(), us);
  ++st.stats.sync_buckets[static_cast<size_t>(bucket - sync_bucket_us.begin())];
  for (auto& a : st.staged) {
    if (a.tagged_sender)
      self->send(a.tagged_sender, appended_atom::value, a.tag, uint64_t{a.last_lsn});
    else
      a.rp.deliver(uint64_t{a.last_lsn});
  }
  st.staged.clear();
}

/// Assigns the batch its LSNs and stages it for the next synced write.
staged_append& stage(journal_actor* self, journal_batch&& batch) {
  auto& st = self->state;
  auto& a = st.staged.emplace_back();
  a.first_lsn = st.next_lsn;
  st.next_lsn +=
    static_cast<uint64_t>(std::count_if(batch.entries.begin(), batch.entries.end(),
                                        [](const journal_entry& e) { return e.at_lsn == 0; }));
  a.last_lsn = st.next_lsn - 1;
  st.staged_entries += batch.entries.size();
  st.staged_deletes += batch.deletes.size();
  a.batch = std::move(batch);
  if (!st.flush_scheduled) {
    st.flush_scheduled = true;
    self->send(self, flush_atom::value);
  }
  return a;
}

caf::behavior journal_impl(journal_actor* self, journal_config cfg) {
  // RocksDB counts every key comparison in thread-local perf counters unless told not to;
  // on this (detached) writer thread that was a tenth of the memtable inserts' time.
  rocksdb::SetPerfLevel(rocksdb::PerfLevel::kDisable);
  auto& st = self->state;
  st.next_lsn = cfg.next_lsn;
  st.cfg = std::move(cfg);
  // Appends already received are flushed before a (trappable) exit, so a clean shutdown
  // acknowledges everything it accepted.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    if (!msg.reason)
      return;
    flush(self);
    self->quit(msg.reason);
  });
  return {
    [self](append_atom, journal_batch& batch) -> caf::typed_response_promise<uint64_t> {
      auto& st = self->state;
      // Taking the promise answers the request; dropping it sends nothing.
      auto rp = self->make_response_promise<uint64_t>();
      if (st.failed)
        return rp;
      stage(self, std::move(batch)).rp = rp;
      return rp;
    },
    [self](append_atom, journal_batch& batch, uint64_t tag) {
      auto& st = self->state;
      auto sender = caf::actor_cast<caf::actor>(self->current_sender());
      if (st.failed || !sender)
        return;
      auto& a = stage(self, std::move(batch));
      a.tagged_sender = std::move(sender);
      a.tag = tag;
    },
    [self](flush_atom) {
      self->state.flush_scheduled = false;
      flush(self);
    },
    [self](read_tree_atom, uint64_t root_id) -> caf::result<journal_records> {
      auto& st = self->state;
      flush(self);
      if (st.failed)
        return caf::make_error(caf::sec::runtime_error, "journal failed: node fail-stops");
      journal_records out;
      auto status = st.cfg.store->read_tree(root_id, &out);
      if (!status.ok())
        return caf::make_error(caf::sec::runtime_error, status.ToString());
      return out;
    },
    [self](journal_stats_atom) {
      auto stats = self->state.stats;
      stats.next_lsn = self->state.next_lsn;
      return stats;
    },
  };
}

}  // namespace

caf::actor spawn_journal(caf::actor_system& sys, journal_config cfg) {
  return sys.spawn<caf::detached>(journal_impl, std::move(cfg));
}

}  // namespace proctor
