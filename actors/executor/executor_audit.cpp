// The audit trail (docs/security.md, "Audit"): an act a client asked is journaled with who
// asked before it is done, and its outcome before the client hears it. A node that stops
// in between keeps a record without an outcome: the act may or may not have been done (its
// procedure's own records say which), and nobody was told it was.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/base/audit.hpp"
#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

namespace {

/// Deletes, in `b`, the records past --audit-keep-days or beyond the newest
/// max_audit_records (dropped from the part too).
void trim(executor_actor* self, int64_t now_ms, journal_batch& b) {
  auto& items = self->state.audit.items;
  const int64_t keep_ms =
    std::chrono::duration_cast<std::chrono::milliseconds>(self->state.cfg.audit_keep).count();
  while (!items.empty()
         && (items.size() > max_audit_records || items.front().rec.at_ms() + keep_ms < now_ms)) {
    auto lsn = items.front().lsn;
    b.deletes.push_back({journal_keys::meta_root, lsn, lsn + 1, 0});
    items.pop_front();
  }
}

audit_part::item* find_item(executor_actor* self, uint64_t first_lsn) {
  auto& items = self->state.audit.items;
  auto i = std::lower_bound(items.begin(), items.end(), first_lsn,
                            [](const audit_part::item& x, uint64_t l) { return x.first_lsn < l; });
  return i != items.end() && i->first_lsn == first_lsn ? &*i : nullptr;
}

/// Journals the outcome of the act first journaled at `first_lsn` (its record replaced),
/// then answers `rp` with `answer`.
void record_outcome(executor_actor* self, uint64_t first_lsn, std::string outcome,
                    std::string answer, promise_t rp) {
  auto* it = find_item(self, first_lsn);
  if (it == nullptr)  // dropped meanwhile (beyond the newest max_audit_records)
    return reply(rp, std::move(answer));
  pb::JournalRecord rec;
  auto* e = rec.mutable_audit();
  *e = it->rec;
  e->set_outcome(std::move(outcome));
  e->set_answered_at_ms(wall_ms());
  e->set_first_lsn(first_lsn);
  journal_batch b;
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  b.deletes.push_back({journal_keys::meta_root, it->lsn, it->lsn + 1, 0});
  append(
    self, std::move(b),
    [self, first_lsn, done = rec.audit(), answer = std::move(answer), rp](uint64_t lsn) mutable {
      if (auto* x = find_item(self, first_lsn)) {
        x->lsn = lsn;
        x->rec = std::move(done);
      }
      reply(rp, std::move(answer));
    });
}

}  // namespace

bool audit_then_act(executor_actor* self, const pb::Request& req, const std::string& bytes,
                    promise_t& rp, const caf::actor& doer) {
  auto& st = self->state;
  // A request no door said who sent comes from inside the process (an embedding program's
  // own calls to the executor, the tests'): it is not a client's act. Every door stamps the
  // requests it audits (actors/base/audit.hpp).
  if (!req.has_actor() || !audited(req, st.cfg.audit_submits))
    return false;
  const auto now = wall_ms();
  pb::JournalRecord rec;
  *rec.mutable_audit() = audit_entry_of(req, now);
  journal_batch b;
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  trim(self, now, b);
  append(self, std::move(b), [self, bytes, entry = rec.audit(), rp, doer](uint64_t lsn) mutable {
    auto& items = self->state.audit.items;
    items.push_back(audit_part::item{lsn, lsn, entry});
    spdlog::info("audit: {} asked {}{}{} from {}", entry.who(), entry.act(),
                 entry.proc_id() != 0 ? " of procedure " + std::to_string(entry.proc_id()) : "",
                 entry.detail().empty() ? "" : " (" + entry.detail() + ")", entry.address());
    // Done as a request to this executor, so that its answer comes back here first. Its bound
    // is the asker's, as for every request the executor answers: the client door's sweep
    // (client_server.cpp), the HTTP API's ask; past it the asker hears INTERNAL and the
    // record stays without an outcome. (A CAF 0.17 request timeout would stay in the clock
    // for its whole length after the answer, for each event: client_server.cpp.)
    auto done = [self, lsn, rp](std::string& answer) mutable {
      pb::Response r;
      auto outcome = r.ParseFromString(answer) ? audit_outcome(r) : "an answer not understood";
      record_outcome(self, lsn, std::move(outcome), std::move(answer), rp);
    };
    auto failed = [self, lsn, rp](caf::error& e) mutable {
      auto why = "the act failed: " + error_text(self->system(), e);
      spdlog::error("audit: the act journaled at lsn {}: {}", lsn, why);
      record_outcome(self, lsn, "INTERNAL: " + why, error_reply(pb::Response::INTERNAL, why), rp);
    };
    if (doer)
      self->request(doer, caf::infinite, rpc_atom::value, bytes).then(done, failed);
    else
      self->request(caf::actor_cast<caf::actor>(self), caf::infinite, audit_act_atom::value, bytes)
        .then(done, failed);
  });
  return true;
}

void act_audited(executor_actor* self, const std::string& bytes, promise_t rp) {
  pb::Request req;
  if (!req.ParseFromString(bytes))
    return reply(rp, error_reply(pb::Response::BAD_REQUEST, "malformed request payload"));
  run_request(self, req, bytes, rp);
}

void recover_audit(executor_actor* self, std::vector<recovered_audit>& found) {
  if (found.empty())
    return;
  auto& items = self->state.audit.items;
  for (auto& f : found)
    items.push_back(audit_part::item{f.lsn, f.rec.first_lsn() != 0 ? f.rec.first_lsn() : f.lsn,
                                     std::move(f.rec)});
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.first_lsn < b.first_lsn; });
  journal_batch b;
  trim(self, wall_ms(), b);
  if (!b.deletes.empty()) {
    spdlog::info("audit: {} record(s) past --audit-keep-days dropped", b.deletes.size());
    append(self, std::move(b));
  }
}

void answer_audit(executor_actor* self, const pb::AuditRequest& req, promise_t& rp) {
  const auto& items = self->state.audit.items;
  const size_t limit = req.limit() != 0 ? req.limit() : 1000;
  // The newest `limit` of those asked from `since` on (by the clock of the node that took
  // them: a clock set back does not hide one).
  std::vector<const pb::AuditEntry*> newest;
  for (auto i = items.rbegin(); i != items.rend() && newest.size() < limit; ++i)
    if (i->rec.at_ms() >= req.since_ms())
      newest.push_back(&i->rec);
  pb::Response r;
  for (auto i = newest.rbegin(); i != newest.rend(); ++i)
    *r.add_audit() = **i;
  reply(rp, encode(r));
}

void add_audit_history(const executor_actor* self, uint64_t id, pb::History* h) {
  bool added = false;
  for (const auto& i : self->state.audit.items) {
    if (i.rec.proc_id() != id)
      continue;
    auto* e = h->add_entries();
    e->set_lsn(i.first_lsn);
    e->set_kind("asked");
    e->set_at_ms(i.rec.at_ms());
    std::string d = i.rec.act() + " by " + i.rec.who();
    if (!i.rec.address().empty())
      d += " from " + i.rec.address();
    if (!i.rec.detail().empty())
      d += " (" + i.rec.detail() + ")";
    d += ": " + (i.rec.outcome().empty() ? std::string{"not answered"} : i.rec.outcome());
    e->set_detail(d);
    added = true;
  }
  if (added)
    std::stable_sort(
      h->mutable_entries()->begin(), h->mutable_entries()->end(),
      [](const pb::HistoryEntry& a, const pb::HistoryEntry& b) { return a.lsn() < b.lsn(); });
}

}  // namespace proctor::exec_detail
