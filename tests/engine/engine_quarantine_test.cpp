// Damaged journal records: the tree is quarantined and reported, nothing is deleted, and the
// rest of the node keeps running.
#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {
namespace {

class quarantine_test : public engine {};

TEST_F(quarantine_test, a_damaged_record_quarantines_its_tree_and_nothing_else) {
  start();
  auto victim = submit("demo.wait_event", R"({"key":"v"})");
  auto healthy = submit("demo.wait_event", R"({"key":"h"})");
  ASSERT_TRUE(eventually([&] {
    return status(victim).state() == pb::WAITING && status(healthy).state() == pb::WAITING;
  }));
  stop();
  size_t records = 0;
  {
    std::string err;
    auto store = open_rocksdb_store(dir_ + "/data", &err);
    ASSERT_TRUE(store) << err;
    std::vector<stored_record> recs;
    ASSERT_TRUE(store->read_tree(victim, &recs).ok());
    ASSERT_GE(recs.size(), 2u);
    records = recs.size();
    store_op op;
    op.root_id = victim;
    op.lsn = recs.back().lsn;
    op.value = std::string("\x0a\xff\xff\xff\xff damaged");
    ASSERT_TRUE(store->write({op}).ok());
  }
  start();
  pb::Request req;
  req.mutable_quarantine();
  auto r = call(req);
  ASSERT_EQ(r.code(), pb::Response::OK);
  ASSERT_EQ(r.quarantined_size(), 1);
  EXPECT_EQ(r.quarantined(0).root_id(), victim);
  EXPECT_EQ(r.quarantined(0).records(), records);
  EXPECT_NE(r.quarantined(0).reason().find("unparsable"), std::string::npos)
    << r.quarantined(0).reason();
  auto vs = status(victim);
  EXPECT_NE(vs.waiting_for().find("quarantined"), std::string::npos) << vs.waiting_for();
  // The rest of the node runs on.
  event("h", R"("ok")");
  EXPECT_EQ(wait(healthy).state(), pb::SUCCESS);
  auto other = submit("demo.wait_event", R"({"key":"h"})");
  event("h", R"("again")");  // the first was consumed: it woke `healthy`
  EXPECT_EQ(wait(other).state(), pb::SUCCESS);
  // Nothing of the quarantined tree was deleted, also not across another restart.
  stop();
  {
    std::string err;
    auto store = open_rocksdb_store(dir_ + "/data", &err);
    ASSERT_TRUE(store) << err;
    std::vector<stored_record> recs;
    ASSERT_TRUE(store->read_tree(victim, &recs).ok());
    EXPECT_EQ(recs.size(), records);
  }
  start();
  EXPECT_EQ(call(req).quarantined_size(), 1);
}

}  // namespace
}  // namespace proctor::testing
