#include "persistence/tree_snapshot.hpp"

namespace proctor {

namespace {

void put_proc(const proc_image& p, pb::ProcSnapshot* o, uint64_t* undos_dropped) {
  o->set_proc_id(p.id);
  o->set_parent_id(p.parent_id);
  o->set_type(p.type);
  o->set_type_version(p.type_version);
  o->set_priority(p.priority);
  o->set_nonce(p.nonce);
  o->set_placement_slot(p.placement_slot);
  o->set_submitted_at_ms(p.submitted_at_ms);
  o->set_submitted_lsn(p.submitted_lsn);
  o->set_since_ms(p.since_ms);
  o->set_ended_at_ms(p.ended_at_ms);
  o->set_committed_at_ms(p.committed_at_ms);
  o->set_status(to_pb(p.status));
  o->set_state(p.state);
  o->set_data(p.data);
  o->set_data_version(p.data_version);
  for (auto c : p.children)
    o->add_children(c);
  for (auto c : p.last_spawned)
    o->add_last_spawned(c);
  uint64_t compacted = p.steps_compacted;
  for (const auto& s : p.steps) {
    // Only what a rollback plan can hold (tree_image.cpp, rollback_plan) is kept.
    if (s.undone || s.no_return) {
      ++compacted;
      *undos_dropped += s.undone && !s.no_return ? 1 : 0;
      continue;
    }
    auto* k = o->add_steps();
    k->set_lsn(s.lsn);
    k->set_executed_state(s.executed_state);
    k->set_data(s.data);
    k->set_data_version(s.data_version);
  }
  o->set_steps_compacted(compacted);
  o->set_result_json(p.result_json);
  o->set_error(p.error);
  o->set_failed(p.failed);
  o->set_failed_state(p.failed_state);
  o->set_steps_ended(p.steps_ended);
  o->set_partial_undone(p.partial_undone);
  o->set_bypassed(p.bypassed);
  o->set_args(p.args);
  o->set_args_kept(p.args_kept);
  o->set_resubmitted_from(p.resubmitted_from);
  o->set_event_key(p.event_key);
  o->set_deadline_ms(p.deadline_ms);
  o->set_wake_at_ms(p.wake_at_ms);
  o->set_event_payload(p.event_payload);
  o->set_wait_lsn(p.wait_lsn);
  o->set_call_service(p.call_service);
  o->set_call_request(p.call_request);
  o->set_event_delivered(p.event_delivered);
  o->set_event_timed_out(p.event_timed_out);
  o->set_has_timeout_state(p.timeout_state.has_value());
  o->set_timeout_state(p.timeout_state.value_or(0));
  o->set_node(p.node);
  o->set_parent_node(p.parent_node);
  o->set_parent_root_id(p.parent_root_id);
  o->set_tree_root_id(p.tree_root_id);
  if (p.parent_supervision)
    *o->mutable_parent_supervision() = *p.parent_supervision;
  o->set_remote_end_lsn(p.remote_end_lsn);
  o->set_remote_undone(p.remote_undone);
  o->set_join_at_least(p.join_at_least);
  o->set_join_wait_for_siblings(p.join_wait);
  o->set_cancel_pending(p.cancel_pending);
  o->set_cancelled(p.cancelled);
  o->set_cancel_reason(p.cancel_reason);
  o->set_cancel_failed(p.cancel_failed);
}

void get_proc(const pb::ProcSnapshot& o, proc_image& p) {
  p.id = o.proc_id();
  p.parent_id = o.parent_id();
  p.type = o.type();
  p.type_version = o.type_version();
  p.priority = o.priority();
  p.nonce = o.nonce();
  p.placement_slot = o.placement_slot();
  p.submitted_at_ms = o.submitted_at_ms();
  p.submitted_lsn = o.submitted_lsn();
  p.since_ms = o.since_ms();
  p.ended_at_ms = o.ended_at_ms();
  p.committed_at_ms = o.committed_at_ms();
  p.status = from_pb(o.status());
  p.state = o.state();
  p.data = o.data();
  p.data_version = o.data_version();
  p.children.assign(o.children().begin(), o.children().end());
  p.last_spawned.assign(o.last_spawned().begin(), o.last_spawned().end());
  p.steps.clear();
  p.steps.reserve(static_cast<size_t>(o.steps_size()));
  for (const auto& k : o.steps())
    p.steps.push_back(
      step_entry{k.lsn(), k.executed_state(), k.data(), false, false, k.data_version()});
  p.steps_compacted = o.steps_compacted();
  p.result_json = o.result_json();
  p.error = o.error();
  p.failed = o.failed();
  p.failed_state = o.failed_state();
  p.steps_ended = o.steps_ended();
  p.partial_undone = o.partial_undone();
  p.bypassed = o.bypassed();
  p.args = o.args();
  p.args_kept = o.args_kept();
  p.resubmitted_from = o.resubmitted_from();
  p.event_key = o.event_key();
  p.deadline_ms = o.deadline_ms();
  p.wake_at_ms = o.wake_at_ms();
  p.event_payload = o.event_payload();
  p.wait_lsn = o.wait_lsn();
  p.call_service = o.call_service();
  p.call_request = o.call_request();
  p.event_delivered = o.event_delivered();
  p.event_timed_out = o.event_timed_out();
  p.timeout_state.reset();
  if (o.has_timeout_state())
    p.timeout_state = o.timeout_state();
  p.node = o.node();
  p.parent_node = o.parent_node();
  p.parent_root_id = o.parent_root_id();
  p.tree_root_id = o.tree_root_id();
  p.parent_supervision.reset();
  if (o.has_parent_supervision())
    p.parent_supervision = std::make_shared<const pb::Supervision>(o.parent_supervision());
  p.remote_end_lsn = o.remote_end_lsn();
  p.remote_undone = o.remote_undone();
  p.join_at_least = o.join_at_least();
  p.join_wait = o.join_wait_for_siblings();
  p.cancel_pending = o.cancel_pending();
  p.cancelled = o.cancelled();
  p.cancel_reason = o.cancel_reason();
  p.cancel_failed = o.cancel_failed();
}

}  // namespace

pb::TreeSnapshot snapshot_of(const tree_image& t, int64_t at_ms) {
  pb::TreeSnapshot s;
  s.set_folded_lsn(t.last_lsn);
  uint64_t dropped = t.undos_dropped;
  for (const auto& [id, p] : t.procs)
    put_proc(p, s.add_procs(), &dropped);
  s.set_failed(t.failed);
  s.set_failure(t.failure);
  s.set_failed_at_ms(t.failed_at_ms);
  s.set_rolled_back(t.rolled_back);
  s.set_finished(t.finished);
  s.set_summarized(t.summarized);
  s.set_finished_at_ms(t.finished_at_ms);
  s.set_past_no_return(t.past_no_return);
  for (auto e : t.consumed_events)
    s.add_consumed_events(e);
  // The snapshot replaces every record folded, an earlier snapshot standing for its own.
  auto replaced = t.records - (t.snapshot_lsn != 0 ? 1 : 0);
  s.set_records_folded(t.records_folded + replaced);
  s.set_undos_dropped(dropped);
  s.set_compactions(t.compactions + 1);
  s.set_at_ms(at_ms);
  return s;
}

void restore_snapshot(tree_image& t, uint64_t lsn, const pb::TreeSnapshot& s) {
  auto root = t.root_id;
  auto corrupt = std::move(t.corrupt);
  t = tree_image{};
  t.root_id = root;
  t.corrupt = std::move(corrupt);
  t.records = 1;  // the snapshot itself: every record before it was deleted with its write
  t.last_lsn = lsn;
  for (const auto& o : s.procs())
    get_proc(o, t.procs[o.proc_id()]);
  t.failed = s.failed();
  t.failure = s.failure();
  t.failed_at_ms = s.failed_at_ms();
  t.rolled_back = s.rolled_back();
  t.finished = s.finished();
  t.summarized = s.summarized();
  t.finished_at_ms = s.finished_at_ms();
  t.past_no_return = s.past_no_return();
  t.consumed_events.assign(s.consumed_events().begin(), s.consumed_events().end());
  t.snapshot_lsn = lsn;
  t.compactions = s.compactions();
  t.records_folded = s.records_folded();
  t.undos_dropped = s.undos_dropped();
}

}  // namespace proctor
