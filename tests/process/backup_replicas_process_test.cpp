// A replica group's backup restored into a new group (docs/operations.md, "Backups", "Into a
// replica group"): node b as three replicas is backed up online through its leader, runs on,
// and is lost with every machine. One replica restores the backup founding a group of one;
// two empty replicas join and receive it; the restored replica's loss then loses nothing of
// it (the restore goes through the group's log: a copy beside it reached no replica that
// caught up by the log, and ids were handed out again). Started again as it was, the restored
// replica rejoins. The mistakes around it are refused, saying why: a restore founding a group
// of three, a replica's data directory started as a plain node and a plain node's as a
// replica.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/replica_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using namespace proctor::test;
namespace fs = std::filesystem;

TEST_F(replicas, a_groups_backup_is_restored_into_a_group_of_one_that_new_replicas_join) {
  launch_all();
  ASSERT_GE(leader(), 0) << logs();
  auto kept = submit("demo.wait_event", R"({"key":"kept"})");
  auto done = submit("demo.ledger", R"({"steps":2,"ledger_dir":")" + ledger().string() + "\"}");
  ASSERT_EQ(waited(done), "SUCCESS");
  const auto backup = (dir_.path() / "backup").string();
  auto b = ctl({"backup", backup}, 60s);
  ASSERT_EQ(b.exit_code, 0) << describe(b) << logs();
  auto after = submit("demo.wait_event", R"({"key":"kept"})");
  for (auto& n : b_)
    n->kill();

  // Mistakes, each refused with its reason and nothing written.
  auto spec = [&](size_t i) {
    return name(i) + "=" + address(i) + "/" + std::to_string(raft_ports_[i]);
  };
  auto fresh_dir = [&](size_t i) { return dir_.path() / ("new-" + name(i)); };
  auto args_of = [&](size_t i, const std::string& group) {
    return std::vector<std::string>{
      "--name", "b",        "--replica", name(i),      "--replicas",
      group,    "--listen", address(i),  "--data-dir", fresh_dir(i).string()};
  };
  auto three = args_of(0, spec(0) + "," + spec(1) + "," + spec(2));
  three.insert(three.end(), {"--restore-from", backup});
  auto r = run_program(bin_path("proctord"), three, 60s);
  EXPECT_EQ(r.exit_code, 64) << describe(r);
  EXPECT_NE(r.err.find("founds a group of one"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fresh_dir(0)));
  auto plain_on_replica = run_program(
    bin_path("proctord"),
    {"--name", "b", "--listen", address(0), "--data-dir", b_[0]->data_dir().string()}, 60s);
  EXPECT_EQ(plain_on_replica.exit_code, 1) << describe(plain_on_replica);
  EXPECT_NE(plain_on_replica.err.find("holds a replica's journal"), std::string::npos)
    << plain_on_replica.err;
  {
    node plain{dir_.path() / "plain", 0, {"--name", "p"}};
    ASSERT_TRUE(plain.start()) << plain.log_tail();
    plain.stop();
    auto replica_on_plain =
      run_program(bin_path("proctord"),
                  {"--name", "p", "--replica", "p1", "--replicas", "p1=127.0.0.1:1/2", "--listen",
                   "127.0.0.1:1", "--data-dir", plain.data_dir().string()},
                  60s);
    EXPECT_EQ(replica_on_plain.exit_code, 1) << describe(replica_on_plain);
    EXPECT_NE(replica_on_plain.err.find("holds a plain node's journal"), std::string::npos)
      << replica_on_plain.err;
  }

  // The restore: b1 on an empty directory, founding a group of one.
  auto one = args_of(0, spec(0));
  one.insert(one.end(), {"--restore-from", backup});
  node r1{fresh_dir(0), ports_[0], one};
  r1.set_extra_args_only(true);
  ASSERT_TRUE(r1.start()) << r1.log_tail();
  EXPECT_NE(read_file(r1.log_file()).find("into replica b1, founding a group of one"),
            std::string::npos)
    << r1.log_tail();
  auto state_on = [](node& n, const std::string& id) {
    auto s = n.ctl({"status", id, "--json"}, 30s);
    auto v = parse_json(s.out);
    return v ? state_of(*v) : "exit " + std::to_string(s.exit_code) + ": " + s.err;
  };
  EXPECT_EQ(state_on(r1, kept), "WAITING");
  EXPECT_EQ(state_on(r1, done), "SUCCESS");
  EXPECT_NE(state_on(r1, after).find("exit 1"), std::string::npos);

  // Two empty replicas join it and receive the restored journal.
  std::vector<std::unique_ptr<node>> joined;
  std::string group = spec(0);
  for (size_t i = 1; i < 3; ++i) {
    group += "," + spec(i);
    auto a = args_of(i, group);
    a.push_back("--join");
    joined.push_back(std::make_unique<node>(fresh_dir(i), ports_[i], a));
    joined.back()->set_extra_args_only(true);
    ASSERT_TRUE(joined.back()->launch()) << joined.back()->log_tail();
    auto added = r1.ctl({"replicas", "add", spec(i), "--timeout-s", "60"}, 90s);
    ASSERT_EQ(added.exit_code, 0) << describe(added) << r1.log_tail() << joined.back()->log_tail();
  }
  // The restored replica lost: the joined ones hold everything it restored.
  r1.kill();
  EXPECT_TRUE(eventually(
    [&] {
      return ctl({"status", kept, "--json"}, 10s).exit_code == 0;
    },
    30s))
    << joined[0]->log_tail() << joined[1]->log_tail();
  EXPECT_EQ(state(kept), "WAITING");
  EXPECT_EQ(state(done), "SUCCESS");
  ASSERT_EQ(ctl({"event", "kept"}).exit_code, 0);
  EXPECT_EQ(waited(kept), "SUCCESS");
  auto fresh = submit("demo.wait_event", R"({"key":"fresh"})");
  EXPECT_GT(std::stoull(fresh), std::stoull(after));
  // Started again with the same command line (a unit file keeps --restore-from), the
  // restored replica is not restored again: it rejoins its group as it is.
  ASSERT_TRUE(r1.launch()) << r1.log_tail();
  EXPECT_TRUE(eventually(
    [&] {
      return read_file(r1.log_file()).find("was already restored from the backup")
             != std::string::npos;
    },
    30s))
    << r1.log_tail();
  EXPECT_TRUE(eventually(
    [&] {
      auto rr = ctl({"replicas", "--json"}, 10s);
      return rr.exit_code == 0 && rr.out.find("\"reachable\":false") == std::string::npos;
    },
    30s))
    << ctl({"replicas"}).out << r1.log_tail();
}

}  // namespace
