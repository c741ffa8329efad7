// Self-compacting trees (docs/flow-control.md, "Self-compacting trees";
// persistence/tree_snapshot.hpp): a tree past its threshold is folded into one TreeSnapshot
// record written at the LSN of the last record folded, with a range delete of the records
// before it, in one batch. Checked here: a long loop keeps its tree's records bounded and
// ends as it would have; a compacted tree still rolls back every step it committed, in
// reverse order; a tree whose children commit while it is compacted; a crash on either side
// of a compaction's write loses nothing and runs nothing twice more than a crash may.
#include <algorithm>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "actors/testing/fault_store.hpp"
#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

/// What the stores of every incarnation did: compaction writes, and the most records any tree
/// held after a write.
struct compaction_log {
  std::mutex mtx;
  int snapshots = 0;
  std::map<uint64_t, size_t> max_records;  ///< root -> most records seen after a write
  /// Crash at the write carrying the n-th compaction from now (0: never), before or after it.
  int crash_at_snapshot = 0;
  bool crash_after = false;
};

/// Watches every write; counts a tree's records after each write that touched it.
class compaction_store : public forwarding_store {
public:
  compaction_store(std::shared_ptr<fault_store> inner, std::shared_ptr<compaction_log> log)
      : forwarding_store(inner), inner_(std::move(inner)), log_(std::move(log)) {}
  rocksdb::Status write(const std::vector<store_op>& ops) override {
    std::set<uint64_t> roots;
    bool snapshot = false;
    for (const auto& op : ops) {
      if (op.what == store_op::kind::delete_trees || op.root_id == 0 || op.root_id == ~uint64_t{0})
        continue;
      roots.insert(op.root_id);
      pb::JournalRecord r;
      if (op.what == store_op::kind::put && r.ParseFromString(op.value) && r.has_snapshot())
        snapshot = true;
    }
    {
      std::lock_guard<std::mutex> g(log_->mtx);
      if (snapshot && log_->crash_at_snapshot > 0 && --log_->crash_at_snapshot == 0)
        inner_->crash_at(1, log_->crash_after);  // this very write
    }
    auto st = forwarding_store::write(ops);
    if (!st.ok())
      return st;
    std::lock_guard<std::mutex> g(log_->mtx);
    log_->snapshots += snapshot ? 1 : 0;
    for (auto root : roots) {
      std::vector<stored_record> recs;
      if (inner_->read_tree(root, &recs).ok())
        log_->max_records[root] = std::max(log_->max_records[root], recs.size());
    }
    return st;
  }

private:
  std::shared_ptr<fault_store> inner_;
  std::shared_ptr<compaction_log> log_;
};

constexpr uint64_t threshold = 16;

class compaction_test : public engine {
protected:
  void start_node() {
    start([this](node_options& o) {
      std::string err;
      faults_.reset();  // the previous incarnation's database must be closed first
      auto inner = open_rocksdb_store(o.data_dir, &err);
      ASSERT_TRUE(inner) << err;
      faults_ = std::make_shared<fault_store>(std::move(inner));
      o.store = std::make_shared<compaction_store>(faults_, log_);
      o.on_journal_fatal = [](const std::string&) {};
      o.executor.compact_after = threshold;
    });
  }
  /// The store froze (a crash); the node goes, a new one recovers from the same directory.
  void crash_and_recover() {
    ASSERT_TRUE(faults_->wait_frozen(std::chrono::seconds{30})) << "the crash never came";
    stop();
    start_node();
  }
  int snapshots() {
    std::lock_guard<std::mutex> g(log_->mtx);
    return log_->snapshots;
  }
  size_t max_records(uint64_t root) {
    std::lock_guard<std::mutex> g(log_->mtx);
    return log_->max_records[root];
  }
  std::string ledger_args(int steps, int fail_at = -1, int children = 0) {
    return R"({"steps":)" + std::to_string(steps) + R"(,"fail_at":)" + std::to_string(fail_at)
           + R"(,"children":)" + std::to_string(children) + R"(,"depth":)"
           + std::to_string(children > 0 ? 1 : 0) + R"(,"undo_log":true,"ledger_dir":")" + dir_
           + "/ledger\"}";
  }
  /// The ledger files of procedure `id` of tree `root` (one per step that ran and was not
  /// undone), each with how many times the step ran.
  std::map<int, int> steps_of(uint64_t root, uint64_t id) {
    std::map<int, int> out;
    auto prefix = std::to_string(root) + "." + std::to_string(id) + ".";
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/ledger")) {
      auto name = e.path().filename().string();
      if (name.rfind(prefix, 0) != 0)
        continue;
      std::ifstream in(e.path());
      int lines = 0;
      for (std::string l; std::getline(in, l);)
        ++lines;
      out[std::stoi(name.substr(prefix.size()))] = lines;
    }
    return out;
  }
  /// The undo log's steps undone for procedure `id`, in the order they ran.
  std::vector<int> undone_steps(uint64_t id) {
    std::vector<int> out;
    std::ifstream in(dir_ + "/ledger/undo.log");
    std::string node;
    uint64_t pid = 0, parent = 0;
    int step = 0;
    while (in >> node >> pid >> parent >> step)
      if (pid == id)
        out.push_back(step);
    return out;
  }

  std::shared_ptr<fault_store> faults_;
  std::shared_ptr<compaction_log> log_ = std::make_shared<compaction_log>();
};

TEST_F(compaction_test, a_long_loop_keeps_its_tree_bounded_and_ends_as_it_would_have) {
  start_node();
  auto id = submit("demo.ledger", ledger_args(300));
  auto s = wait(id, std::chrono::seconds{60});
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.result_json(), R"({"steps":300})");
  auto steps = steps_of(id, id);
  ASSERT_EQ(steps.size(), 300u);
  for (const auto& [step, runs] : steps)
    EXPECT_EQ(runs, 1) << "step " << step << " ran " << runs << " times without a crash";
  // One Submitted and 300 steps, compacted each time the tree held 16: about 19 times.
  EXPECT_GE(snapshots(), 10);
  EXPECT_GE(metric("proctor_tree_compactions_total"), 10);
  EXPECT_GE(metric("proctor_compacted_records_total"), 150);
  // A compaction runs while the loop goes on: a few records more may come meanwhile.
  EXPECT_LE(max_records(id), 2 * threshold) << "the tree's records were not kept bounded";
}

TEST_F(compaction_test, a_compacted_tree_rolls_back_every_step_in_reverse_order) {
  start_node();
  auto id = submit("demo.ledger", ledger_args(120, 100));
  auto s = wait(id, std::chrono::seconds{60});
  ASSERT_EQ(s.state(), pb::ROLLEDBACK) << s.error();
  EXPECT_GE(snapshots(), 5);
  EXPECT_TRUE(steps_of(id, id).empty()) << "steps left that the rollback did not undo";
  auto undone = undone_steps(id);
  // The step that failed (100) ran partly; then 99 down to 0, each once.
  std::vector<int> expected;
  for (int s = 100; s >= 0; --s)
    expected.push_back(s);
  EXPECT_EQ(undone, expected);
}

TEST_F(compaction_test, children_commit_while_their_tree_is_compacted) {
  start_node();
  // The root spawns 4 children of 30 steps each at its first step; they commit at once, into
  // the tree the root compacts meanwhile.
  auto ok = submit("demo.ledger", ledger_args(30, -1, 4));
  auto s = wait(ok, std::chrono::seconds{60});
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_GE(snapshots(), 4);
  EXPECT_EQ(steps_of(ok, ok).size(), 30u);
  size_t files = ledger_files();
  EXPECT_EQ(files, 30u + 4u * 30u);

  // The same tree failing at its root's last step rolls back its children too.
  auto bad = submit("demo.ledger", ledger_args(30, 29, 4));
  auto b = wait(bad, std::chrono::seconds{60});
  ASSERT_EQ(b.state(), pb::ROLLEDBACK) << b.error();
  EXPECT_EQ(ledger_files(), files + 1) << "the failed tree left ledger files (+1: undo.log)";
}

/// A crash just before and just after the write of the first and of the third compaction:
/// the tree recovers, ends SUCCESS, and no step ran more than twice (once more than the
/// crash may cost: steps are at-least-once).
TEST_F(compaction_test, a_crash_on_either_side_of_a_compaction_loses_nothing) {
  struct run {
    int occurrence;
    bool after;
  };
  for (auto r : {run{1, false}, run{1, true}, run{3, false}, run{3, true}}) {
    SCOPED_TRACE("crash " + std::string(r.after ? "after" : "before") + " compaction #"
                 + std::to_string(r.occurrence));
    {
      std::lock_guard<std::mutex> g(log_->mtx);
      log_->crash_at_snapshot = r.occurrence;
      log_->crash_after = r.after;
    }
    start_node();
    auto id = submit("demo.ledger", ledger_args(80));
    crash_and_recover();
    auto s = wait(id, std::chrono::seconds{60});
    ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
    auto steps = steps_of(id, id);
    ASSERT_EQ(steps.size(), 80u);
    for (const auto& [step, runs] : steps)
      EXPECT_LE(runs, 2) << "step " << step << " ran " << runs << " times";
    stop();
    std::filesystem::remove_all(dir_ + "/data");
    std::filesystem::remove_all(dir_ + "/ledger");
    std::filesystem::create_directories(dir_ + "/ledger");
  }
}

/// The rollback plan survives a crash right after a compaction: the tree, failing after it,
/// undoes every step once.
TEST_F(compaction_test, a_rollback_after_a_crash_at_a_compaction_undoes_every_step) {
  {
    std::lock_guard<std::mutex> g(log_->mtx);
    log_->crash_at_snapshot = 2;
    log_->crash_after = true;
  }
  start_node();
  auto id = submit("demo.ledger", ledger_args(70, 60));
  crash_and_recover();
  auto s = wait(id, std::chrono::seconds{60});
  ASSERT_EQ(s.state(), pb::ROLLEDBACK) << s.error();
  EXPECT_TRUE(steps_of(id, id).empty()) << "steps left that the rollback did not undo";
  auto undone = undone_steps(id);
  ASSERT_FALSE(undone.empty());
  EXPECT_EQ(undone.back(), 0);
  std::set<int> distinct(undone.begin(), undone.end());
  EXPECT_EQ(distinct.size(), 61u) << "steps 0..60 each undone";
}

}  // namespace
}  // namespace proctor::testing
