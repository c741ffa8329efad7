// A node that comes back empty is not the node that left (docs/cluster.md, "Incarnations"):
// node b is SIGKILLed while it runs children of a tree of node a, its data directory is
// deleted and it starts again, empty, under the same name and address. Node a notices the
// new incarnation at its first heartbeat answer and refuses b's answers for the old one's: b
// is down for a, saying why; the tree keeps waiting for its children, and an abort rolls
// back a's part but never reports the tree ROLLEDBACK while b's part (its ledger files) is
// not undone. a remembers across its own restart; b takes a as it is.
#include <algorithm>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "tests/process/cluster_fixture.hpp"

namespace proctor::test {
namespace {

class incarnations : public cluster {
public:
  incarnations() { count_ = 2; }

  /// Node a's view of b: its `reason` once it is down (empty while up or not listed).
  std::string why_b_is_down() {
    auto seen = nodes_seen_by(0);
    auto b = seen.find("b");
    if (b == seen.end() || b->second.fields().at("up").bool_value())
      return {};
    return b->second.fields().at("reason").string_value();
  }

  /// The CLI against node b.
  run_result ctl_b(const std::vector<std::string>& args) { return nodes_[1]->ctl(args, 30s); }

  std::string status_of(uint64_t id) {
    auto r = nodes_[0]->ctl({"status", std::to_string(id), "--json"}, 30s);
    return r.out;
  }
};

TEST_F(incarnations, a_node_restarted_empty_is_not_taken_for_the_one_that_left) {
  auto id = submit(0, R"(,"steps":3,"children":2,"depth":1,"spread":false,"place_on":"b",)"
                      R"("step_sleep_ms":300)");
  ASSERT_NE(id, 0u);
  // b runs the children: some of their ledger files are there (the root wrote one).
  ASSERT_TRUE(eventually([&] { return ledger_files() >= 3; }, 30s)) << nodes_[1]->log_tail();
  nodes_[1]->kill();
  fs::remove_all(nodes_[1]->data_dir());
  ASSERT_TRUE(nodes_[1]->start()) << nodes_[1]->log_tail();
  const auto kept = ledger_files();

  std::string why;
  ASSERT_TRUE(eventually(
    [&] { return (why = why_b_is_down()).find("another journal") != std::string::npos; }, 20s))
    << why << nodes_[0]->log_tail();
  EXPECT_NE(why.find("incarnation"), std::string::npos) << why;
  // b takes a as it is (it knew nothing of a).
  EXPECT_TRUE(sees(1, "a", true)) << nodes_[1]->log_tail();

  // The tree has not ended: it waits for its children on b.
  auto w = nodes_[0]->ctl({"wait", std::to_string(id), "--timeout-s", "2"}, 30s);
  EXPECT_EQ(w.exit_code, 2) << w.out << w.err;
  // Aborted: a's part is rolled back, the order to undo b's part waits for the b that left.
  auto ab = nodes_[0]->ctl({"abort", std::to_string(id)}, 30s);
  EXPECT_EQ(ab.exit_code, 0) << ab.out << ab.err;
  std::string st;
  ASSERT_TRUE(eventually(
    [&] { return (st = status_of(id)).find("waiting for node b") != std::string::npos; }, 30s))
    << st;
  EXPECT_EQ(st.find("ROLLEDBACK"), std::string::npos) << st;
  // What b's old part wrote is still there: nobody claims it undone.
  EXPECT_GE(ledger_files(), kept - 1);  // (a's root undid its own step)

  // a remembers b's incarnation across its own restart.
  nodes_[0]->kill();
  ASSERT_TRUE(nodes_[0]->start()) << nodes_[0]->log_tail();
  ASSERT_TRUE(
    eventually([&] { return why_b_is_down().find("another journal") != std::string::npos; }, 20s))
    << nodes_[0]->log_tail();
  st = status_of(id);
  EXPECT_EQ(st.find("ROLLEDBACK"), std::string::npos) << st;
}

// `node forget` (docs/cluster.md, "Forgetting a node") across SIGKILLs: b is killed while it
// runs children of a tree of a; an operator forgets it on a. The tree fails and undoes what
// is on a; b's children end FAILED "not undone" (their ledger files stay), never ROLLEDBACK.
// b restarted on its old journal is refused for good, also after a restarts; b started empty
// is a new node and is taken.
TEST_F(incarnations, a_forgotten_nodes_part_is_named_lost_and_its_old_journal_is_refused) {
  auto id = submit(0, R"(,"steps":3,"children":2,"depth":1,"spread":false,"place_on":"b",)"
                      R"("step_sleep_ms":300)");
  ASSERT_NE(id, 0u);
  ASSERT_TRUE(eventually([&] { return ledger_files() >= 3; }, 30s)) << nodes_[1]->log_tail();
  nodes_[1]->kill();
  ASSERT_TRUE(sees(0, "b", false)) << nodes_[0]->log_tail();
  const auto kept = ledger_files();

  // Without the confirmation nothing is done.
  auto no = nodes_[0]->ctl({"node", "forget", "b"}, 30s);
  EXPECT_EQ(no.exit_code, 1) << no.out << no.err;
  EXPECT_NE(no.err.find("--confirm-lost"), std::string::npos) << no.err;
  auto yes = nodes_[0]->ctl({"node", "forget", "b", "--confirm-lost"}, 30s);
  ASSERT_EQ(yes.exit_code, 0) << yes.out << yes.err;
  EXPECT_NE(yes.out.find("2 procedure(s) placed there are lost"), std::string::npos) << yes.out;

  EXPECT_EQ(final_state(0, id), "ROLLEDBACK");
  auto st = status_of(id);
  EXPECT_NE(st.find("not undone: procedure"), std::string::npos) << st;
  auto tree = nodes_[0]->ctl({"tree", std::to_string(id), "--json"}, 30s);
  EXPECT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_NE(tree.out.find("not undone: node b forgotten"), std::string::npos) << tree.out;
  // a's own step is undone; what b's children wrote stays, named, not claimed undone.
  EXPECT_EQ(ledger_files(), kept - 1);

  // b comes back on its old journal: at a's first heartbeat answer it learns that a forgot
  // this journal, records it and stops (issue 46.11: before, it ran on with what it held);
  // every later start on that journal is refused, saying why. Also after a restarts.
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(nodes_[1]->launch()) << nodes_[1]->log_tail();
    ASSERT_TRUE(eventually([&] { return !nodes_[1]->running(); }, 30s)) << nodes_[1]->log_tail();
    EXPECT_EQ(nodes_[1]->last_exit_code(), 1) << nodes_[1]->log_tail();
    auto log = nodes_[1]->log_tail(3);
    EXPECT_NE(log.find("node a forgot this journal"), std::string::npos) << log;
    EXPECT_NE(log.find("empty the data directory"), std::string::npos) << log;
    nodes_[0]->kill();
    ASSERT_TRUE(nodes_[0]->start()) << nodes_[0]->log_tail();
  }
  EXPECT_EQ(final_state(0, id), "ROLLEDBACK");

  // Started empty under the name, b is a new node: taken, and it runs new children.
  nodes_[1]->kill();
  fs::remove_all(nodes_[1]->data_dir());
  ASSERT_TRUE(nodes_[1]->start()) << nodes_[1]->log_tail();
  ASSERT_TRUE(sees(0, "b", true)) << why_b_is_down() << nodes_[0]->log_tail();
  auto again = submit(0, R"(,"steps":2,"children":2,"depth":1,"spread":false,"place_on":"b")");
  EXPECT_EQ(final_state(0, again), "SUCCESS");
}

/// Node b's roots: `n` demo.ledger procedures submitted to b itself, and each one's id.
std::vector<uint64_t> submit_to_b(incarnations& t, int n);

// Ids never repeat in a cluster (docs/cluster.md, "Procedure ids"): node b is forgotten and
// started on an empty data directory twice; each new incarnation hands out ids above every
// id an earlier one handed out (it learns from a where they ended, before its first id).
// Before, each new incarnation counted from 1 again: the same ids named two procedures.
TEST_F(incarnations, ids_never_repeat_across_forgets_and_empty_restarts) {
  std::vector<uint64_t> all;
  for (int round = 0; round < 3; ++round) {
    if (round > 0) {
      nodes_[1]->kill();
      fs::remove_all(nodes_[1]->data_dir());
      ASSERT_TRUE(sees(0, "b", false)) << nodes_[0]->log_tail();
      auto f = nodes_[0]->ctl({"node", "forget", "b", "--confirm-lost"}, 30s);
      ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
      ASSERT_TRUE(nodes_[1]->start()) << nodes_[1]->log_tail();
    }
    auto ids = submit_to_b(*this, 4);
    for (auto id : ids) {
      EXPECT_EQ(std::count(all.begin(), all.end(), id), 0) << "id " << id << " handed out again\n"
                                                           << nodes_[1]->log_tail(30);
      if (!all.empty()) {
        EXPECT_GT(id, all.back()) << "round " << round;
      }
    }
    all.insert(all.end(), ids.begin(), ids.end());
    if (round > 0) {
      EXPECT_NE(nodes_[1]->log_tail(1'000'000).find("ids begin at"), std::string::npos)
        << nodes_[1]->log_tail();
    }
  }
}

std::vector<uint64_t> submit_to_b(incarnations& t, int n) {
  std::vector<uint64_t> out;
  for (int i = 0; i < n; ++i) {
    auto r = t.ctl_b({"submit", "demo.noop", "--args-json", R"({"steps":1})"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    if (auto id = parse_id(r.out))
      out.push_back(*id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A copy of b's journal restored after b went on (a backup taken with b stopped, copied back
// later) is older than what a saw of it: b says so and stops, rather than serve a journal
// that lost acknowledged work and would hand out its ids again.
TEST_F(incarnations, a_journal_restored_from_an_older_copy_is_refused) {
  auto copy = nodes_[1]->data_dir().string() + ".copy";
  ASSERT_EQ(nodes_[1]->stop(), 0);
  fs::copy(nodes_[1]->data_dir(), copy, fs::copy_options::recursive);
  ASSERT_TRUE(nodes_[1]->start()) << nodes_[1]->log_tail();
  auto ids = submit_to_b(*this, 3);  // acknowledged after the copy
  ASSERT_EQ(ids.size(), 3u);
  // a hears b's journal go on (heartbeat answers, twice a second: five of them).
  std::this_thread::sleep_for(2500ms);
  nodes_[1]->kill();
  fs::remove_all(nodes_[1]->data_dir());
  fs::rename(copy, nodes_[1]->data_dir());
  ASSERT_TRUE(nodes_[1]->launch());
  ASSERT_TRUE(eventually([&] { return !nodes_[1]->running(); }, 30s)) << nodes_[1]->log_tail();
  EXPECT_EQ(nodes_[1]->last_exit_code(), 1);
  auto log = nodes_[1]->log_tail(1'000'000);
  EXPECT_NE(log.find("this journal is older than what node a saw of it"), std::string::npos)
    << nodes_[1]->log_tail();
  EXPECT_NE(log.find("node forget b --confirm-lost"), std::string::npos) << log;
}

}  // namespace
}  // namespace proctor::test
