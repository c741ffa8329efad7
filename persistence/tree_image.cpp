#include "persistence/tree_image.hpp"

#include <algorithm>
#include <climits>
#include <cstddef>

#include <google/protobuf/arena.h>

#include "persistence/tree_snapshot.hpp"

namespace proctor {

namespace {

/// A record's data_version, 0 meaning "the Submitted's type_version" (records written before
/// data versions were journaled say 0).
uint32_t data_version_of(const proc_image& p, uint32_t recorded) {
  return recorded != 0 ? recorded : p.type_version;
}

/// Puts `p` in status `s`: a change of status starts at `at_ms` (0: not recorded).
void enter(proc_image& p, proc_state s, int64_t at_ms) {
  if (p.status == s)
    return;
  p.status = s;
  p.since_ms = at_ms;
}

/// Ends `p` in final status `s` at `at_ms`.
void end(proc_image& p, proc_state s, int64_t at_ms) {
  enter(p, s, at_ms);
  p.since_ms = p.ended_at_ms = at_ms;
}

/// When the last of `ids` ended (0 if one has not, or its end's time is not recorded): a
/// parent waiting for them runs again from then.
int64_t last_end(const tree_image& t, const std::vector<uint64_t>& ids) {
  int64_t last = 0;
  for (auto c : ids) {
    const auto* cp = t.find(c);
    if (cp == nullptr || cp->ended_at_ms == 0)
      return 0;
    last = std::max(last, cp->ended_at_ms);
  }
  return last;
}

}  // namespace

void tree_folder::add(uint64_t lsn, std::string_view value) {
  // Recovery parses every record of the journal once: on an arena over a stack block, a
  // record's messages and strings cost no malloc/free pair each (a larger record spills
  // into heap blocks the arena frees).
  alignas(std::max_align_t) char block[parse_block_size];
  google::protobuf::ArenaOptions ao;
  ao.initial_block = block;
  ao.initial_block_size = sizeof(block);
  google::protobuf::Arena arena(ao);
  auto* rec = google::protobuf::Arena::CreateMessage<pb::JournalRecord>(&arena);
  if (value.size() > static_cast<size_t>(INT_MAX)
      || !rec->ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    ++image_.records;
    if (image_.corrupt.empty())
      image_.corrupt = "unparsable record at lsn " + std::to_string(lsn);
    return;
  }
  add(lsn, *rec);
}

void tree_folder::add(uint64_t lsn, const pb::JournalRecord& rec) {
  auto& t = image_;
  ++t.records;
  t.last_lsn = std::max(t.last_lsn, lsn);
  auto missing = [&](uint64_t id) {
    if (t.corrupt.empty())
      t.corrupt =
        "record at lsn " + std::to_string(lsn) + " names unknown procedure " + std::to_string(id);
  };
  switch (rec.body_case()) {
    case pb::JournalRecord::kSubmitted: {
      const auto& s = rec.submitted();
      if (t.procs.count(s.proc_id()) != 0) {
        // Every procedure is submitted once: a second Submitted would replace a procedure
        // whose steps are already folded (and, placing it on another node, hide them from
        // the rollback plan's count of what a fragment there undoes).
        if (t.corrupt.empty())
          t.corrupt = "second Submitted for procedure " + std::to_string(s.proc_id()) + " at lsn "
                      + std::to_string(lsn);
        return;
      }
      auto& p = t.procs[s.proc_id()];
      p.id = s.proc_id();
      p.parent_id = s.parent_id();
      p.type = s.type();
      p.type_version = s.type_version();
      p.priority = s.priority();
      p.nonce = s.nonce();
      p.placement_slot = s.placement_slot();
      p.submitted_at_ms = s.submitted_at_ms();
      p.submitted_lsn = lsn;
      p.status = proc_state::runnable;
      p.since_ms = s.submitted_at_ms();
      p.state = s.state();
      p.data = s.data();
      p.data_version = s.type_version();  // data versions
      if (p.id == t.root_id && s.parent_node().empty()) {
        p.args = s.data();
        p.args_kept = true;
        p.resubmitted_from = s.resubmitted_from();
      }
      p.node = s.node();
      if (p.id == t.root_id && !p.node.empty() && t.corrupt.empty())
        t.corrupt =
          "the root's Submitted at lsn " + std::to_string(lsn) + " places it on another node";
      p.parent_node = s.parent_node();
      p.parent_root_id = s.parent_root_id();
      p.tree_root_id = s.tree_root_id() != 0 ? s.tree_root_id() : s.parent_root_id();
      if (s.has_parent_supervision())
        p.parent_supervision = std::make_shared<const pb::Supervision>(s.parent_supervision());
      break;
    }
    case pb::JournalRecord::kStep: {
      const auto& s = rec.step();
      auto* p = t.find(s.proc_id());
      if (p == nullptr)
        return missing(s.proc_id());
      if (p->remote()) {
        // A child on another node runs its steps there: this journal never holds one of its
        // steps, and one to undo here would be undone by nobody.
        if (t.corrupt.empty())
          t.corrupt = "Step at lsn " + std::to_string(lsn) + " for procedure "
                      + std::to_string(p->id) + ", which runs on node " + p->node;
        return;
      }
      p->steps.push_back(step_entry{lsn, s.executed_state(), s.data(), s.past_no_return(), false});
      // data versions: the entry's data and the procedure's are the record's.
      p->data_version = data_version_of(*p, s.data_version());
      p->steps.back().data_version = p->data_version;
      if (s.past_no_return())
        t.past_no_return = true;
      // The step that failed the tree committed after all (it was running when the tree
      // failed): it is undone as a committed step, not once more as a partly run state.
      if (p->failed && p->failed_state == s.executed_state())
        p->failed_state = 0;
      if (s.ended())
        p->steps_ended = true;
      // It ran again before this step: after its timer, from its wake-up; after its
      // children, from the last of their ends (an event's delivery was a record of its own).
      if (p->status == proc_state::waiting_timeout)
        enter(*p, proc_state::runnable, p->wake_at_ms);
      else if (p->status == proc_state::waiting && p->event_key.empty())
        enter(*p, proc_state::runnable, last_end(t, p->last_spawned));
      p->committed_at_ms = s.committed_at_ms();
      p->data = s.data();
      p->state = s.next_state();
      p->event_key.clear();
      p->call_service.clear();
      p->call_request.clear();
      p->event_delivered = false;
      p->event_payload.clear();
      p->event_timed_out = false;
      p->event_failure.clear();
      p->timeout_state.reset();
      p->deadline_ms = p->wake_at_ms = 0;
      if (s.children_size() > 0) {
        p->join_at_least = s.join_at_least();
        p->join_wait = s.join_wait_for_siblings();
        p->last_spawned.assign(s.children().begin(), s.children().end());
        p->children.insert(p->children.end(), s.children().begin(), s.children().end());
        enter(*p, proc_state::waiting, s.committed_at_ms());
      } else {
        // Its last step spawned nothing: the next one sees no children (ctx.children() holds
        // those of the step just before it only), and it awaits none.
        p->last_spawned.clear();
        p->join_at_least = 0;
        p->join_wait = false;
        enter(*p, proc_state::runnable, s.committed_at_ms());
      }
      break;
    }
    case pb::JournalRecord::kSuspended: {
      const auto& s = rec.suspended();
      auto* p = t.find(s.proc_id());
      if (p == nullptr)
        return missing(s.proc_id());
      enter(*p, proc_state::waiting, p->committed_at_ms);  // its step's batch
      p->event_key = s.event_key();
      p->wait_lsn = lsn;
      p->deadline_ms = s.deadline_ms();
      p->state = s.resume_state();
      p->timeout_state.reset();
      if (s.has_timeout_state())
        p->timeout_state = s.timeout_state();
      p->call_service = s.call_service();
      p->call_request = s.call_request();
      break;
    }
    case pb::JournalRecord::kTimer: {
      const auto& s = rec.timer();
      auto* p = t.find(s.proc_id());
      if (p == nullptr)
        return missing(s.proc_id());
      enter(*p, proc_state::waiting_timeout, p->committed_at_ms);  // its step's batch
      p->wake_at_ms = s.wake_at_ms();
      p->state = s.resume_state();
      break;
    }
    case pb::JournalRecord::kDelivered: {
      const auto& s = rec.delivered();
      auto* p = t.find(s.proc_id());
      if (p == nullptr)
        return missing(s.proc_id());
      enter(*p, proc_state::runnable, s.at_ms());
      p->call_service.clear();
      p->call_request.clear();
      p->event_delivered = true;
      p->event_payload = s.payload_json();
      p->event_timed_out = s.timed_out();
      p->event_failure = s.failure();
      if (s.timed_out() && p->timeout_state)
        p->state = *p->timeout_state;  // the wait's on_timeout state runs, not its resume
      if (s.event_lsn() != 0)
        t.consumed_events.push_back(s.event_lsn());
      break;
    }
    case pb::JournalRecord::kFailed: {
      const auto& s = rec.failed();
      auto* p = t.find(s.proc_id());
      if (p == nullptr)
        return missing(s.proc_id());
      p->failed = true;
      p->failed_state = s.failed_state();
      if (!t.failed) {
        t.failure = s.error();
        t.failed_at_ms = s.at_ms();
      }
      t.failed = true;
      if (p->error.empty())
        p->error = s.error();
      break;
    }
    case pb::JournalRecord::kUndone: {
      const auto& s = rec.undone();
      auto* p = t.find(s.proc_id());
      if (p == nullptr)
        return missing(s.proc_id());
      if (!s.remote() && !t.undo_tasks.empty())
        t.undo_tasks.erase({s.proc_id(), s.undone_lsn()});
      if (s.remote()) {
        p->remote_undone = true;
      } else if (s.undone_lsn() == 0) {
        p->partial_undone = true;
      } else {
        for (auto& st : p->steps)
          if (st.lsn == s.undone_lsn())
            st.undone = true;
      }
      if (!s.never_started()) {
        p->data = s.data();
        p->data_version = data_version_of(*p, s.data_version());  // data versions
      }
      break;
    }
    case pb::JournalRecord::kUndoDispatched: {
      const auto& s = rec.undo_dispatched();
      if (t.find(s.proc_id()) == nullptr)
        return missing(s.proc_id());
      if (!s.failed().empty()) {  // that task failed for good: none pending
        t.undo_tasks.erase({s.proc_id(), s.undone_lsn()});
        break;
      }
      t.undo_tasks[{s.proc_id(), s.undone_lsn()}] =
        undo_task_image{s.proc_id(),   s.undone_lsn(), s.state(),       s.task_key(),
                        s.task_spec(), s.data(),       s.data_version()};
      break;
    }
    case pb::JournalRecord::kFinished: {
      const auto& s = rec.finished();
      auto* p = t.find(s.proc_id());
      if (p == nullptr)
        return missing(s.proc_id());
      end(*p, from_pb(s.state()), s.at_ms());
      p->result_json = s.result_json();
      if (!s.error().empty())
        p->error = s.error();
      if (s.cancelled()) {
        // Its parent's cancellation ended it (a Finished SUCCESS that raced the
        // cancellation leaves it pending: its steps are undone all the same).
        p->cancelled = true;
        p->cancel_pending = false;
      }
      if (p->id == t.root_id)
        t.finished = true;
      if (p->remote()) {
        p->remote_end_lsn = lsn;
        // Rolled back there (or never able to be): nothing left to order.
        p->remote_undone = p->status != proc_state::success;
      }
      break;
    }
    case pb::JournalRecord::kCancelled: {
      const auto& s = rec.cancelled();
      if (t.find(s.parent_id()) == nullptr)
        return missing(s.parent_id());
      for (auto c : s.children()) {
        auto* p = t.find(c);
        if (p == nullptr)
          return missing(c);
        if (p->cancelled)
          continue;  // closed by an earlier cancellation
        p->cancel_pending = true;
        p->cancel_failed = s.failed();
        p->cancel_reason = s.reason();
      }
      break;
    }
    case pb::JournalRecord::kBypassed: {
      // An operator ended it SUCCESS: nothing more of it runs (its steps stay undoable).
      auto* p = t.find(rec.bypassed().proc_id());
      if (p == nullptr)
        return missing(rec.bypassed().proc_id());
      end(*p, proc_state::success, rec.bypassed().at_ms());
      p->bypassed = true;
      if (p->id == t.root_id)
        t.finished = true;
      break;
    }
    case pb::JournalRecord::kRetried:
      // An operator's retry: the step runs again from the data of the last commit, which the
      // fold holds already (a retry changes neither state nor data).
      if (t.find(rec.retried().proc_id()) == nullptr)
        return missing(rec.retried().proc_id());
      break;
    case pb::JournalRecord::kRolledBack: {
      t.rolled_back = true;
      t.finished = true;
      for (auto& [id, p] : t.procs)
        if (p.status != proc_state::rolledback) {
          end(p, proc_state::rolledback, rec.rolled_back().at_ms());
          if (p.error.empty())
            p.error = rec.rolled_back().error();
        }
      break;
    }
    case pb::JournalRecord::kSummary: {
      const auto& s = rec.summary();
      t.procs.clear();
      // The summary replaces every step, the undone ones with the rest: so do the undos an
      // earlier compaction left out (tree_snapshot.cpp), or a compacted tree would count
      // them after its summary where the same tree folded whole does not.
      t.undos_dropped = 0;
      t.summarized = true;
      t.finished = true;
      t.finished_at_ms = s.finished_at_ms();
      for (const auto& ps : s.procs()) {
        auto& p = t.procs[ps.proc_id()];
        p.id = ps.proc_id();
        p.parent_id = ps.parent_id();
        p.type = ps.type();
        p.status = from_pb(ps.state());
        p.result_json = ps.result_json();
        p.error = ps.error();
        p.children.assign(ps.children().begin(), ps.children().end());
        p.nonce = ps.nonce();
        p.placement_slot = ps.placement_slot();
        p.node = ps.node();
        p.bypassed = ps.bypassed();
        p.args = ps.args();
        p.resubmitted_from = ps.resubmitted_from();
        p.priority = ps.priority();
        if (ps.type_version() != 0) {  // written with the root's submit
          p.type_version = ps.type_version();
          p.args_kept = true;
        }
        p.submitted_at_ms = ps.started_at_ms();
        // Summaries written before the procedures' own ends were recorded: the tree's end.
        p.ended_at_ms = ps.ended_at_ms() != 0 ? ps.ended_at_ms() : s.finished_at_ms();
        p.since_ms = p.ended_at_ms;
        p.remote_undone = p.remote();  // a finished tree orders nothing any more
        if (p.status == proc_state::rolledback)
          t.rolled_back = t.failed = true;
      }
      break;
    }
    case pb::JournalRecord::kSnapshot:
      // The fold of every earlier record of the tree (they were deleted with its write).
      restore_snapshot(t, lsn, rec.snapshot());
      break;
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
      if (rec.body_case() == pb::JournalRecord::BODY_NOT_SET && t.corrupt.empty())
        t.corrupt = "empty record at lsn " + std::to_string(lsn);
      break;
  }
}

tree_image tree_folder::finish() {
  auto& t = image_;
  if (t.corrupt.empty() && t.procs.find(t.root_id) == t.procs.end())
    t.corrupt = "tree has no Submitted record for its root";
  for (auto& [id, p] : t.procs) {
    if (p.status != proc_state::waiting || p.last_spawned.empty() || !p.event_key.empty())
      continue;
    size_t succeeded = 0;
    const bool tolerant = p.joins_tolerantly();  // (a structured binding: not captured)
    bool all_ended = std::all_of(p.last_spawned.begin(), p.last_spawned.end(), [&](uint64_t c) {
      auto* cp = t.find(c);
      if (cp == nullptr || !is_final(cp->status) || cp->cancel_pending)
        return false;
      if (cp->status == proc_state::success) {
        ++succeeded;
        return true;
      }
      // A child that failed on another node does not let its parent run on: the tree fails
      // (unless a join policy contains the failure: its fragment rolled back there).
      return !cp->remote() || (tolerant && cp->status == proc_state::rolledback);
    });
    // A join policy that is not met: the parent's actor fails the join (join_unmet).
    const size_t needed = p.join_at_least != 0 ? p.join_at_least : p.last_spawned.size();
    if (all_ended && (!tolerant || succeeded >= needed))
      enter(p, proc_state::runnable, last_end(t, p.last_spawned));
  }
  return std::move(image_);
}

tree_image fold_tree(uint64_t root_id, const std::vector<stored_record>& records) {
  tree_folder f(root_id);
  for (const auto& r : records)
    if (r.root_id == root_id)
      f.add(r.lsn, r.value);
  return f.finish();
}

pb::TreeSummary summarize(const tree_image& tree, int64_t finished_at_ms) {
  pb::TreeSummary s;
  s.set_finished_at_ms(finished_at_ms);
  for (const auto& [id, p] : tree.procs) {
    auto* ps = s.add_procs();
    ps->set_proc_id(id);
    ps->set_parent_id(p.parent_id);
    ps->set_type(p.type);
    ps->set_state(to_pb(p.status));
    ps->set_result_json(p.result_json);
    ps->set_error(p.error);
    for (auto c : p.children)
      ps->add_children(c);
    ps->set_nonce(p.nonce);
    ps->set_placement_slot(p.placement_slot);
    ps->set_node(p.node);
    ps->set_bypassed(p.bypassed);
    if (id == tree.root_id && p.args_kept) {
      ps->set_args(p.args);
      ps->set_type_version(std::max<uint32_t>(p.type_version, 1));  // 0: not kept
      ps->set_priority(p.priority);
      ps->set_resubmitted_from(p.resubmitted_from);
    }
    ps->set_started_at_ms(p.submitted_at_ms);
    ps->set_ended_at_ms(p.ended_at_ms != 0 ? p.ended_at_ms : finished_at_ms);
  }
  return s;
}

}  // namespace proctor
