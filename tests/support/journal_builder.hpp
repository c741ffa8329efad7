// Test support: builds one tree's journal by hand (persistence/tree_image.hpp folds it), and
// prints and checks rollback plans. Used by persistence/'s tree_image, summary, rollback plan
// and join tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"

namespace proctor::journal_testing {

class journal_builder {
public:
  explicit journal_builder(uint64_t root, uint64_t first_lsn = 1) : root_(root), next_(first_lsn) {}

  uint64_t add(const pb::JournalRecord& rec) {
    rec_.push_back(stored_record{root_, next_, rec.SerializeAsString()});
    return next_++;
  }

  uint64_t raw(std::string value) {
    rec_.push_back(stored_record{root_, next_, std::move(value)});
    return next_++;
  }

  uint64_t submitted(uint64_t id, uint64_t parent, std::string data, int32_t state = 1,
                     std::string type = "t.demo") {
    pb::JournalRecord r;
    r.set_format(1);
    auto* s = r.mutable_submitted();
    s->set_proc_id(id);
    s->set_parent_id(parent);
    s->set_type(std::move(type));
    s->set_type_version(2);
    s->set_data(std::move(data));
    s->set_state(state);
    s->set_priority(static_cast<int32_t>(id));
    s->set_nonce(parent == 0 ? "nonce-" + std::to_string(id) : "");
    s->set_submitted_at_ms(1000 + static_cast<int64_t>(id));
    return add(r);
  }

  uint64_t step(uint64_t id, int32_t executed, int32_t next, std::string data,
                std::vector<uint64_t> children = {}, bool no_return = false) {
    pb::JournalRecord r;
    r.set_format(1);
    auto* s = r.mutable_step();
    s->set_proc_id(id);
    s->set_executed_state(executed);
    s->set_next_state(next);
    s->set_data(std::move(data));
    for (auto c : children)
      s->add_children(c);
    s->set_past_no_return(no_return);
    s->set_attempt(1);
    return add(r);
  }

  /// A spawning step and its children's Submitted records, as one batch writes them.
  uint64_t spawn(uint64_t id, int32_t executed, int32_t next, std::string data,
                 const std::vector<std::pair<uint64_t, std::string>>& kids) {
    std::vector<uint64_t> ids;
    for (const auto& k : kids)
      ids.push_back(k.first);
    auto lsn = step(id, executed, next, std::move(data), ids);
    for (const auto& [cid, cdata] : kids)
      submitted(cid, id, cdata);
    return lsn;
  }

  uint64_t suspended(uint64_t id, std::string key, int64_t deadline, int32_t resume) {
    pb::JournalRecord r;
    auto* s = r.mutable_suspended();
    s->set_proc_id(id);
    s->set_event_key(std::move(key));
    s->set_deadline_ms(deadline);
    s->set_resume_state(resume);
    return add(r);
  }

  uint64_t timer(uint64_t id, int64_t wake_at, int32_t resume) {
    pb::JournalRecord r;
    auto* s = r.mutable_timer();
    s->set_proc_id(id);
    s->set_wake_at_ms(wake_at);
    s->set_resume_state(resume);
    return add(r);
  }

  uint64_t delivered(uint64_t id, std::string key, std::string payload, bool timed_out = false) {
    pb::JournalRecord r;
    auto* s = r.mutable_delivered();
    s->set_proc_id(id);
    s->set_event_key(std::move(key));
    s->set_payload_json(std::move(payload));
    s->set_timed_out(timed_out);
    return add(r);
  }

  uint64_t failed(uint64_t id, int32_t state, std::string error) {
    pb::JournalRecord r;
    auto* s = r.mutable_failed();
    s->set_proc_id(id);
    s->set_failed_state(state);
    s->set_error(std::move(error));
    return add(r);
  }

  uint64_t undone(uint64_t undone_lsn, uint64_t id, int32_t state, std::string data) {
    pb::JournalRecord r;
    auto* s = r.mutable_undone();
    s->set_undone_lsn(undone_lsn);
    s->set_proc_id(id);
    s->set_state(state);
    s->set_data(std::move(data));
    return add(r);
  }

  /// An UndoDispatched of the undo of step `undone_lsn` (task `key`); `failed`: that task
  /// failed for good.
  uint64_t undo_dispatched(uint64_t undone_lsn, uint64_t id, int32_t state, std::string key,
                           std::string failed = {}) {
    pb::JournalRecord r;
    auto* s = r.mutable_undo_dispatched();
    s->set_undone_lsn(undone_lsn);
    s->set_proc_id(id);
    s->set_state(state);
    s->set_task_key(std::move(key));
    s->set_task_spec("spec");
    s->set_data("handler's data");
    s->set_failed(std::move(failed));
    return add(r);
  }

  uint64_t finished(uint64_t id, pb::ProcState state, std::string result = {},
                    std::string error = {}) {
    pb::JournalRecord r;
    auto* s = r.mutable_finished();
    s->set_proc_id(id);
    s->set_state(state);
    s->set_result_json(std::move(result));
    s->set_error(std::move(error));
    return add(r);
  }

  uint64_t rolled_back(std::string error) {
    pb::JournalRecord r;
    r.mutable_rolled_back()->set_error(std::move(error));
    return add(r);
  }

  uint64_t summary(const pb::TreeSummary& s) {
    pb::JournalRecord r;
    *r.mutable_summary() = s;
    return add(r);
  }

  const std::vector<stored_record>& records() const { return rec_; }

  /// The fold of the first `n` records.
  tree_image fold_prefix(size_t n) const {
    std::vector<stored_record> part(rec_.begin(), rec_.begin() + static_cast<ptrdiff_t>(n));
    return fold_tree(root_, part);
  }

  tree_image fold() const { return fold_tree(root_, rec_); }

private:
  uint64_t root_;
  uint64_t next_;
  std::vector<stored_record> rec_;
};

inline std::string describe(const std::vector<undo_item>& plan) {
  std::string out;
  for (const auto& u : plan)
    out += "(" + std::to_string(u.proc_id) + "," + std::to_string(u.state) + ",lsn "
           + std::to_string(u.lsn) + "," + u.data + ") ";
  return out;
}

inline void expect_item(const undo_item& u, uint64_t proc, int32_t state, uint64_t lsn,
                        const std::string& data) {
  EXPECT_EQ(u.proc_id, proc);
  EXPECT_EQ(u.state, state);
  EXPECT_EQ(u.lsn, lsn);
  EXPECT_EQ(u.data, data);
}

/// A finished tree of three procedures (root 1, children 2 and 3) as its summary.
inline pb::TreeSummary sample_summary() {
  pb::TreeSummary s;
  s.set_finished_at_ms(424242);
  auto* r = s.add_procs();
  r->set_proc_id(1);
  r->set_type("t.root");
  r->set_state(pb::SUCCESS);
  r->set_result_json(R"({"r":1})");
  r->add_children(2);
  r->add_children(3);
  r->set_nonce("n-1");
  auto* a = s.add_procs();
  a->set_proc_id(2);
  a->set_parent_id(1);
  a->set_type("t.child");
  a->set_state(pb::SUCCESS);
  auto* b = s.add_procs();
  b->set_proc_id(3);
  b->set_parent_id(1);
  b->set_type("t.child");
  b->set_state(pb::SUCCESS);
  b->set_result_json("7");
  return s;
}

}  // namespace proctor::journal_testing
