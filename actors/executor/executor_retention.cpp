// How the executor keeps finished trees and lets them go: a finished tree's result is kept
// for executor_config::result_ttl, then released. Its journal records are deleted in two
// steps: soon after it ends, everything but its summary (collect_finished), and when it is
// released, the summary too (release_trees).
//
// Both use range deletes that cover a run of neighbouring trees at once. One range delete
// per tree put a RocksDB range tombstone per procedure into the memtable, and when RocksDB
// switches memtables it fragments all of them on the writing thread: some 12 ms at 29k
// trees/s (proctor-bench (c)), with every journal write waiting.
#include <algorithm>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include <proctor/journal.pb.h>

#include "actors/executor/internal/executor_state.hpp"

namespace proctor::exec_detail {

namespace {

/// Splits the sorted `ids` into runs [first, last] of neighbours: no id between two trees of
/// a run is in use, and none are more than `max_gap` apart (which bounds the checks).
template <class InUse>
std::vector<std::pair<uint64_t, uint64_t>> runs_of(const std::vector<uint64_t>& ids, InUse in_use) {
  constexpr uint64_t max_gap = 256;
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto lo = ids[i];
    while (i + 1 < ids.size() && ids[i + 1] - ids[i] <= max_gap) {
      bool clear = true;
      for (auto g = ids[i] + 1; g < ids[i + 1] && clear; ++g)
        clear = !in_use(g);
      if (!clear)
        break;
      ++i;
    }
    out.emplace_back(lo, ids[i]);
  }
  return out;
}

journal_batch::range_delete whole_trees(uint64_t first, uint64_t last) {
  journal_batch::range_delete d;
  d.root_id = first;
  d.last_root_id = last;
  return d;
}

std::vector<uint64_t> sorted_unique(std::vector<uint64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace

void drop_tree(executor_actor* self, uint64_t root_id) {
  auto& st = self->state;
  auto i = st.procs.find(root_id);
  if (i == st.procs.end())
    return;
  std::vector<uint64_t> todo{root_id};
  while (!todo.empty()) {
    auto id = todo.back();
    todo.pop_back();
    auto j = st.procs.find(id);
    if (j == st.procs.end())
      continue;
    for (auto c : j->second.children())
      todo.push_back(c);
    if (j->second.live_since_ns != 0)
      --st.live;
    st.procs.erase(j);
  }
  if (auto k = st.retention.history_kept.find(root_id); k != st.retention.history_kept.end()) {
    st.retention.history_kept_records -= k->second.records;
    st.retention.history_kept.erase(k);
  }
  // Queue entries of trees gone: those in front go now (they end and expire in about the
  // same order), the others when the budget reaches them.
  while (!st.retention.history_order.empty()) {
    auto k = st.retention.history_kept.find(st.retention.history_order.front().first);
    if (k != st.retention.history_kept.end()
        && k->second.seq == st.retention.history_order.front().second)
      break;
    st.retention.history_order.pop_front();
  }
  // The links of a resubmit live as long as the new root's records (which hold them): as
  // after a restart.
  st.resubmitted_as.erase(root_id);
  st.resubmit_lsn.erase(root_id);
  if (auto f = st.resubmitted_from.find(root_id); f != st.resubmitted_from.end()) {
    st.resubmitted_as.erase(f->second);
    st.resubmitted_from.erase(f);
  }
  auto r = st.roots.find(root_id);
  if (r != st.roots.end()) {
    forget_wake_volume(st, r->second);
    if (!r->second.nonce.empty()) {
      st.nonces.erase(r->second.nonce);
      root_nonce_dropped(self, r->second.nonce);
    }
    st.roots.erase(r);
  }
}

void expire_after(executor_actor* self, uint64_t root_id, std::chrono::milliseconds after) {
  auto& st = self->state;
  after = std::max(after, std::chrono::milliseconds{0});
  auto at = std::chrono::steady_clock::now() + after;
  st.retention.expiries.push(expiry{at, root_id});
  if (st.recovery.active || at >= st.retention.expiry_armed_for)
    return;  // the armed timer comes first
  st.retention.expiry_armed_for = at;
  self->delayed_send(self, after + expiry_slack(st.cfg), expire_atom::value,
                     ++st.retention.expiry_token);
}

/// The expiry timer: releases every tree whose result is due, then arms for the next.
void on_expiry_timer(executor_actor* self, uint64_t token) {
  auto& st = self->state;
  if (token != st.retention.expiry_token)
    return;
  st.retention.expiry_armed_for = std::chrono::steady_clock::time_point::max();
  auto now = std::chrono::steady_clock::now();
  std::vector<uint64_t> due;
  while (!st.retention.expiries.empty() && st.retention.expiries.top().at <= now) {
    auto root_id = st.retention.expiries.top().root_id;
    st.retention.expiries.pop();
    auto r = st.roots.find(root_id);
    if (r != st.roots.end() && r->second.finished)
      due.push_back(root_id);
  }
  release_trees(self, std::move(due));
  if (st.retention.expiries.empty())
    return;
  auto next = st.retention.expiries.top().at;
  st.retention.expiry_armed_for = next;
  self->delayed_send(
    self, std::chrono::duration_cast<std::chrono::milliseconds>(next - now) + expiry_slack(st.cfg),
    expire_atom::value, ++st.retention.expiry_token);
}

std::chrono::milliseconds expiry_slack(const executor_config& cfg) {
  // Up to a tenth of the TTL late (at most 100 ms): the trees due meanwhile are released
  // together, and neighbours among them share one range delete.
  return std::clamp(cfg.result_ttl / 10, std::chrono::milliseconds{1},
                    std::chrono::milliseconds{100});
}

void release_trees(executor_actor* self, std::vector<uint64_t> ids, std::function<void()> then) {
  auto& st = self->state;
  if (ids.empty())
    return;
  ids = sorted_unique(std::move(ids));
  for (auto id : ids) {
    drop_tree(self, id);
    st.retention.collectable.erase(id);  // its records go now, summary included
  }
  // An id between two released trees may be covered only if nothing can have records under
  // it: not a tree still known (running, waiting, finished and kept, quarantined), not a
  // procedure of one, not a root whose Submitted record is on its way. What is left are
  // children (their records live under their root's id) and trees released earlier.
  auto in_use = [&st](uint64_t g) {
    return st.roots.contains(g) || st.procs.contains(g) || st.submitting.contains(g);
  };
  journal_batch b;
  for (auto [lo, hi] : runs_of(ids, in_use))
    b.deletes.push_back(whole_trees(lo, hi));
  spdlog::debug("released {} finished tree(s) with {} range delete(s)", ids.size(),
                b.deletes.size());
  if (!then)
    return append(self, std::move(b));
  append(self, std::move(b), [then = std::move(then)](uint64_t) { then(); });
}

void keep_history(executor_actor* self, uint64_t root_id, std::string summary, uint64_t records) {
  auto& st = self->state;
  const auto budget = st.cfg.history_keep_records;
  if (auto old = st.retention.history_kept.find(root_id); old != st.retention.history_kept.end()) {
    st.retention.history_kept_records -= old->second.records;  // ended again: this end replaces it
    st.retention.history_kept.erase(old);
  }
  if (records > budget)
    return collect_later(self, root_id, std::move(summary));
  auto seq = ++st.retention.history_seq;
  st.retention.history_kept[root_id] = {std::move(summary), records, seq};
  st.retention.history_order.emplace_back(root_id, seq);
  st.retention.history_kept_records += records;
  while (st.retention.history_kept_records > budget && !st.retention.history_order.empty()) {
    auto [root, s] = st.retention.history_order.front();
    st.retention.history_order.pop_front();
    auto k = st.retention.history_kept.find(root);
    if (k == st.retention.history_kept.end() || k->second.seq != s)
      continue;  // released or expired meanwhile, or ended again later
    st.retention.history_kept_records -= k->second.records;
    auto sum = std::move(k->second.summary);
    st.retention.history_kept.erase(k);
    if (auto r = st.roots.find(root); r != st.roots.end() && r->second.finished)
      collect_later(self, root, std::move(sum));
  }
}

void collect_later(executor_actor* self, uint64_t root_id, std::string summary) {
  auto& st = self->state;
  st.retention.collectable[root_id] = std::move(summary);
  if (!st.recovery.active)  // else once the take-over ends: the journal is not there yet
    collect_soon(self);
}

void collect_soon(executor_actor* self) {
  auto& st = self->state;
  if (st.retention.collectable.size() >= collect_max) {
    collect_finished(self);
    return;
  }
  if (st.retention.collect_armed)
    return;
  st.retention.collect_armed = true;
  self->delayed_send(self, st.cfg.collect_after, collect_atom::value);
}

void collect_finished(executor_actor* self) {
  auto& st = self->state;
  st.retention.collect_armed = false;
  if (st.retention.collectable.empty())
    return;
  std::vector<uint64_t> ids;
  ids.reserve(st.retention.collectable.size());
  for (const auto& [id, summary] : st.retention.collectable)
    ids.push_back(id);
  std::sort(ids.begin(), ids.end());  // map keys: unique already
  // As for release_trees, but the trees collected now are not in use, nor are their
  // procedures: their records go, and the same batch writes their summaries again (after
  // the deletes, so with newer sequence numbers: the range tombstones do not cover them).
  auto in_use = [&st](uint64_t g) {
    if (st.submitting.contains(g))
      return true;
    if (auto p = st.procs.find(g); p != st.procs.end())
      return !st.retention.collectable.contains(p->second.root_id);
    return st.roots.contains(g);
  };
  journal_batch b;
  for (auto [lo, hi] : runs_of(ids, in_use))
    b.deletes.push_back(whole_trees(lo, hi));
  b.entries.reserve(ids.size());
  for (auto id : ids)
    b.entries.push_back(journal_entry{id, std::move(st.retention.collectable[id])});
  spdlog::debug("collected the records of {} finished tree(s) with {} range delete(s)", ids.size(),
                b.deletes.size());
  st.retention.collectable.clear();
  append(self, std::move(b));
}

}  // namespace proctor::exec_detail
