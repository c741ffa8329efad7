// The journal's Raft entries (raft_codec), the member list's parsing, and the replica's own
// database (the state machine: journal_replica_db.hpp), without a group.
#include "replication/raft_codec.hpp"

#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "replication/journal_replica_db.hpp"
#include "replication/raft_fsm.hpp"
#include "replication/raft_store.hpp"
#include "tests/support/raft_test_group.hpp"

namespace proctor {
namespace {

using namespace raft_test;

// -- encoding --------------------------------------------------------------------------------

TEST(raft_codec, ops_round_trip) {
  std::vector<store_op> ops = {put(1, 2, "hello"), put(UINT64_MAX, UINT64_MAX, ""),
                               put(7, 300, std::string(1000, '\0')), del(5, 10, 3),
                               del(6, UINT64_MAX)};
  store_op trees;
  trees.what = store_op::kind::delete_trees;
  trees.root_id = 10;
  trees.last_root_id = 20;
  ops.push_back(trees);
  std::string buf(raft_codec::encoded_size(ops), '\0');
  raft_codec::encode_ops(ops, buf.data());
  std::vector<store_op> back;
  ASSERT_TRUE(raft_codec::decode_ops(buf, &back));
  ASSERT_EQ(back.size(), ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(back[i].what, ops[i].what);
    EXPECT_EQ(back[i].root_id, ops[i].root_id);
    EXPECT_EQ(back[i].lsn, ops[i].lsn);
    EXPECT_EQ(back[i].value, ops[i].value);
    EXPECT_EQ(back[i].from_lsn, ops[i].from_lsn);
    EXPECT_EQ(back[i].last_root_id, ops[i].last_root_id);
  }
  // Padded to a multiple of 8 (libraft's network decoder assumes it).
  EXPECT_EQ(buf.size() % 8, 0u);
  EXPECT_LT(buf.size() - raft_codec::unpadded_size(ops), 8u);
  // Every truncation into the ops, and anything but zero padding, is refused.
  for (size_t n = 0; n < raft_codec::unpadded_size(ops); ++n)
    EXPECT_FALSE(raft_codec::decode_ops(std::string_view(buf).substr(0, n), &back)) << n;
  EXPECT_FALSE(raft_codec::decode_ops(buf + "x", &back));
  EXPECT_FALSE(raft_codec::decode_ops(buf + std::string(8, '\0'), &back));
  // Every size of op set pads right (the padding is 0..7 bytes).
  for (size_t len = 0; len < 16; ++len) {
    std::vector<store_op> one = {put(1, 1, std::string(len, 'v'))};
    std::string b(raft_codec::encoded_size(one), '\1');
    raft_codec::encode_ops(one, b.data());
    EXPECT_EQ(b.size() % 8, 0u);
    ASSERT_TRUE(raft_codec::decode_ops(b, &back)) << len;
    EXPECT_EQ(back[0].value, one[0].value);
  }
  buf[0] = 2;  // unknown format
  EXPECT_FALSE(raft_codec::decode_ops(buf, &back));
}

TEST(raft_store, parse_members) {
  std::vector<raft_member> m;
  std::string err;
  ASSERT_TRUE(parse_raft_members("1=127.0.0.1:7001, 2=127.0.0.1:7002 3=10.0.0.3:7003", &m, &err))
    << err;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1], (raft_member{2, "127.0.0.1:7002", ""}));
  EXPECT_FALSE(parse_raft_members("", &m, &err));
  EXPECT_FALSE(parse_raft_members("0=127.0.0.1:1", &m, &err));
  EXPECT_FALSE(parse_raft_members("1=127.0.0.1:1,1=127.0.0.1:2", &m, &err));
  EXPECT_FALSE(parse_raft_members("1=127.0.0.1:1,2=127.0.0.1:1", &m, &err));
  EXPECT_FALSE(parse_raft_members("1=127.0.0.1", &m, &err));
  EXPECT_FALSE(parse_raft_members("x=127.0.0.1:1", &m, &err));
  EXPECT_FALSE(parse_raft_members("1=127.0.0.1:8o", &m, &err));
}

// -- the replica's database (the FSM) ----------------------------------------------------------

TEST(raft_replica_db, apply_is_idempotent_across_reopen) {
  disk_dir d;
  ASSERT_FALSE(d.path.empty());
  std::string err;
  {
    auto db = raft_replica_db::open(d.path, false, &err);
    ASSERT_NE(db, nullptr) << err;
    EXPECT_EQ(db->applied_index(), 0u);
    ASSERT_TRUE(db->apply(2, entry_of({put(1, 1, "a"), put(1, 2, "b")})).ok());
    ASSERT_TRUE(db->apply(3, entry_of({del(1, 2)})).ok());  // deletes (1,1)
    EXPECT_EQ(db->applied_index(), 3u);
  }
  auto db = raft_replica_db::open(d.path, false, &err);
  ASSERT_NE(db, nullptr) << err;
  EXPECT_EQ(db->applied_index(), 3u);
  // libraft's replay after a restart: entry 2 again must not bring (1,1) back.
  ASSERT_TRUE(db->apply(2, entry_of({put(1, 1, "a"), put(1, 2, "b")})).ok());
  EXPECT_EQ(contents(db->store()), (record_map{{{1, 2}, "b"}}));
  EXPECT_EQ(db->applied_index(), 3u);
  // A malformed entry is an error, and moves nothing.
  EXPECT_TRUE(db->apply(4, "garbage").IsCorruption());
  EXPECT_EQ(db->applied_index(), 3u);
}

TEST(raft_replica_db, snapshot_restore) {
  disk_dir d;
  ASSERT_FALSE(d.path.empty());
  std::string err;
  auto a = raft_replica_db::open(d.path + "/a", false, &err);
  ASSERT_NE(a, nullptr) << err;
  ASSERT_TRUE(a->apply(5, entry_of(batch_of(1, 1, 50))).ok());
  ASSERT_TRUE(a->apply(6, entry_of(batch_of(2, 1, 3))).ok());
  a->begin_snapshot(7);  // entry 7 was, say, a barrier
  // Applies after the snapshot was pinned are not in it.
  ASSERT_TRUE(a->apply(8, entry_of({put(3, 1, "later")})).ok());
  std::vector<std::string> chunks;
  ASSERT_TRUE(a->serialize_snapshot(&chunks).ok());
  a->end_snapshot();
  std::string snap;
  for (auto& c : chunks)
    snap += c;

  auto b = raft_replica_db::open(d.path + "/b", false, &err);
  ASSERT_NE(b, nullptr) << err;
  ASSERT_TRUE(b->apply(1, entry_of({put(9, 9, "stale")})).ok());
  bool replaced = false;
  ASSERT_TRUE(b->restore(snap, &replaced).ok());
  EXPECT_TRUE(replaced);
  EXPECT_EQ(b->applied_index(), 7u);
  auto expect = contents(a->store());
  expect.erase({3, 1});
  EXPECT_EQ(contents(b->store()), expect);  // (9,9) gone, (3,1) not there
  // A database already past the snapshot keeps what it has (a restart restores libraft's
  // last snapshot although the database went on after it).
  ASSERT_TRUE(a->restore(snap, &replaced).ok());
  EXPECT_FALSE(replaced);
  EXPECT_EQ(contents(a->store()).count({3, 1}), 1u);
  EXPECT_TRUE(b->restore("PRSNAP01short", &replaced).IsCorruption());
}

}  // namespace
}  // namespace proctor
