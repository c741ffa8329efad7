// A tree's summary (tree_snapshot.hpp) folded in place of its procedures, and the times the
// records set (submitted, started, ended).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"
#include "persistence/tree_snapshot.hpp"
#include "tests/support/journal_builder.hpp"

namespace proctor {
namespace {

using journal_testing::journal_builder;
using journal_testing::sample_summary;

// -- summaries ----------------------------------------------------------------------------------

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

}  // namespace
}  // namespace proctor
