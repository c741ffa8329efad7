// The flags proctord checks together before anything is opened: each refusal names what is
// wrong (run_node prints it and exits 64), and a replica's --listen comes from --replicas.
#include "actors/node/node_flags_check.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace proctor {
namespace {

const char* const two = "b1=127.0.0.1:7001/7101,b2=127.0.0.1:7002/7102";

/// What check_flag_combinations says of `f`.
std::string refusal(node_flags f) {
  std::vector<replica_member> group;
  return check_flag_combinations(f, &group);
}

node_flags replica(const std::string& name, const std::string& replicas = two) {
  node_flags f;
  f.name = "b";
  f.replica = name;
  f.replicas_text = replicas;
  return f;
}

TEST(node_flags_check, a_plain_node_needs_listen_and_nothing_else) {
  node_flags f;
  EXPECT_EQ(refusal(f),
            "--listen is required (HOST:PORT; with --replica it may be left to --replicas)");
  f.listen = "127.0.0.1:7000";
  EXPECT_EQ(refusal(f), "");
  f.join = true;
  EXPECT_EQ(refusal(f), "--join goes with --replica and --replicas");
  f.join = false;
  f.recover_group = true;
  EXPECT_EQ(refusal(f), "--recover-group goes with --replica and --replicas, not --join");
  f.recover_group = false;
  f.restore_from = "/backups/b";
  f.standby = true;
  EXPECT_EQ(refusal(f),
            "--restore-from starts the active process (not --standby): restore it, then start "
            "the standby (docs/operations.md, \"Backups\")");
}

TEST(node_flags_check, a_replica_listens_on_its_address_in_the_group) {
  auto f = replica("b2");
  std::vector<replica_member> group;
  EXPECT_EQ(check_flag_combinations(f, &group), "");
  EXPECT_EQ(group.size(), 2u);
  EXPECT_EQ(f.listen, "127.0.0.1:7002");
  f.listen = "127.0.0.1:7009";
  EXPECT_EQ(refusal(f),
            "--listen 127.0.0.1:7009 is not replica b2's address in --replicas (127.0.0.1:7002)");
  f.listen = "127.0.0.1:7002";
  EXPECT_EQ(refusal(f), "");
}

TEST(node_flags_check, replica_flags_that_do_not_go_together_are_refused) {
  auto f = replica("b1");
  f.replicas_text.clear();
  EXPECT_EQ(refusal(f), "--replica and --replicas go together");
  EXPECT_EQ(refusal(replica("b3")), "--replica b3 is not one of --replicas");
  EXPECT_EQ(refusal(replica("b1", "b1=nowhere")).rfind("--replicas: ", 0), 0u);
  f = replica("b1");
  f.name.clear();
  EXPECT_EQ(refusal(f), "--replica needs --name (the node the replicas are)");
  f = replica("b1");
  f.standby = true;
  EXPECT_EQ(refusal(f),
            "--standby and --replica do not go together (a replica group needs no standby: "
            "any replica takes over)");
  f = replica("b1");
  f.restore_from = "/backups/b";
  EXPECT_EQ(refusal(f),
            "--restore-from with --replica founds a group of one: --replicas names replica b1 "
            "alone, without --join or --recover-group; add the others afterwards (`proctor "
            "replicas add`, docs/operations.md, \"Backups\")");
  f = replica("b1", "b1=127.0.0.1:7001/7101");
  f.restore_from = "/backups/b";
  EXPECT_EQ(refusal(f), "");
  f.join = true;
  EXPECT_NE(refusal(f), "");
  f = replica("b1");
  f.join = true;
  f.recover_group = true;
  EXPECT_EQ(refusal(f), "--recover-group goes with --replica and --replicas, not --join");
}

TEST(node_flags_check, peers_come_from_the_flag_and_the_file_and_need_a_name) {
  auto dir =
    std::filesystem::temp_directory_path() / ("node_flags_check_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  node_flags f;
  f.data_dir = (dir / "data").string();
  f.name = "a";
  f.peers_text = "b=127.0.0.1:7002";
  f.peers_file = (dir / "peers").string();
  std::map<std::string, peer_address> peers;
  uint64_t floor = 0;
  std::string err;
  EXPECT_EQ(read_peers(f, &peers, &floor, &err), 64);
  EXPECT_EQ(err, "cannot read --peers-file " + f.peers_file);
  std::ofstream(f.peers_file) << "c=127.0.0.1:7003\n";
  err.clear();
  EXPECT_EQ(read_peers(f, &peers, &floor, &err), 0) << err;
  EXPECT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers.count("c"), 1u);
  f.name.clear();  // a data directory never named cannot have peers
  peers.clear();
  EXPECT_EQ(read_peers(f, &peers, &floor, &err), 64);
  EXPECT_EQ(err, "--peers needs --name (this node's name among them)");
  f.peers_text = "b";
  f.peers_file.clear();
  peers.clear();
  EXPECT_EQ(read_peers(f, &peers, &floor, &err), 64);
  EXPECT_EQ(err.rfind("--peers: ", 0), 0u) << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace proctor
