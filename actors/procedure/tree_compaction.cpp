// A tree's journal compacted into one record (persistence/tree_snapshot.hpp; docs/flow-control.md,
// "Self-compacting trees"). Every append of the tree's actors counts its records in the count
// they share; past the tree's threshold the root reads the tree, folds it, and writes the fold
// as one TreeSnapshot at the LSN of the last record read, in one batch with the range delete of
// the records before it. The tree goes on meanwhile: what it appends after the read stays and
// folds on top of the snapshot. The compaction is an equivalent rewrite, so a crash on either
// side of its write leaves a journal that reads back the same.
#include "actors/base/errors.hpp"
#include "actors/procedure/internal/procedure_actor_state.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/tree_snapshot.hpp"

namespace proctor {

namespace {

/// A snapshot larger than this is not written. A tree of many procedures with few records
/// each (a wide fan-out) gains little from one, and each compaction writes its whole image:
/// the cap bounds what a compaction costs; such a tree is asked again only once its records
/// have doubled.
constexpr size_t max_snapshot_bytes = size_t{8} << 20;

/// Takes `n` records off the count, never below one (records the executor appends to the
/// tree, an event's delivery, a remote end, are not counted: the fold counted them).
void take_off(tree_journal_count& c, uint64_t n) {
  auto cur = c.records.load();
  while (!c.records.compare_exchange_weak(cur, cur > n ? cur - n : 1)) {
  }
}

}  // namespace

void count_tree_records(proc_actor* self, const journal_batch& batch) {
  auto& st = self->state;
  auto* c = st.tree_records.get();
  if (c == nullptr)
    return;
  uint64_t n = 0;
  for (const auto& e : batch.entries)
    n += e.root_id == st.root_id && e.at_lsn == 0 ? 1 : 0;
  if (n == 0)
    return;
  auto total = c->records.fetch_add(n) + n;
  if (c->threshold == 0 || total < c->next_at || c->compacting.exchange(true))
    return;
  self->send(st.root, compact_atom::value);
}

void compact_tree(proc_actor* self) {
  auto& st = self->state;
  auto c = st.tree_records;
  if (!st.is_root || !c)
    return;
  // A failing tree ends with its rollback, whose summary replaces all of it: left as it is,
  // its undone steps keep ordering the rollback of fragments elsewhere (tree_rollback.cpp,
  // parent_step_between). `compacting` stays set: nothing asks again.
  if (st.finishing || st.rollback.failing || st.rollback.image)
    return;
  self->request(st.env->journal, caf::infinite, read_tree_atom::value, st.root_id)
    .then(
      [self, c](journal_records& recs) {
        auto& st = self->state;
        if (st.finishing || st.rollback.failing || st.rollback.image)
          return;
        tree_folder f(st.root_id);
        for (const auto& r : recs)
          if (r.root_id == st.root_id)
            f.add(r.lsn, r.value);
        const auto& img = f.unfinished();
        if (!img.corrupt.empty() || img.failed || img.finished || img.records < 2
            || img.procs.find(st.root_id) == img.procs.end()) {
          if (!img.corrupt.empty())
            PLOG(error, self, "not compacting a damaged tree: {}", img.corrupt);
          c->next_at = c->records.load() + c->threshold;  // not asked again at each append
          c->compacting = false;
          return;
        }
        const auto folded = img.last_lsn;
        const auto replaced = img.records - 1;  // the records up to `folded` become one
        pb::JournalRecord rec;
        *rec.mutable_snapshot() = snapshot_of(img, wall_ms());
        const auto compactions = rec.snapshot().compactions();
        const auto bytes = rec.ByteSizeLong();
        if (bytes > max_snapshot_bytes) {
          auto now = c->records.load();
          c->next_at = std::max(2 * now, now + c->threshold);
          c->compacting = false;
          PLOG(info, self,
               "tree not compacted: its {} records would fold into one of {} bytes, over the "
               "{} bytes a compaction writes; asked again at {} records",
               img.records, bytes, max_snapshot_bytes, c->next_at.load());
          return;
        }
        journal_batch batch;
        batch.deletes.push_back({st.root_id, 0, folded, 0});
        auto e = make_entry(st.root_id, rec);
        e.at_lsn = folded;
        batch.entries.push_back(std::move(e));
        journal_append(self, std::move(batch), [self, c, replaced, folded, compactions, bytes] {
          auto& st = self->state;
          take_off(*c, replaced);
          c->next_at = c->threshold;
          c->compacting = false;
          st.env->compactions.fetch_add(1, std::memory_order_relaxed);
          // Each of the `replaced + 1` records went (record `folded` was overwritten).
          st.env->compacted_records.fetch_add(replaced + 1, std::memory_order_relaxed);
          PLOG(info, self,
               "tree compacted: {} records up to lsn {} folded into one of {} bytes "
               "(compaction {})",
               replaced + 1, folded, bytes, compactions);
        });
      },
      [self, c](caf::error& e) {
        c->next_at = c->records.load() + c->threshold;
        c->compacting = false;
        PLOG(warn, self, "tree not compacted: journal read failed: {}",
             error_text(self->system(), e));
      });
}

}  // namespace proctor
