// The peers' progress and this node's as they saw it (internal/peer_progress.hpp; docs/cluster.md,
// "Procedure ids" and "A journal restored from a copy").
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/base/cluster_view.hpp"
#include "actors/base/leader_fence.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/id_floor.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

static_assert(peer_progress_part::fresh_gap == fresh_id_gap, "one gap, whoever reported");

namespace {

/// Journals peer `name`'s progress when it moved enough since its last record (or has none):
/// 2^16 ids, another incarnation, or 5 s since the last one.
void maybe_journal(executor_actor* self, const std::string& name, peer_progress_entry& e) {
  if (e.writing)
    return;
  const auto& j = e.journaled;
  const bool moved = e.next_id != j.next_id() || e.incarnation != j.incarnation()
                     || e.journal_lsn != j.journal_lsn();
  if (!moved)
    return;
  const auto now = wall_ms();
  const bool due = e.record_lsn == 0 || e.incarnation != j.incarnation()
                   || e.next_id >= j.next_id() + peer_progress_part::journal_ids
                   || now - j.at_ms() >= peer_progress_part::journal_ms;
  if (!due)
    return;
  pb::JournalRecord rec;
  auto* p = rec.mutable_peer_progress();
  p->set_peer(name);
  p->set_next_id(e.next_id);
  p->set_incarnation(e.incarnation);
  p->set_journal_lsn(e.journal_lsn);
  p->set_at_ms(now);
  journal_batch b;
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  if (e.record_lsn != 0)
    b.deletes.push_back({journal_keys::meta_root, e.record_lsn, e.record_lsn + 1, 0});
  e.writing = true;
  append(self, std::move(b), [self, name, written = *p](uint64_t lsn) {
    auto& e = self->state.progress.peers[name];
    e.writing = false;
    e.record_lsn = lsn;
    e.journaled = written;
  });
}

/// Ids may be handed out: where they begin is journaled (the IdFloor record: a restart reads
/// it back, and, its journal no longer new, asks nobody again), then the requests held for
/// them are handled.
void release_ids(executor_actor* self) {
  auto& st = self->state;
  auto& pp = st.progress;
  if (pp.releasing)
    return;
  pp.releasing = true;
  // (Its next_lsn never below one written with a delete before: those are durable already.)
  journal_batch b;
  b.entries.push_back(
    journal_entry{journal_keys::meta_root,
                  id_floor_record(st.env->next_id->load(), st.env->durable_lsn->load() + 1),
                  journal_keys::id_floor_lsn});
  append(self, std::move(b), [self](uint64_t) {
    auto& pp = self->state.progress;
    pp.holding = false;
    auto held = std::move(pp.held);
    pp.held.clear();
    for (auto& h : held)
      handle_request(self, h.bytes, std::move(h.rp));
  });
}

/// True when a peer echoed where this incarnation's ids begin (`floor`), or none echoed
/// anything (a peer of an older release, or no answer at all: nothing to wait for).
bool base_echoed(const peer_progress_part& pp, uint64_t floor) {
  if (pp.echoed.empty())
    return true;
  return std::any_of(pp.echoed.begin(), pp.echoed.end(),
                     [floor](const auto& e) { return e.second >= floor; });
}

/// Raises the next id to at least `floor`.
uint64_t raise_next_id(node_env& env, uint64_t floor) {
  auto cur = env.next_id->load();
  while (cur < floor && !env.next_id->compare_exchange_weak(cur, floor)) {
  }
  return std::max(cur, floor);
}

}  // namespace

void progress_recovered(executor_actor* self,
                        std::map<std::string, recovered_peer_progress>& records) {
  auto& peers = self->state.progress.peers;
  for (auto& [name, r] : records) {
    auto& e = peers[name];
    e.next_id = r.rec.next_id();
    e.incarnation = r.rec.incarnation();
    e.journal_lsn = r.rec.journal_lsn();
    e.record_lsn = r.lsn;
    e.journaled = std::move(r.rec);
  }
}

void progress_start(executor_actor* self) {
  auto& st = self->state;
  auto& pp = st.progress;
  if (!st.env->new_journal)
    return;
  for (const auto& [num, n] : st.env->cluster->peer_numbers())
    pp.awaited.insert(n);
  if (pp.awaited.empty())
    return;
  pp.holding = true;
  pp.awaiting_since_ms = wall_ms();
  spdlog::info("node {}: a new journal: it hands out no procedure id before its peers said "
               "where the ids of this name's earlier incarnations ended (at most {} s); "
               "asking {}",
               st.env->node_name, peer_progress_part::answer_bound.count(), comma_list(pp.awaited));
  self->delayed_send(self, peer_progress_part::answer_bound, progress_hold_atom::value);
}

void fill_progress(executor_actor* self, const std::string& from, pb::NodeInfo& info) {
  auto& st = self->state;
  info.set_next_id(st.env->next_id->load());
  info.set_journal_lsn(st.env->durable_lsn->load());
  auto i = st.progress.peers.find(from);
  if (i == st.progress.peers.end())
    return;
  info.set_your_next_id(i->second.next_id);
  info.set_your_incarnation(i->second.incarnation);
  info.set_your_journal_lsn(i->second.journal_lsn);
}

void fill_forgotten(executor_actor* self, const std::string& from, pb::NodeInfo& info) {
  if (auto s = self->state.env->cluster->get(from); s && s->forgotten_at_ms != 0) {
    info.set_your_forgotten_incarnation(s->forgotten_incarnation);
    info.set_your_forgotten_at_ms(s->forgotten_at_ms);
  }
}

void progress_heard(executor_actor* self, const peer_status& s) {
  auto& st = self->state;
  auto& pp = st.progress;
  if (!s.heard)
    return;
  // What it says of itself: kept, the highest of each.
  auto& e = pp.peers[s.name];
  e.next_id = std::max(e.next_id, s.next_id);
  if (s.incarnation != 0 && s.incarnation != e.incarnation) {
    e.incarnation = s.incarnation;
    e.journal_lsn = s.journal_lsn;
  } else {
    e.journal_lsn = std::max(e.journal_lsn, s.journal_lsn);
  }
  maybe_journal(self, s.name, e);
  // What it says of this node. Its figures for this incarnation are ones this node reported,
  // never above what its journal holds: unless this journal is a copy, restored after the
  // node had gone further.
  // (Not on a replica that is not sure it leads: a deposed leader, thawed, may hear what the
  // new leader wrote before it steps down and re-executes as a follower.)
  const auto mine = st.env->incarnation;
  if (mine != 0 && s.heard_incarnation == mine && leader_fence::open()
      && s.heard_journal_lsn > st.env->durable_lsn->load()) {
    ++pp.refused_restores;
    spdlog::critical(
      "node {}: this journal is older than what node {} saw of it: its last durable LSN is {}, "
      "node {} heard LSN {} from this incarnation ({:016x}). It was restored from a copy made "
      "before the node went further: the work acknowledged after the copy is lost, and its "
      "procedure ids would be handed out again. Not serving. To go on, restore a newer copy; or "
      "declare this node lost on every peer (proctor node forget {} --confirm-lost) and start it "
      "on an empty data directory, empty or with --restore-from a backup (`proctor backup`): "
      "a new incarnation, whose ids begin above the old ones (docs/operations.md, \"Backups\")",
      st.env->node_name, s.name, st.env->durable_lsn->load(), s.name, s.heard_journal_lsn, mine,
      st.env->node_name);
    spdlog::shutdown();
    std::_Exit(1);
  }
  if (mine != 0 && s.heard_forgotten_incarnation == mine && leader_fence::open()
      && !pp.forgotten_noted) {
    // An operator of that peer forgot this very journal (issue 46.11): what it holds was
    // declared lost there and undone elsewhere. Journaled, so that no start carries it on,
    // then the node stops.
    pp.forgotten_noted = true;
    pb::JournalRecord rec;
    auto* f = rec.mutable_forgotten_by();
    f->set_peer(s.name);
    f->set_incarnation(mine);
    f->set_forgotten_at_ms(s.heard_forgotten_at_ms);
    f->set_at_ms(wall_ms());
    journal_batch b;
    b.entries.push_back(make_entry(journal_keys::meta_root, rec));
    auto say = [self, peer = s.name, at = s.heard_forgotten_at_ms, mine](bool journaled) {
      spdlog::critical("{}", journal_forgotten_text(self->state.env->node_name, peer, mine, at)
                               + (journaled ? "" : " (recording it failed: stop this node)"));
      spdlog::shutdown();
      std::_Exit(1);
    };
    self->request(st.env->journal, std::chrono::seconds{30}, append_atom::value, std::move(b))
      .then([say](uint64_t) { say(true); }, [say](caf::error&) { say(false); });
    return;
  }
  if (!st.env->new_journal)
    return;  // (its ids carry on from its own journal)
  if (s.next_id == 0) {
    // A peer of a release that keeps no such figures: nothing to learn from it.
    if (pp.awaited.erase(s.name) > 0)
      spdlog::warn("node {}: node {} keeps no procedure ids of its peers (an older release): "
                   "ids are learned from the other peers only",
                   st.env->node_name, s.name);
  } else {
    if (pp.floor_taken.insert(s.name).second && s.heard_next_id > 0) {
      auto before = st.env->next_id->load();
      auto from = raise_next_id(*st.env, s.heard_next_id + peer_progress_part::fresh_gap);
      if (pp.holding || before >= from)
        spdlog::info("node {}: node {} heard ids up to {} from this name's earlier "
                     "incarnations: ids begin at {} or above",
                     st.env->node_name, s.name, s.heard_next_id, from);
      else
        spdlog::error("node {}: node {} answered only now (after the {} s its peers had): it "
                      "heard ids up to {} from this name's earlier incarnations, so ids below {} "
                      "handed out meanwhile may repeat some of theirs; ids begin at {} from now "
                      "on",
                      st.env->node_name, s.name, peer_progress_part::answer_bound.count(),
                      s.heard_next_id, before, from);
    }
    pp.echoed[s.name] = s.heard_next_id;
    pp.awaited.erase(s.name);
  }
  if (!pp.holding || !pp.awaited.empty())
    return;
  // Every peer answered; one must have heard where this incarnation's ids begin, so that the
  // next incarnation learns it (with none that echoes, answer_bound ends the wait).
  const auto floor = st.env->next_id->load();
  if (!base_echoed(pp, floor))
    return;
  spdlog::info("node {}: every peer answered in {} ms: procedure ids begin at {}",
               st.env->node_name, wall_ms() - pp.awaiting_since_ms, floor);
  release_ids(self);
}

bool hold_for_ids(executor_actor* self, const pb::Request& req, const std::string& bytes,
                  promise_t& rp) {
  auto& pp = self->state.progress;
  if (!pp.holding)
    return false;
  switch (req.body_case()) {
    case pb::Request::kSubmit:
    case pb::Request::kResubmit:
    case pb::Request::kPeer:      // (a child placed here: its own children need ids)
    case pb::Request::kSchedule:  // (a schedule added now could fire meanwhile)
      break;
    default:
      return false;
  }
  pp.held.push_back({bytes, std::move(rp)});
  return true;
}

void progress_bound(executor_actor* self) {
  auto& st = self->state;
  auto& pp = st.progress;
  if (!pp.holding)
    return;
  const auto floor = st.env->next_id->load();
  if (!pp.awaited.empty())
    spdlog::warn("node {}: no answer from {} within {} s: procedure ids begin at {} without "
                 "their word (should one of them know of an earlier incarnation of this name "
                 "that handed out more, some ids may repeat; its answer, when it comes, raises "
                 "the next ones)",
                 st.env->node_name, comma_list(pp.awaited),
                 peer_progress_part::answer_bound.count(), floor);
  else if (pp.echoed.empty() || !base_echoed(pp, floor))
    spdlog::warn("node {}: no peer echoed where this incarnation's ids begin within {} s: "
                 "ids begin at {}",
                 st.env->node_name, peer_progress_part::answer_bound.count(), floor);
  release_ids(self);
}

}  // namespace proctor::exec_detail
