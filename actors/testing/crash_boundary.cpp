#include "actors/testing/crash_boundary.hpp"

#include <algorithm>

#include <proctor/journal.pb.h>

#include "actors/base/messages.hpp"

namespace proctor::testing {

namespace {

/// The procedure a record belongs to, or 0 for records of the tree or node (summary, ...).
uint64_t proc_of(const pb::JournalRecord& r) {
  switch (r.body_case()) {
    case pb::JournalRecord::kSubmitted:
      return r.submitted().proc_id();
    case pb::JournalRecord::kStep:
      return r.step().proc_id();
    case pb::JournalRecord::kFailed:
      return r.failed().proc_id();
    case pb::JournalRecord::kUndone:
      return r.undone().proc_id();
    case pb::JournalRecord::kFinished:
      return r.finished().proc_id();
    case pb::JournalRecord::kSuspended:
      return r.suspended().proc_id();
    case pb::JournalRecord::kTimer:
      return r.timer().proc_id();
    case pb::JournalRecord::kDelivered:
      return r.delivered().proc_id();
    case pb::JournalRecord::kCancelled:
      return r.cancelled().parent_id();  // the parent that cancels
    case pb::JournalRecord::kUndoDispatched:
      return r.undo_dispatched().proc_id();
    case pb::JournalRecord::kTask:
      return r.task().proc_id();  // a task's lease or requeue (docs/workers.md)
    case pb::JournalRecord::kEvent:
      return call_key_proc(r.event().event_key());  // a task's end: its procedure's
    default:
      return 0;
  }
}

int32_t state_of(const pb::JournalRecord& r) {
  if (r.has_step())
    return r.step().executed_state();
  if (r.has_undone())
    return r.undone().state();
  if (r.has_undo_dispatched())
    return r.undo_dispatched().state();
  if (r.has_failed())
    return r.failed().failed_state();
  return 0;
}

std::string kind_name(int kind) {
  const auto* f = pb::JournalRecord::descriptor()->FindFieldByNumber(kind);
  return f == nullptr ? "record " + std::to_string(kind) : f->name();
}

std::string position_name(const std::vector<uint32_t>& pos) {
  std::string out = "root";
  for (auto i : pos)
    out += "/" + std::to_string(i);
  return out;
}

}  // namespace

std::string record_namer::state_name(const std::string& type, int32_t state) const {
  if (const auto* t = types_.find(type); t != nullptr && t->make)
    if (auto p = t->make())
      return p->state_name(state);
  return std::to_string(state);
}

std::optional<boundary> record_namer::name(const std::string& node, const std::string& value) {
  pb::JournalRecord r;
  if (!r.ParseFromString(value) || r.body_case() == pb::JournalRecord::BODY_NOT_SET)
    return std::nullopt;
  // The node's own incarnations (docs/cluster.md) are written at its start and on a peer's
  // first answer, an operator's limits, forgettings and schedules when made: not by a
  // procedure, no boundary of one.
  // A peer's progress (PeerProgress) is journaled when its heartbeat answers say so: when
  // depends on the run's timing; recovery needs none of it to carry the trees on.
  // The id floor rides with every write that deletes (journal.cpp): how many there are
  // depends on how group commit happened to batch the deletes of ended trees, so its n-th
  // occurrence comes in one run and not in the next. The deletes are redone by recovery's
  // retention whichever side of the write a crash falls.
  // A tree's compaction (docs/flow-control.md) comes when its records reach a count, and
  // folds whatever was journaled by then: how many come, and where, depends on the run's
  // timing. The records written with it are boundaries; it is none of its own.
  if (r.has_incarnation() || r.has_peer_incarnation() || r.has_peer_progress()
      || r.has_type_limits() || r.has_node_forgotten() || r.has_id_floor() || r.has_schedule()
      || r.has_snapshot())
    return std::nullopt;
  std::lock_guard<std::mutex> g(mtx_);
  boundary b;
  b.node = node;
  b.kind = static_cast<int>(r.body_case());
  b.state = state_of(r);
  auto id = proc_of(r);
  // A procedure submitted again keeps its place: a fragment's root (its placeholder's id on
  // its parent's node), or a submit written again after a crash refused it.
  if (r.has_submitted() && procs_.count(id) == 0) {
    auto& p = procs_[id];
    if (auto parent = procs_.find(r.submitted().parent_id()); parent != procs_.end()) {
      p.position = parent->second.position;
      p.position.push_back(parent->second.children++);
    }
    p.type = r.submitted().type();
  }
  std::string type;
  if (auto p = procs_.find(id); id != 0 && p != procs_.end()) {
    b.position = p->second.position;
    b.occurrence = p->second.written[{node, b.kind}]++;
    type = p->second.type;
  } else {
    b.occurrence = tree_written_[{node, b.kind}]++;
  }
  b.label = (node.empty() ? "" : node + ": ")
            + (id == 0 ? std::string("tree") : position_name(b.position)) + ": " + kind_name(b.kind)
            + " #" + std::to_string(b.occurrence + 1);
  if (r.has_step() || r.has_undone() || r.has_failed())
    b.label += " (" + state_name(type, b.state) + ")";
  if (r.has_event() && id != 0) {
    b.label += r.event().failure().empty() ? " (task result)" : " (task failure)";
  } else if (r.has_event()) {
    b.event_key = r.event().event_key();
    b.label += " (" + b.event_key + ")";
  }
  return b;
}

rocksdb::Status boundary_store::write(const std::vector<store_op>& ops) {
  std::lock_guard<std::mutex> g(mtx_);
  // A write that deletes records of a tree is a finished tree's garbage collection (which
  // may re-put its summary): it comes after the end, when the node happens to get to it.
  // Deleting in the node's range is consuming an event, with the delivery that consumed it.
  // A tree's compaction deletes the records its snapshot replaces: not a collection, and
  // the records group commit put in the same write are boundaries like any.
  auto compaction = [&ops] {
    pb::JournalRecord r;
    return std::any_of(ops.begin(), ops.end(), [&r](const store_op& op) {
      return op.what == store_op::kind::put && r.ParseFromString(op.value) && r.has_snapshot();
    });
  };
  for (const auto& op : ops)
    if (op.what == store_op::kind::delete_trees
        || (op.what == store_op::kind::delete_range && op.root_id != 0 && !compaction()))
      return inner_->write(ops);
  bool hit = false;
  std::vector<std::string> events;
  for (const auto& op : ops) {
    if (op.what != store_op::kind::put)
      continue;
    if (auto b = namer_->name(node_, op.value)) {
      hit = hit || (target_ && *b == *target_);
      if (!b->event_key.empty())
        events.push_back(b->event_key);
      seen_.push_back(std::move(*b));
    }
  }
  if (hit) {
    // The fault store counts from now: its next write is this one.
    inner_->crash_at(1, after_);
    target_.reset();
    if (fired_ != nullptr)
      *fired_ = true;
  }
  auto st = inner_->write(ops);
  if (st.ok())
    for (const auto& key : events)
      ++durable_events_[key];
  return st;
}

}  // namespace proctor::testing
