#include "actors/executor/proc_history.hpp"

#include <algorithm>
#include <memory>
#include <string>

#include <proctor/journal.pb.h>
#include <proctor/proc_state.hpp>

#include "actors/base/task_spec.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

/// Names the states of one procedure type (numbers when the type is not registered here).
class state_namer {
public:
  state_namer(const registry& types, const std::string& type) {
    if (const auto* t = types.find(type); t != nullptr && t->make)
      inst_ = t->make();
  }
  std::string operator()(int32_t state) const {
    return inst_ ? inst_->state_name(state) : std::to_string(state);
  }

private:
  std::unique_ptr<procedure> inst_;
};

std::string end_text(pb::ProcState s, const std::string& result, const std::string& error) {
  std::string out = pb::ProcState_Name(s);
  if (!result.empty())
    out += " result " + result;
  if (!error.empty())
    out += ": " + error;
  return out;
}

/// What woke a procedure that waited since the Suspended record at `wait_lsn`: its deadline,
/// a call's reply, an event posted while it waited, or one posted before and kept for it
/// (docs/concepts.md, "Events").
std::string delivered_text(const pb::EventDelivered& s, uint64_t wait_lsn) {
  if (s.timed_out())
    return "deadline passed waiting for " + s.event_key();
  std::string d = "event " + s.event_key() + " payload " + s.payload_json();
  if (s.event_lsn() == 0)
    return d;
  d += " (the event at lsn " + std::to_string(s.event_lsn());
  if (s.event_lsn() < wait_lsn)
    return d + ", posted before it suspended: kept for it, consumed)";
  return d + ", posted while it waited: it woke it)";
}

}  // namespace

pb::History history_of(uint64_t id, const journal_records& records, const registry& types) {
  pb::History h;
  std::unique_ptr<state_namer> names;
  auto name = [&](int32_t s) { return names ? (*names)(s) : std::to_string(s); };
  auto add = [&](uint64_t lsn, const char* kind) {
    auto* e = h.add_entries();
    e->set_lsn(lsn);
    e->set_kind(kind);
    return e;
  };
  bool summary_only = false;
  uint64_t wait_lsn = 0;     // its last Suspended record
  int64_t last_step_ms = 0;  // when its last step committed (0: not recorded)
  /// "2026-12-02T11:59:30.000Z (30000 ms after its step)": when a wait ends, readable, and
  /// how long after the step that began it.
  auto when = [&](int64_t ms) {
    auto t = utc_ms_text(ms);
    if (last_step_ms > 0)
      t += " (" + std::to_string(ms - last_step_ms) + " ms after its step)";
    return t;
  };
  for (const auto& r : records) {
    pb::JournalRecord rec;
    if (!rec.ParseFromString(r.value)) {
      add(r.lsn, "unreadable")
        ->set_detail("a record that does not parse (the tree is quarantined)");
      continue;
    }
    switch (rec.body_case()) {
      case pb::JournalRecord::kSubmitted: {
        const auto& s = rec.submitted();
        if (s.proc_id() != id)
          break;
        names = std::make_unique<state_namer>(types, s.type());
        auto* e = add(r.lsn, "submitted");
        e->set_state(s.state());
        e->set_state_name(name(s.state()));
        e->set_at_ms(s.submitted_at_ms());
        std::string d = s.type() + " v" + std::to_string(s.type_version());
        if (!s.node().empty())
          d += ", runs on node " + s.node();
        if (!s.parent_node().empty())
          d += ", child of " + std::to_string(s.parent_id()) + " on node " + s.parent_node();
        if (s.resubmitted_from() != 0)
          d += ", resubmitted by an operator from ROLLEDBACK procedure "
               + std::to_string(s.resubmitted_from());
        e->set_detail(d);
        break;
      }
      case pb::JournalRecord::kStep: {
        const auto& s = rec.step();
        if (s.proc_id() != id)
          break;
        auto* e = add(r.lsn, "step");
        e->set_state(s.executed_state());
        e->set_state_name(name(s.executed_state()));
        e->set_next_state(s.next_state());
        e->set_next_state_name(name(s.next_state()));
        e->set_attempt(s.attempt());
        e->set_at_ms(s.committed_at_ms());
        e->set_took_us(s.took_us());
        last_step_ms = s.committed_at_ms();
        std::string d;
        if (s.children_size() > 0) {
          d = "spawned";
          for (auto c : s.children())
            d += " " + std::to_string(c);
        }
        if (s.past_no_return())
          d += std::string(d.empty() ? "" : "; ") + "past the point of no return";
        if (s.ended())
          d += std::string(d.empty() ? "" : "; ") + "done while its tree was failing";
        e->set_detail(d);
        break;
      }
      case pb::JournalRecord::kSuspended: {
        const auto& s = rec.suspended();
        if (s.proc_id() != id)
          break;
        wait_lsn = r.lsn;
        auto* e = add(r.lsn, "suspended");
        e->set_state(s.resume_state());
        e->set_state_name(name(s.resume_state()));
        std::string d = s.call_service().empty()            ? "event " + s.event_key()
                        : is_task_service(s.call_service()) ? call_wait_reason(s.call_service())
                                                            : "call to " + s.call_service();
        e->set_deadline_ms(s.deadline_ms());
        if (s.deadline_ms() != 0)
          d += ", deadline " + when(s.deadline_ms());
        if (s.has_timeout_state())
          d += ", on timeout " + name(s.timeout_state());
        e->set_detail(d);
        break;
      }
      case pb::JournalRecord::kTimer: {
        const auto& s = rec.timer();
        if (s.proc_id() != id)
          break;
        auto* e = add(r.lsn, "timer");
        e->set_state(s.resume_state());
        e->set_state_name(name(s.resume_state()));
        e->set_deadline_ms(s.wake_at_ms());
        e->set_detail("wakes at " + when(s.wake_at_ms()));
        break;
      }
      case pb::JournalRecord::kDelivered: {
        const auto& s = rec.delivered();
        if (s.proc_id() != id)
          break;
        add(r.lsn, "event")->set_detail(delivered_text(s, wait_lsn));
        break;
      }
      case pb::JournalRecord::kFailed: {
        const auto& s = rec.failed();
        if (s.proc_id() != id)
          break;
        auto* e = add(r.lsn, "failed");
        e->set_state(s.failed_state());
        e->set_state_name(s.failed_state() == 0 ? "" : name(s.failed_state()));
        e->set_at_ms(s.at_ms());
        e->set_detail(s.error());
        break;
      }
      case pb::JournalRecord::kUndone: {
        const auto& s = rec.undone();
        if (s.proc_id() != id)
          break;
        auto* e = add(r.lsn, "undone");
        e->set_state(s.state());
        e->set_state_name(name(s.state()));
        e->set_at_ms(s.at_ms());
        e->set_detail(s.remote()          ? "its fragment on another node was rolled back"
                      : s.never_started() ? "never started: nothing to undo"
                      : s.undone_lsn() == 0
                        ? "partly run state undone"
                        : "undid the step at lsn " + std::to_string(s.undone_lsn()));
        break;
      }
      case pb::JournalRecord::kUndoDispatched: {
        const auto& s = rec.undo_dispatched();
        if (s.proc_id() != id)
          break;
        auto* e = add(r.lsn, s.failed().empty() ? "undo dispatched" : "undo task failed");
        e->set_state(s.state());
        e->set_state_name(name(s.state()));
        e->set_at_ms(s.at_ms());
        if (!s.failed().empty()) {
          e->set_detail("its undo's task " + s.task_key() + " failed for good: " + s.failed()
                        + "; the undo's handler runs again");
          break;
        }
        pb::TaskSpec spec;
        (void)spec.ParseFromString(s.task_spec());
        e->set_detail(
          "its undo" + std::string(s.undone_lsn() == 0 ? " (of a partly run state)" : "")
          + " is task " + s.task_key() + " on queue " + spec.queue() + ", for a worker");
        break;
      }
      case pb::JournalRecord::kFinished: {
        const auto& s = rec.finished();
        if (s.proc_id() != id)
          break;
        auto* e = add(r.lsn, "finished");
        e->set_at_ms(s.at_ms());
        e->set_detail(end_text(s.state(), s.result_json(), s.error()));
        break;
      }
      case pb::JournalRecord::kCancelled: {
        const auto& s = rec.cancelled();
        if (std::find(s.children().begin(), s.children().end(), id) == s.children().end())
          break;
        auto* e = add(r.lsn, "cancelled");
        e->set_at_ms(s.at_ms());
        e->set_detail((s.failed() ? "its failure is contained by the join policy of procedure "
                                  : "cancelled by procedure ")
                      + std::to_string(s.parent_id()) + ": " + s.reason()
                      + "; its subtree is stopped and undone");
        break;
      }
      case pb::JournalRecord::kBypassed: {
        const auto& s = rec.bypassed();
        if (s.proc_id() != id)
          break;
        auto* e = add(r.lsn, "bypassed");
        e->set_at_ms(s.at_ms());
        std::string d = "by an operator while " + pb::ProcState_Name(s.state());
        if (!s.waiting_for().empty())
          d += " (waiting for " + s.waiting_for() + ")";
        if (s.forced())
          d += ", forced";
        e->set_detail(d);
        break;
      }
      case pb::JournalRecord::kRetried: {
        const auto& s = rec.retried();
        if (s.proc_id() != id)
          break;
        auto* e = add(r.lsn, "retried");
        e->set_state(s.state());
        e->set_state_name(name(s.state()));
        e->set_attempt(s.attempts());
        e->set_at_ms(s.at_ms());
        std::string d = std::string("by an operator while ")
                        + (s.was_failed() ? "FAILED (out of attempts)" : "backing off") + " after "
                        + std::to_string(s.attempts()) + " attempt(s); attempts count again from 1";
        if (!s.error().empty())
          d += "; last failure: " + s.error();
        e->set_detail(d);
        break;
      }
      case pb::JournalRecord::kRolledBack: {
        auto* e = add(r.lsn, "rolledback");
        e->set_at_ms(rec.rolled_back().at_ms());
        e->set_detail(rec.rolled_back().error());
        break;
      }
      case pb::JournalRecord::kSummary: {
        for (const auto& p : rec.summary().procs()) {
          if (p.proc_id() != id)
            continue;
          summary_only = h.entries_size() == 0;
          auto* e = add(r.lsn, "summary");
          e->set_at_ms(rec.summary().finished_at_ms());
          e->set_detail(
            end_text(p.state(), p.result_json(), p.error())
            + (p.bypassed() ? " (bypassed by an operator)" : "")
            + (p.resubmitted_from() != 0
                 ? " (resubmitted from procedure " + std::to_string(p.resubmitted_from()) + ")"
                 : ""));
        }
        break;
      }
      case pb::JournalRecord::kSnapshot: {
        const auto& s = rec.snapshot();
        for (const auto& p : s.procs()) {
          if (p.proc_id() != id)
            continue;
          names = std::make_unique<state_namer>(types, p.type());
          auto* e = add(r.lsn, "compacted");
          e->set_state(p.state());
          e->set_state_name(name(p.state()));
          e->set_at_ms(s.at_ms());
          e->set_detail("its tree's journal was compacted (" + std::to_string(s.compactions())
                        + " time(s), " + std::to_string(s.records_folded())
                        + " records folded in all): what happened before is folded into "
                          "this record, "
                        + std::string(to_string(from_pb(p.status()))) + " in state "
                        + name(p.state()));
          wait_lsn = p.wait_lsn();
          h.set_note("its tree compacts its journal: the entries before the last compaction "
                     "are folded into it and no longer listed one by one");
        }
        break;
      }
      case pb::JournalRecord::kIdFloor:
      case pb::JournalRecord::kEvent:
      case pb::JournalRecord::kOutbox:
      case pb::JournalRecord::kIncarnation:
      case pb::JournalRecord::kPeerIncarnation:
      case pb::JournalRecord::kTypeLimits:
      case pb::JournalRecord::kAudit:
      case pb::JournalRecord::kSchedule:
      case pb::JournalRecord::kNodeForgotten:
      case pb::JournalRecord::kPeerProgress:
      case pb::JournalRecord::kEventId:
      case pb::JournalRecord::kForgottenBy:
      case pb::JournalRecord::kNonceTaken:
      case pb::JournalRecord::kTask:
      case pb::JournalRecord::BODY_NOT_SET:
        break;
    }
  }
  if (summary_only)
    h.set_note("its tree has ended and its history was not kept (proctord "
               "--history-keep-records): the journal keeps only the tree's summary, so the step "
               "detail is no longer available");
  return h;
}

}  // namespace proctor
