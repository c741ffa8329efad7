#include "persistence/tree_image.hpp"

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_snapshot.hpp"

namespace proctor {
namespace {

/// Builds one tree's journal by hand; every record gets the next LSN.
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

std::string describe(const std::vector<undo_item>& plan) {
  std::string out;
  for (const auto& u : plan)
    out += "(" + std::to_string(u.proc_id) + "," + std::to_string(u.state) + ",lsn "
           + std::to_string(u.lsn) + "," + u.data + ") ";
  return out;
}

void expect_item(const undo_item& u, uint64_t proc, int32_t state, uint64_t lsn,
                 const std::string& data) {
  EXPECT_EQ(u.proc_id, proc);
  EXPECT_EQ(u.state, state);
  EXPECT_EQ(u.lsn, lsn);
  EXPECT_EQ(u.data, data);
}

// -- fold ---------------------------------------------------------------------------------------

TEST(tree_image_test, submitted_root_is_runnable) {
  journal_builder j(5);
  j.submitted(5, 0, "d0", 3, "t.root");
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "");
  EXPECT_EQ(t.root_id, 5u);
  EXPECT_EQ(t.last_lsn, 1u);
  ASSERT_EQ(t.procs.size(), 1u);
  const auto* r = t.root();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->id, 5u);
  EXPECT_EQ(r->parent_id, 0u);
  EXPECT_EQ(r->type, "t.root");
  EXPECT_EQ(r->type_version, 2u);
  EXPECT_EQ(r->priority, 5);
  EXPECT_EQ(r->nonce, "nonce-5");
  EXPECT_EQ(r->submitted_at_ms, 1005);
  EXPECT_EQ(r->status, proc_state::runnable);
  EXPECT_EQ(r->state, 3);
  EXPECT_EQ(r->data, "d0");
  EXPECT_TRUE(r->steps.empty());
  EXPECT_TRUE(r->children.empty());
  EXPECT_FALSE(t.failed);
  EXPECT_FALSE(t.finished);
  EXPECT_FALSE(t.summarized);
  EXPECT_FALSE(t.past_no_return);
}

TEST(tree_image_test, steps_update_data_and_state_and_keep_the_data_each_committed) {
  journal_builder j(1, 10);
  j.submitted(1, 0, "d0", 1);
  j.step(1, 1, 2, "d1");
  j.step(1, 2, 2, "d2");
  j.step(1, 2, 3, "d3");
  const std::vector<std::string> data{"d0", "d1", "d2", "d3"};
  const std::vector<int32_t> state{1, 2, 2, 3};
  for (size_t n = 1; n <= 4; ++n) {
    auto t = j.fold_prefix(n);
    ASSERT_EQ(t.corrupt, "");
    const auto* r = t.root();
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->data, data[n - 1]) << n;
    EXPECT_EQ(r->state, state[n - 1]) << n;
    EXPECT_EQ(r->status, proc_state::runnable) << n;
    ASSERT_EQ(r->steps.size(), n - 1);
    EXPECT_EQ(t.last_lsn, 10 + n - 1);
  }
  auto t = j.fold();
  const auto& s = t.root()->steps;
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].lsn, 11u);
  EXPECT_EQ(s[0].executed_state, 1);
  EXPECT_EQ(s[0].data, "d1");
  EXPECT_EQ(s[1].lsn, 12u);
  EXPECT_EQ(s[1].executed_state, 2);
  EXPECT_EQ(s[1].data, "d2");
  EXPECT_EQ(s[2].lsn, 13u);
  EXPECT_EQ(s[2].executed_state, 2);
  EXPECT_EQ(s[2].data, "d3");
  for (const auto& e : s) {
    EXPECT_FALSE(e.no_return);
    EXPECT_FALSE(e.undone);
  }
}

TEST(tree_image_test, spawn_makes_parent_waiting_until_every_child_of_the_last_spawn_ended) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");                         // 1
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});  // 2, 3, 4
  {
    auto t = j.fold();
    ASSERT_EQ(t.corrupt, "");
    ASSERT_EQ(t.procs.size(), 3u);
    const auto* r = t.root();
    EXPECT_EQ(r->status, proc_state::waiting);
    EXPECT_EQ(r->state, 2);
    EXPECT_EQ(r->data, "r1");
    EXPECT_EQ(r->children, (std::vector<uint64_t>{2, 3}));
    EXPECT_EQ(r->last_spawned, (std::vector<uint64_t>{2, 3}));
    const auto* a = t.find(2);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->parent_id, 1u);
    EXPECT_EQ(a->status, proc_state::runnable);
    EXPECT_EQ(a->data, "a0");
    EXPECT_EQ(a->nonce, "");
    EXPECT_EQ(t.find(3)->status, proc_state::runnable);
  }
  j.step(2, 1, 1, "a1");                     // 5
  j.finished(2, pb::SUCCESS, R"({"a":1})");  // 6
  {
    auto t = j.fold();
    EXPECT_EQ(t.find(2)->status, proc_state::success);
    EXPECT_EQ(t.find(2)->result_json, R"({"a":1})");
    EXPECT_EQ(t.root()->status, proc_state::waiting);  // child 3 still runs
    EXPECT_FALSE(t.finished);
  }
  j.step(3, 1, 1, "b1");       // 7
  j.finished(3, pb::SUCCESS);  // 8
  {
    auto t = j.fold();
    EXPECT_EQ(t.find(3)->status, proc_state::success);
    EXPECT_EQ(t.root()->status, proc_state::runnable);
    EXPECT_EQ(t.root()->state, 2);
    EXPECT_FALSE(t.finished);
  }
  // A second spawn: only its children count.
  j.spawn(1, 2, 3, "r2", {{4, "c0"}});  // 9, 10
  {
    auto t = j.fold();
    const auto* r = t.root();
    EXPECT_EQ(r->status, proc_state::waiting);
    EXPECT_EQ(r->children, (std::vector<uint64_t>{2, 3, 4}));
    EXPECT_EQ(r->last_spawned, (std::vector<uint64_t>{4}));
  }
  j.finished(4, pb::FAILED, "", "child failed");  // 11
  {
    auto t = j.fold();
    EXPECT_EQ(t.find(4)->status, proc_state::failed);
    EXPECT_EQ(t.find(4)->error, "child failed");
    EXPECT_EQ(t.root()->status, proc_state::runnable);  // FAILED is final too
  }
  j.step(1, 3, 4, "r3");                         // 12
  j.finished(1, pb::SUCCESS, R"({"ok":true})");  // 13
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::success);
  EXPECT_EQ(t.root()->result_json, R"({"ok":true})");
  EXPECT_TRUE(t.finished);
  EXPECT_EQ(t.last_lsn, 13u);
}

TEST(tree_image_test, parent_waits_while_a_child_waits_on_grandchildren) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}});
  j.spawn(2, 1, 2, "a1", {{3, "g0"}});
  {
    auto t = j.fold();
    EXPECT_EQ(t.root()->status, proc_state::waiting);
    EXPECT_EQ(t.find(2)->status, proc_state::waiting);
    EXPECT_EQ(t.find(3)->status, proc_state::runnable);
  }
  j.finished(3, pb::SUCCESS);
  auto t = j.fold();
  EXPECT_EQ(t.find(2)->status, proc_state::runnable);
  EXPECT_EQ(t.root()->status, proc_state::waiting);
}

TEST(tree_image_test, spawn_without_children_keeps_runnable) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1", {});
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::runnable);
  EXPECT_TRUE(t.root()->last_spawned.empty());
}

TEST(tree_image_test, suspended_waits_for_its_event) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  j.suspended(1, "order-9", 123456, 2);
  {
    auto t = j.fold();
    const auto* r = t.root();
    EXPECT_EQ(r->status, proc_state::waiting);
    EXPECT_EQ(r->event_key, "order-9");
    EXPECT_EQ(r->deadline_ms, 123456);
    EXPECT_EQ(r->state, 2);
    EXPECT_FALSE(r->event_delivered);
  }
  j.delivered(1, "order-9", R"({"x":1})", false);
  {
    auto t = j.fold();
    const auto* r = t.root();
    EXPECT_EQ(r->status, proc_state::runnable);
    EXPECT_TRUE(r->event_delivered);
    EXPECT_EQ(r->event_payload, R"({"x":1})");
    EXPECT_FALSE(r->event_timed_out);
    EXPECT_EQ(r->state, 2);
    EXPECT_EQ(r->data, "r1");
  }
  // The resumed step's commit clears the event.
  j.step(1, 2, 3, "r2");
  auto t = j.fold();
  const auto* r = t.root();
  EXPECT_EQ(r->status, proc_state::runnable);
  EXPECT_EQ(r->event_key, "");
  EXPECT_EQ(r->event_payload, "");
  EXPECT_FALSE(r->event_delivered);
  EXPECT_EQ(r->deadline_ms, 0);
  EXPECT_EQ(r->state, 3);
  EXPECT_EQ(r->data, "r2");
}

TEST(tree_image_test, suspended_parent_stays_waiting_although_its_old_children_ended) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}});
  j.finished(2, pb::SUCCESS);
  j.step(1, 2, 3, "r2");
  j.suspended(1, "k", 0, 3);
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::waiting);
  EXPECT_EQ(t.root()->event_key, "k");
}

TEST(tree_image_test, event_timed_out) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  j.suspended(1, "k", 99, 2);
  j.delivered(1, "k", "", true);
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::runnable);
  EXPECT_TRUE(t.root()->event_timed_out);
  EXPECT_TRUE(t.root()->event_delivered);
}

TEST(tree_image_test, timer_set_is_waiting_timeout) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 4, "r1");
  j.timer(1, 777, 4);
  {
    auto t = j.fold();
    EXPECT_EQ(t.root()->status, proc_state::waiting_timeout);
    EXPECT_EQ(t.root()->wake_at_ms, 777);
    EXPECT_EQ(t.root()->state, 4);
  }
  j.step(1, 4, 5, "r2");
  auto t = j.fold();
  EXPECT_EQ(t.root()->status, proc_state::runnable);
  EXPECT_EQ(t.root()->wake_at_ms, 0);
  EXPECT_EQ(t.root()->state, 5);
}

TEST(tree_image_test, failed_marks_tree_and_procedure_keeping_the_first_failure) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});
  j.failed(3, 1, "first boom");
  j.failed(2, 1, "second boom");
  j.failed(3, 2, "again");
  auto t = j.fold();
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.failure, "first boom");
  const auto* b = t.find(3);
  EXPECT_TRUE(b->failed);
  EXPECT_EQ(b->failed_state, 2);
  EXPECT_EQ(b->error, "first boom");
  EXPECT_TRUE(t.find(2)->failed);
  EXPECT_EQ(t.find(2)->error, "second boom");
  EXPECT_FALSE(t.root()->failed);
  EXPECT_FALSE(t.finished);
}

TEST(tree_image_test, rollback_step_done_marks_steps_and_partial_undos) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  auto s1 = j.step(1, 1, 2, "r1");
  auto s2 = j.step(1, 2, 3, "r2");
  j.failed(1, 3, "boom");
  j.undone(0, 1, 3, "r2-partial-undone");
  {
    auto t = j.fold();
    EXPECT_TRUE(t.root()->partial_undone);
    EXPECT_EQ(t.root()->data, "r2-partial-undone");
    EXPECT_FALSE(t.root()->steps[0].undone);
    EXPECT_FALSE(t.root()->steps[1].undone);
  }
  j.undone(s2, 1, 2, "r1");
  {
    auto t = j.fold();
    EXPECT_FALSE(t.root()->steps[0].undone);
    EXPECT_TRUE(t.root()->steps[1].undone);
    EXPECT_EQ(t.root()->data, "r1");
  }
  j.undone(s1, 1, 1, "r0");
  j.rolled_back("boom");
  auto t = j.fold();
  EXPECT_TRUE(t.root()->steps[0].undone);
  EXPECT_TRUE(t.rolled_back);
  EXPECT_TRUE(t.finished);
  EXPECT_EQ(t.root()->status, proc_state::rolledback);
  EXPECT_EQ(t.root()->error, "boom");
}

// An undo handed to a worker waits for its task until its RollbackStepDone; one whose task
// failed for good waits for none (its handler runs again and dispatches a new one), and the
// new dispatch is the one waited for.
TEST(tree_image_test, an_undo_waits_for_its_last_dispatched_task_unless_that_one_failed) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  auto s1 = j.step(1, 1, 2, "r1");
  j.failed(1, 2, "boom");
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 2U);  // the partly run state 2, then the step of state 1
  const auto& item = plan[1];
  ASSERT_EQ(item.lsn, s1);
  EXPECT_EQ(undo_task_of(j.fold(), item), nullptr);
  j.undo_dispatched(s1, 1, 1, "call:1:undo:5:1");
  {
    auto t = j.fold();
    const auto* u = undo_task_of(t, item);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->key, "call:1:undo:5:1");
    EXPECT_EQ(u->data, "handler's data");
  }
  j.undo_dispatched(s1, 1, 1, "call:1:undo:5:1", "refund service down");
  EXPECT_EQ(undo_task_of(j.fold(), item), nullptr);
  j.undo_dispatched(s1, 1, 1, "call:1:undo:9:2");
  {
    auto t = j.fold();
    const auto* u = undo_task_of(t, item);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->key, "call:1:undo:9:2");
  }
  j.undone(s1, 1, 1, "r0");
  EXPECT_EQ(undo_task_of(j.fold(), item), nullptr);
}

TEST(tree_image_test, rolled_back_ends_every_procedure) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});
  j.finished(2, pb::SUCCESS, "{}");
  j.failed(3, 1, "boom");
  j.rolled_back("tree rolled back");
  auto t = j.fold();
  for (const auto& [id, p] : t.procs)
    EXPECT_EQ(p.status, proc_state::rolledback) << id;
  EXPECT_EQ(t.find(3)->error, "boom");
  EXPECT_EQ(t.find(2)->error, "tree rolled back");
  EXPECT_EQ(t.root()->error, "tree rolled back");
  EXPECT_TRUE(t.finished);
  EXPECT_TRUE(t.rolled_back);
}

TEST(tree_image_test, finished_of_a_child_does_not_finish_the_tree) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}});
  j.finished(2, pb::SUCCESS);
  EXPECT_FALSE(j.fold().finished);
  j.finished(1, pb::SUCCESS, "\"r\"");
  EXPECT_TRUE(j.fold().finished);
}

TEST(tree_image_test, no_return_step_marks_the_tree) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  EXPECT_FALSE(j.fold().past_no_return);
  j.step(1, 2, 3, "r2", {}, true);
  auto t = j.fold();
  EXPECT_TRUE(t.past_no_return);
  EXPECT_FALSE(t.root()->steps[0].no_return);
  EXPECT_TRUE(t.root()->steps[1].no_return);
}

TEST(tree_image_test, other_trees_and_node_records_are_ignored) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  pb::JournalRecord floor;
  floor.mutable_id_floor()->set_next_id(100);
  j.add(floor);
  pb::JournalRecord ev;
  ev.mutable_event()->set_event_key("k");
  j.add(ev);
  auto recs = j.records();
  journal_builder other(2);
  other.submitted(2, 0, "x0");
  other.step(2, 1, 2, "x1");
  other.raw("garbage\xff\xff\xff\xff");
  for (const auto& r : other.records())
    recs.push_back(r);
  auto t = fold_tree(1, recs);
  EXPECT_EQ(t.corrupt, "");
  EXPECT_EQ(t.procs.size(), 1u);
  EXPECT_EQ(t.root()->data, "r0");
  EXPECT_EQ(t.last_lsn, 3u);
}

// -- corruption ---------------------------------------------------------------------------------

TEST(tree_image_test, unparsable_value_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.raw(std::string("\xff\xff\xff\xff", 4));  // a varint tag that never ends
  j.step(1, 1, 2, "r1");
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "unparsable record at lsn 2");
  // The records around it are still folded.
  EXPECT_EQ(t.root()->data, "r1");
}

TEST(tree_image_test, record_naming_an_unknown_procedure_marks_the_tree_corrupt) {
  const std::vector<std::function<void(journal_builder&)>> bad{
    [](journal_builder& j) { j.step(9, 1, 2, "x"); },
    [](journal_builder& j) { j.suspended(9, "k", 0, 2); },
    [](journal_builder& j) { j.timer(9, 1, 2); },
    [](journal_builder& j) { j.delivered(9, "k", ""); },
    [](journal_builder& j) { j.failed(9, 1, "e"); },
    [](journal_builder& j) { j.undone(0, 9, 1, ""); },
    [](journal_builder& j) { j.finished(9, pb::SUCCESS); },
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    journal_builder j(1);
    j.submitted(1, 0, "r0");
    bad[i](j);
    j.step(1, 1, 2, "r1");
    auto t = j.fold();
    EXPECT_EQ(t.corrupt, "record at lsn 2 names unknown procedure 9") << "case " << i;
    EXPECT_EQ(t.find(9), nullptr) << "case " << i;
    EXPECT_FALSE(t.failed) << "case " << i;
  }
}

TEST(tree_image_test, first_corruption_is_kept) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(7, 1, 2, "x");
  j.raw(std::string("\xff\xff\xff\xff", 4));
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "record at lsn 2 names unknown procedure 7");
}

// Found by the journal_record fuzzer: a Step for a child placed on another node was folded in
// as a committed step here, so the rollback plan ordered an undo nobody would run.
/// A Submitted record of procedure `id` (child of `parent`) placed on node `node`.
pb::JournalRecord placed_on(uint64_t id, uint64_t parent, const std::string& node) {
  pb::JournalRecord r;
  r.set_format(1);
  auto* s = r.mutable_submitted();
  s->set_proc_id(id);
  s->set_parent_id(parent);
  s->set_type("t.demo");
  s->set_state(1);
  s->set_node(node);
  return r;
}

TEST(tree_image_test, step_of_a_child_on_another_node_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1", {2});
  j.add(placed_on(2, 1, "b"));
  j.step(2, 1, 2, "a1");
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "Step at lsn 4 for procedure 2, which runs on node b");
  ASSERT_NE(t.find(2), nullptr);
  EXPECT_TRUE(t.find(2)->steps.empty());
  for (const auto& u : rollback_plan(t))
    EXPECT_FALSE(u.proc_id == 2 && !u.remote) << "undo of a remote child's step planned here";
}

// Found by the journal_record fuzzer: a second Submitted for a procedure that had committed
// steps replaced it with a placeholder on another node, and the rollback plan then held both
// the fragment's undo and the step's, for a procedure the check counted once.
TEST(tree_image_test, second_submitted_for_a_procedure_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.submitted(2, 1, "a0");
  j.step(2, 1, 2, "a1");
  j.add(placed_on(2, 1, "b"));
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "second Submitted for procedure 2 at lsn 4");
  ASSERT_NE(t.find(2), nullptr);
  EXPECT_FALSE(t.find(2)->remote()) << "the first Submitted stays";
  EXPECT_EQ(t.find(2)->steps.size(), 1u);
}

TEST(tree_image_test, empty_record_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  pb::JournalRecord empty;
  empty.set_format(1);
  j.add(empty);
  EXPECT_EQ(j.fold().corrupt, "empty record at lsn 2");
}

TEST(tree_image_test, missing_root_submitted_marks_the_tree_corrupt) {
  journal_builder j(1);
  j.submitted(2, 1, "a0");
  j.step(2, 1, 2, "a1");
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "tree has no Submitted record for its root");
  EXPECT_EQ(fold_tree(1, {}).corrupt, "tree has no Submitted record for its root");
}

// -- summaries ----------------------------------------------------------------------------------

pb::TreeSummary sample_summary() {
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

TEST(tree_image_test, summary_replaces_the_folded_procedures) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}, {4, "c0"}});
  j.summary(sample_summary());
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "");
  EXPECT_TRUE(t.summarized);
  EXPECT_TRUE(t.finished);
  EXPECT_FALSE(t.rolled_back);
  EXPECT_FALSE(t.failed);
  EXPECT_EQ(t.finished_at_ms, 424242);
  ASSERT_EQ(t.procs.size(), 3u);
  EXPECT_EQ(t.find(4), nullptr);
  const auto* r = t.root();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, "t.root");
  EXPECT_EQ(r->status, proc_state::success);
  EXPECT_EQ(r->result_json, R"({"r":1})");
  EXPECT_EQ(r->children, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(r->nonce, "n-1");
  EXPECT_TRUE(r->steps.empty());
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(t.find(3)->parent_id, 1u);
  EXPECT_EQ(t.find(3)->result_json, "7");
}

TEST(tree_image_test, summary_alone_is_a_whole_tree) {
  journal_builder j(1, 50);
  j.summary(sample_summary());
  auto t = j.fold();
  EXPECT_EQ(t.corrupt, "");
  EXPECT_TRUE(t.summarized);
  EXPECT_EQ(t.last_lsn, 50u);
  EXPECT_EQ(t.procs.size(), 3u);
}

TEST(tree_image_test, summary_with_rolled_back_procedures_is_a_rolled_back_tree) {
  auto s = sample_summary();
  for (auto& p : *s.mutable_procs()) {
    p.set_state(pb::ROLLEDBACK);
    p.set_error("boom");
  }
  journal_builder j(1);
  j.summary(s);
  auto t = j.fold();
  EXPECT_TRUE(t.rolled_back);
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.root()->status, proc_state::rolledback);
  EXPECT_EQ(t.root()->error, "boom");
}

TEST(tree_image_test, summarize_round_trips_through_fold) {
  journal_builder j(1);
  j.submitted(1, 0, "r0", 1, "t.root");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});
  j.finished(2, pb::SUCCESS, R"({"a":2})");
  j.finished(3, pb::FAILED, "", "b broke");
  j.step(1, 2, 3, "r2");
  j.finished(1, pb::SUCCESS, R"({"root":true})");
  auto t = j.fold();
  ASSERT_EQ(t.corrupt, "");

  auto s = summarize(t, 99);
  EXPECT_EQ(s.finished_at_ms(), 99);
  ASSERT_EQ(s.procs_size(), 3);
  EXPECT_EQ(s.procs(0).proc_id(), 1u);
  EXPECT_EQ(s.procs(0).parent_id(), 0u);
  EXPECT_EQ(s.procs(0).type(), "t.root");
  EXPECT_EQ(s.procs(0).state(), pb::SUCCESS);
  EXPECT_EQ(s.procs(0).nonce(), "nonce-1");
  EXPECT_EQ(s.procs(0).children_size(), 2);
  EXPECT_EQ(s.procs(2).state(), pb::FAILED);
  EXPECT_EQ(s.procs(2).error(), "b broke");

  journal_builder k(1, 200);
  k.summary(s);
  auto u = k.fold();
  ASSERT_EQ(u.corrupt, "");
  EXPECT_TRUE(u.summarized);
  EXPECT_TRUE(u.finished);
  EXPECT_EQ(u.finished_at_ms, 99);
  ASSERT_EQ(u.procs.size(), t.procs.size());
  for (const auto& [id, p] : t.procs) {
    const auto* q = u.find(id);
    ASSERT_NE(q, nullptr) << id;
    EXPECT_EQ(q->id, p.id);
    EXPECT_EQ(q->parent_id, p.parent_id) << id;
    EXPECT_EQ(q->type, p.type) << id;
    EXPECT_EQ(q->status, p.status) << id;
    EXPECT_EQ(q->result_json, p.result_json) << id;
    EXPECT_EQ(q->error, p.error) << id;
    EXPECT_EQ(q->children, p.children) << id;
    EXPECT_EQ(q->nonce, p.nonce) << id;
  }
  // Summarizing the folded summary gives the same record again.
  EXPECT_EQ(summarize(u, 99).SerializeAsString(), s.SerializeAsString());
}

// -- times ---------------------------------------------------------------------------------------

/// A record with its time set (the builder writes records as older journals have them).
pb::JournalRecord at(pb::JournalRecord r, int64_t ms) {
  switch (r.body_case()) {
    case pb::JournalRecord::kStep:
      r.mutable_step()->set_committed_at_ms(ms);
      break;
    case pb::JournalRecord::kDelivered:
      r.mutable_delivered()->set_at_ms(ms);
      break;
    case pb::JournalRecord::kFailed:
      r.mutable_failed()->set_at_ms(ms);
      break;
    case pb::JournalRecord::kFinished:
      r.mutable_finished()->set_at_ms(ms);
      break;
    case pb::JournalRecord::kRolledBack:
      r.mutable_rolled_back()->set_at_ms(ms);
      break;
    default:
      break;
  }
  return r;
}

pb::JournalRecord step_rec(uint64_t id, int32_t next, std::vector<uint64_t> children = {}) {
  pb::JournalRecord r;
  auto* s = r.mutable_step();
  s->set_proc_id(id);
  s->set_executed_state(next - 1);
  s->set_next_state(next);
  for (auto c : children)
    s->add_children(c);
  return r;
}

TEST(tree_image_test, times_come_from_the_records_that_set_them) {
  journal_builder j(1);
  auto check = [&](uint64_t id, proc_state status, int64_t since, int64_t ended) {
    auto t = j.fold();
    ASSERT_EQ(t.corrupt, "");
    const auto* p = t.find(id);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->status, status) << id;
    EXPECT_EQ(p->since_ms, since) << id;
    EXPECT_EQ(p->ended_at_ms, ended) << id;
  };
  j.submitted(1, 0, "r");  // submitted at 1001
  check(1, proc_state::runnable, 1001, 0);
  j.add(at(step_rec(1, 2), 1050));  // runnable still: in its state since its submit
  check(1, proc_state::runnable, 1001, 0);
  j.add(at(step_rec(1, 3, {2, 3}), 1100));
  j.submitted(2, 1, "a");
  j.submitted(3, 1, "b");
  check(1, proc_state::waiting, 1100, 0);
  check(2, proc_state::runnable, 1002, 0);
  j.add(at(step_rec(2, 2), 1200));
  pb::JournalRecord fin;
  fin.mutable_finished()->set_proc_id(2);
  fin.mutable_finished()->set_state(pb::SUCCESS);
  j.add(at(fin, 1200));
  check(2, proc_state::success, 1200, 1200);
  j.add(at(step_rec(3, 2), 1300));
  j.suspended(3, "k", 0, 2);  // with its step: waiting since the step's commit
  check(3, proc_state::waiting, 1300, 0);
  pb::JournalRecord del;
  del.mutable_delivered()->set_proc_id(3);
  del.mutable_delivered()->set_event_key("k");
  j.add(at(del, 1400));
  check(3, proc_state::runnable, 1400, 0);
  j.add(at(step_rec(3, 3), 1500));
  fin.mutable_finished()->set_proc_id(3);
  j.add(at(fin, 1550));
  check(3, proc_state::success, 1550, 1550);
  // Its children ended: the parent runs again from the last of their ends.
  check(1, proc_state::runnable, 1550, 0);
  j.add(at(step_rec(1, 4), 1600));
  check(1, proc_state::runnable, 1550, 0);
  j.timer(1, 2000, 5);  // with its step
  check(1, proc_state::waiting_timeout, 1600, 0);
  j.add(at(step_rec(1, 6), 2100));  // ran from its wake-up on
  check(1, proc_state::runnable, 2000, 0);
  pb::JournalRecord failed;
  failed.mutable_failed()->set_proc_id(1);
  failed.mutable_failed()->set_error("boom");
  j.add(at(failed, 2200));
  failed.mutable_failed()->set_error("second");
  j.add(at(failed, 2300));
  EXPECT_EQ(j.fold().failed_at_ms, 2200);
  pb::JournalRecord rb;
  rb.mutable_rolled_back()->set_error("boom");
  j.add(at(rb, 2400));
  check(1, proc_state::rolledback, 2400, 2400);
  check(2, proc_state::rolledback, 2400, 2400);

  // A summary keeps each procedure's start and end.
  auto s = summarize(j.fold(), 2500);
  journal_builder k(1, 100);
  k.summary(s);
  auto u = k.fold();
  for (uint64_t id : {1, 2, 3}) {
    const auto* p = u.find(id);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->submitted_at_ms, static_cast<int64_t>(1000 + id)) << id;
    EXPECT_EQ(p->ended_at_ms, 2400) << id;
    EXPECT_EQ(p->since_ms, 2400) << id;
  }
}

// Journals written before the times were recorded: unknown times stay 0 (the executor shows
// its own clock for them), but a summary's procedures end with their tree.
TEST(tree_image_test, older_records_without_times_leave_them_unknown) {
  journal_builder j(1);
  j.submitted(1, 0, "r");
  j.spawn(1, 1, 2, "r1", {{2, "a"}});
  j.finished(2, pb::SUCCESS);
  auto t = j.fold();
  EXPECT_EQ(t.find(1)->since_ms, 0);  // the spawn's commit time was not recorded
  EXPECT_EQ(t.find(2)->ended_at_ms, 0);
  EXPECT_EQ(t.find(2)->since_ms, 0);
  EXPECT_EQ(t.find(1)->status, proc_state::runnable);
  auto s = summarize(t, 777);
  s.mutable_procs(1)->clear_ended_at_ms();  // as a summary written before the field
  journal_builder k(1, 100);
  k.summary(s);
  EXPECT_EQ(k.fold().find(2)->ended_at_ms, 777);
}

// -- rollback plans -----------------------------------------------------------------------------

/// Root 1 spawns 2 and 3; both make progress interleaved; 2 succeeds; 3 fails in state 3.
journal_builder failed_tree() {
  journal_builder j(1);
  j.submitted(1, 0, "r0");                         // 1
  j.step(1, 1, 2, "r1");                           // 2
  j.spawn(1, 2, 3, "r2", {{2, "a0"}, {3, "b0"}});  // 3, 4, 5
  j.step(2, 1, 2, "a1");                           // 6
  j.step(3, 1, 2, "b1");                           // 7
  j.step(2, 2, 3, "a2");                           // 8
  j.finished(2, pb::SUCCESS);                      // 9
  j.step(3, 2, 3, "b2");                           // 10
  j.failed(3, 3, "boom");                          // 11
  return j;
}

TEST(rollback_plan_test, partial_states_first_then_steps_by_descending_lsn) {
  auto j = failed_tree();
  auto t = j.fold();
  ASSERT_EQ(t.corrupt, "");
  ASSERT_TRUE(t.failed);
  auto plan = rollback_plan(t);
  ASSERT_EQ(plan.size(), 8u) << describe(plan);
  // Partial states of the procedures that had not ended: 3 (failed), then 1 (waiting).
  expect_item(plan[0], 3, 3, 0, "b2");
  expect_item(plan[1], 1, 3, 0, "r2");
  // Every committed step, newest first, parent and children interleaved, each undone with
  // the data it committed.
  expect_item(plan[2], 3, 2, 10, "b2");
  expect_item(plan[3], 2, 2, 8, "a2");
  expect_item(plan[4], 3, 1, 7, "b1");
  expect_item(plan[5], 2, 1, 6, "a1");
  expect_item(plan[6], 1, 2, 3, "r2");
  expect_item(plan[7], 1, 1, 2, "r1");
  EXPECT_FALSE(plan[0].committed());
  EXPECT_TRUE(plan[2].committed());
}

TEST(rollback_plan_test, failed_procedure_undoes_its_failed_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  j.failed(1, 5, "boom");  // the step of state 5 failed, though 2 was to run next
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 2u) << describe(plan);
  expect_item(plan[0], 1, 5, 0, "r1");
  expect_item(plan[1], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, a_failure_outside_a_step_undoes_the_current_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");
  j.failed(1, 0, "escalated");  // no step failed: supervision gave up on the tree
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 2u) << describe(plan);
  expect_item(plan[0], 1, 2, 0, "r1");
  expect_item(plan[1], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, committed_lsns_strictly_descend_across_the_tree) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}, {4, "c0"}});
  for (int round = 0; round < 4; ++round)
    for (uint64_t c : {4, 2, 3})
      j.step(c, round + 1, round + 2, "x" + std::to_string(round));
  j.failed(2, 5, "boom");
  auto plan = rollback_plan(j.fold());
  std::vector<uint64_t> lsns;
  for (const auto& u : plan)
    if (u.lsn != 0)
      lsns.push_back(u.lsn);
  ASSERT_EQ(lsns.size(), 13u) << describe(plan);
  for (size_t i = 1; i < lsns.size(); ++i)
    EXPECT_GT(lsns[i - 1], lsns[i]) << describe(plan);
  // The partial undos all come before the first committed step.
  size_t partials = 0;
  while (partials < plan.size() && plan[partials].lsn == 0)
    ++partials;
  EXPECT_EQ(partials, 4u) << describe(plan);
  EXPECT_EQ(plan.size(), partials + lsns.size());
}

TEST(rollback_plan_test, resumes_after_recorded_undos_without_repeating_any) {
  auto full = rollback_plan(failed_tree().fold());
  ASSERT_EQ(full.size(), 8u);
  for (size_t done = 0; done <= full.size(); ++done) {
    auto j = failed_tree();
    for (size_t i = 0; i < done; ++i)
      j.undone(full[i].lsn, full[i].proc_id, full[i].state, "after-undo-" + std::to_string(i));
    auto t = j.fold();
    ASSERT_EQ(t.corrupt, "");
    auto rest = rollback_plan(t);
    ASSERT_EQ(rest.size(), full.size() - done) << "after " << done << ": " << describe(rest);
    for (size_t i = 0; i < rest.size(); ++i) {
      SCOPED_TRACE("after " + std::to_string(done) + " undos, item " + std::to_string(i));
      const auto& want = full[done + i];
      EXPECT_EQ(rest[i].proc_id, want.proc_id);
      EXPECT_EQ(rest[i].state, want.state);
      EXPECT_EQ(rest[i].lsn, want.lsn);
      EXPECT_EQ(rest[i].data, want.data);
    }
  }
}

TEST(rollback_plan_test, finished_children_have_no_partial_undo_but_their_steps_are_undone) {
  auto t = failed_tree().fold();
  auto plan = rollback_plan(t);
  for (const auto& u : plan) {
    if (u.proc_id == 2) {
      EXPECT_NE(u.lsn, 0u) << describe(plan);
    }
  }
}

TEST(rollback_plan_test, no_return_steps_are_left_out) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");            // 2
  j.step(1, 2, 3, "r2", {}, true);  // 3: point of no return
  j.step(1, 3, 4, "r3");            // 4
  j.failed(1, 4, "boom");
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 3u) << describe(plan);
  expect_item(plan[0], 1, 4, 0, "r3");
  expect_item(plan[1], 1, 3, 4, "r3");
  expect_item(plan[2], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, waiting_and_sleeping_procedures_undo_their_current_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}, {3, "b0"}});  // 2, 3, 4
  j.step(2, 1, 7, "a1");                           // 5
  j.suspended(2, "k", 0, 7);                       // 6
  j.step(3, 1, 8, "b1");                           // 7
  j.timer(3, 1000, 8);                             // 8
  j.failed(1, 2, "aborted");                       // 9
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 6u) << describe(plan);
  expect_item(plan[0], 3, 8, 0, "b1");
  expect_item(plan[1], 2, 7, 0, "a1");
  expect_item(plan[2], 1, 2, 0, "r1");
  expect_item(plan[3], 3, 1, 7, "b1");
  expect_item(plan[4], 2, 1, 5, "a1");
  expect_item(plan[5], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, nothing_left_once_everything_is_undone) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  auto s = j.step(1, 1, 2, "r1");
  j.failed(1, 2, "boom");
  j.undone(0, 1, 2, "r1");
  j.undone(s, 1, 1, "r0");
  EXPECT_TRUE(rollback_plan(j.fold()).empty());
}

TEST(rollback_plan_test, fresh_root_has_only_its_partial_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0", 4);
  j.failed(1, 4, "boom");
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 1u);
  expect_item(plan[0], 1, 4, 0, "r0");
}

// An abort (or a sibling's failure) while a step ran: the step commits after the Failed
// record. Its state is undone once, as a committed step; the partly run state is the one
// after it, which the stop may report as never started.
TEST(rollback_plan_test, a_failing_step_that_committed_after_all_is_not_undone_twice) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.step(1, 1, 2, "r1");  // 2
  j.failed(1, 2, "boom");
  j.step(1, 2, 3, "r2");  // 4: state 2's step was still running
  auto t = j.fold();
  EXPECT_EQ(t.root()->failed_state, 0);
  auto plan = rollback_plan(t);
  ASSERT_EQ(plan.size(), 3u) << describe(plan);
  expect_item(plan[0], 1, 3, 0, "r2");
  expect_item(plan[1], 1, 2, 4, "r2");
  expect_item(plan[2], 1, 1, 2, "r1");
}

TEST(rollback_plan_test, a_state_that_never_started_has_no_partial_undo) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.spawn(1, 1, 2, "r1", {{2, "a0"}});  // 2, 3
  j.failed(1, 0, "aborted");
  pb::JournalRecord r;
  auto* u = r.mutable_undone();
  u->set_proc_id(2);
  u->set_state(1);
  u->set_never_started(true);
  j.add(r);
  auto t = j.fold();
  EXPECT_TRUE(t.find(2)->partial_undone);
  EXPECT_EQ(t.find(2)->data, "a0");  // nothing ran, nothing changed
  auto plan = rollback_plan(t);
  ASSERT_EQ(plan.size(), 2u) << describe(plan);
  expect_item(plan[0], 1, 2, 0, "r1");
  expect_item(plan[1], 1, 1, 2, "r1");
  EXPECT_EQ(undos_done(t), 1u);
}

TEST(rollback_plan_test, a_step_that_ended_its_procedure_leaves_no_partial_state) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  j.failed(1, 0, "aborted");
  pb::JournalRecord r;
  auto* s = r.mutable_step();
  s->set_proc_id(1);
  s->set_executed_state(1);
  s->set_data("r1");
  s->set_ended(true);  // it returned done while the tree was failing
  auto lsn = j.add(r);
  auto plan = rollback_plan(j.fold());
  ASSERT_EQ(plan.size(), 1u) << describe(plan);
  expect_item(plan[0], 1, 1, lsn, "r1");
}

// Found by the journal-record fuzzer: a tree compacted after an undo (its snapshot counts the
// undone step it left out) and then summarized folded otherwise than the same tree whole.
TEST(rollback_plan_test, a_summary_after_a_compaction_counts_no_undo_left_out) {
  auto full = rollback_plan(failed_tree().fold());
  // Partial states first (lsn 0), then steps: undo up to the first step.
  size_t n = 0;
  while (n < full.size() && full[n].lsn == 0)
    ++n;
  ASSERT_LT(n, full.size());
  ++n;
  auto j = failed_tree();
  for (size_t i = 0; i < n; ++i)
    j.undone(full[i].lsn, full[i].proc_id, full[i].state, "x");
  auto head = j.fold();
  ASSERT_EQ(undos_done(head), n);
  journal_builder k(1, head.last_lsn);
  pb::JournalRecord snap;
  snap.set_format(1);
  *snap.mutable_snapshot() = snapshot_of(head, 0);
  k.add(snap);
  ASSERT_EQ(k.fold().undos_dropped, 1u);  // the undone step, left out
  ASSERT_EQ(undos_done(k.fold()), n);
  j.summary(sample_summary());
  k.summary(sample_summary());
  auto whole = j.fold();
  auto compacted = k.fold();
  EXPECT_EQ(compacted.undos_dropped, 0u);
  EXPECT_EQ(undos_done(compacted), undos_done(whole));
}

TEST(rollback_plan_test, undos_done_counts_what_earlier_incarnations_undid) {
  auto full = rollback_plan(failed_tree().fold());
  for (size_t done = 0; done <= full.size(); ++done) {
    auto j = failed_tree();
    for (size_t i = 0; i < done; ++i)
      j.undone(full[i].lsn, full[i].proc_id, full[i].state, "x");
    auto t = j.fold();
    EXPECT_EQ(undos_done(t), done);
    EXPECT_EQ(undos_done(t) + rollback_plan(t).size(), full.size());
  }
}

}  // namespace
}  // namespace proctor

namespace proctor {
namespace {

/// Root 1, submitted, whose step 1 spawns children 2 and 3 with join::at_least(k) (and
/// child_failure::wait_for_siblings when `wait`); their Submitted records are the test's.
journal_builder root_spawning_two(uint32_t k, bool wait = false) {
  journal_builder j(1);
  j.submitted(1, 0, "r0");
  pb::JournalRecord sp;
  auto* s = sp.mutable_step();
  s->set_proc_id(1);
  s->set_executed_state(1);
  s->set_next_state(2);
  s->set_data("r1");
  s->add_children(2);
  s->add_children(3);
  s->set_join_at_least(k);
  s->set_join_wait_for_siblings(wait);
  j.add(sp);
  return j;
}

// Join policies (docs/flow-control.md): a Cancelled record marks the children it names as
// pending cancellation (never run forward again, their parent still WAITING); the Finished
// records with `cancelled` close them, and the parent whose join is met runs again. Their
// undone steps are out of any later rollback plan.
TEST(tree_image_join_test, a_cancellation_is_pending_until_its_finished_records) {
  auto j = root_spawning_two(1);
  j.submitted(2, 1, "a0");
  j.submitted(3, 1, "b0");
  j.step(2, 1, 2, "a1");
  j.finished(2, pb::SUCCESS);
  auto b1 = j.step(3, 1, 2, "b1");
  pb::JournalRecord c;
  c.mutable_cancelled()->set_parent_id(1);
  c.mutable_cancelled()->add_children(3);
  c.mutable_cancelled()->set_reason("join::any met");
  j.add(c);
  auto t = j.fold();
  ASSERT_TRUE(t.corrupt.empty()) << t.corrupt;
  EXPECT_EQ(t.find(1)->join_at_least, 1u);
  EXPECT_TRUE(t.find(3)->cancel_pending);
  EXPECT_EQ(t.find(3)->cancel_reason, "join::any met");
  EXPECT_EQ(t.find(1)->status, proc_state::waiting) << "runs on before its children are undone";
  j.undone(b1, 3, 1, "b0");
  pb::JournalRecord f;
  f.mutable_finished()->set_proc_id(3);
  f.mutable_finished()->set_state(pb::ROLLEDBACK);
  f.mutable_finished()->set_error("join::any met");
  f.mutable_finished()->set_cancelled(true);
  j.add(f);
  t = j.fold();
  EXPECT_FALSE(t.find(3)->cancel_pending);
  EXPECT_TRUE(t.find(3)->cancelled);
  EXPECT_EQ(t.find(3)->status, proc_state::rolledback);
  EXPECT_EQ(t.find(1)->status, proc_state::runnable);
  // A later failure of the tree undoes the rest, and nothing of the cancelled child again.
  j.failed(1, 0, "aborted");
  auto plan = rollback_plan(j.fold());
  for (const auto& item : plan)
    EXPECT_NE(item.proc_id, 3u) << "the cancelled child is undone twice";
}

// A parent whose join cannot be met stays WAITING when its children all ended: its actor
// fails the join (it must not run on as if the join were met).
TEST(tree_image_join_test, an_unmet_join_does_not_let_the_parent_run) {
  auto j = root_spawning_two(2, true);
  j.submitted(2, 1, "a0");
  j.submitted(3, 1, "b0");
  j.finished(2, pb::SUCCESS);
  pb::JournalRecord f;
  f.mutable_finished()->set_proc_id(3);
  f.mutable_finished()->set_state(pb::FAILED);
  f.mutable_finished()->set_cancelled(true);
  j.add(f);
  auto t = j.fold();
  EXPECT_TRUE(t.find(1)->join_wait);
  EXPECT_EQ(t.find(1)->status, proc_state::waiting);
}

}  // namespace
}  // namespace proctor
