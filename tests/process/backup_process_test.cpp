// Online backups and restores through real processes (docs/operations.md, "Backups"): a node
// backed up while it runs, then run on (work acknowledged after the backup), stopped, and
// restored from the backup into an empty data directory. The restored node is a new
// incarnation: it carries on the trees the backup held (a waiter wakes on its event), has
// none of what came after, and hands out no id the old one handed out, after the backup too.
// Every mistake an operator can make with either command is refused, naming why, changing
// nothing.
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using proctor::test::bin_path;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::read_file;
using proctor::test::run_program;
using proctor::test::run_result;
using proctor::test::state_of;
using proctor::test::temp_dir;

uint64_t submit(node& n, const std::string& key) {
  auto r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":")" + key + R"("})"}, 30s);
  EXPECT_EQ(r.exit_code, 0) << describe(r) << n.log_tail();
  return parse_id(r.out).value_or(0);
}

std::string state(node& n, uint64_t id) {
  auto r = n.ctl({"status", std::to_string(id), "--json"}, 30s);
  return r.exit_code == 0 ? state_of(parse_json(r.out).value_or(google::protobuf::Value{}))
                          : "exit " + std::to_string(r.exit_code) + ": " + r.err;
}

TEST(backup_restore, a_restored_backup_carries_on_its_trees_as_a_new_incarnation_with_fresh_ids) {
  temp_dir dir;
  const auto backup = (dir.path() / "backup").string();
  node old{dir.path() / "data"};
  ASSERT_TRUE(old.start()) << old.log_tail();
  auto waiting = submit(old, "kept");
  auto done = submit(old, "done");
  ASSERT_EQ(old.ctl({"event", "done", "--payload-json", "{}"}, 30s).exit_code, 0);
  ASSERT_TRUE(eventually([&] { return state(old, done) == "SUCCESS"; }, 30s)) << old.log_tail();

  auto b = old.ctl({"backup", backup}, 60s);
  ASSERT_EQ(b.exit_code, 0) << describe(b) << old.log_tail();
  EXPECT_NE(b.out.find("--restore-from " + backup), std::string::npos) << b.out;
  EXPECT_NE(read_file(fs::path(backup) / "BACKUP").find("lsn "), std::string::npos);
  // Mistakes: the same directory again, a relative path. Nothing is written.
  auto again = old.ctl({"backup", backup}, 60s);
  EXPECT_EQ(again.exit_code, 1) << describe(again);
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;
  auto relative = old.ctl({"backup", "backup2"}, 60s);
  EXPECT_EQ(relative.exit_code, 1) << describe(relative);
  EXPECT_NE(relative.err.find("absolute"), std::string::npos) << relative.err;

  // Work acknowledged after the backup: the restore cannot have it, and must not hand out
  // its id again.
  auto after = submit(old, "after");
  ASSERT_NE(after, 0u);
  EXPECT_EQ(old.stop(), 0) << old.log_tail();

  // A restore into a directory that holds a journal is refused, and changes nothing.
  auto into_used = run_program(
    bin_path("proctord"),
    {"--data-dir", old.data_dir().string(), "--listen", "127.0.0.1:1", "--restore-from", backup},
    60s);
  EXPECT_EQ(into_used.exit_code, 1) << describe(into_used);
  EXPECT_NE(into_used.err.find("already holds a journal"), std::string::npos) << into_used.err;
  // A backup of another node is refused (the name is part of what it is).
  auto renamed = run_program(bin_path("proctord"),
                             {"--data-dir", (dir.path() / "other").string(), "--listen",
                              "127.0.0.1:1", "--name", "zed", "--restore-from", backup},
                             60s);
  EXPECT_EQ(renamed.exit_code, 1) << describe(renamed);
  EXPECT_NE(renamed.err.find("restore it under its own name"), std::string::npos) << renamed.err;

  node restored{dir.path() / "restored", 0, {"--restore-from", backup}};
  ASSERT_TRUE(restored.start()) << restored.log_tail();
  auto log = read_file(restored.log_file());
  EXPECT_NE(log.find("restored node (unnamed) from the backup"), std::string::npos) << log;
  EXPECT_NE(log.find("a new journal, incarnation"), std::string::npos) << log;
  // What the backup held carries on; what came after it is not there.
  EXPECT_EQ(state(restored, done), "SUCCESS");
  EXPECT_EQ(state(restored, waiting), "WAITING");
  EXPECT_NE(state(restored, after).find("exit 1"), std::string::npos);
  ASSERT_EQ(restored.ctl({"event", "kept", "--payload-json", "{}"}, 30s).exit_code, 0);
  EXPECT_TRUE(eventually([&] { return state(restored, waiting) == "SUCCESS"; }, 30s))
    << restored.log_tail();
  // No id twice: above every id the old incarnation handed out, after the backup too.
  auto fresh = submit(restored, "fresh");
  EXPECT_GT(fresh, after);
  // Restarted with the same command line (a unit file keeps --restore-from), it is the
  // restored node: the restore is not done again.
  EXPECT_EQ(restored.stop(), 0);
  ASSERT_TRUE(restored.start()) << restored.log_tail();
  EXPECT_NE(read_file(restored.log_file()).find("already restored from"), std::string::npos);
  EXPECT_EQ(state(restored, fresh), "WAITING");
  EXPECT_GT(submit(restored, "fresh2"), fresh);
}

}  // namespace
