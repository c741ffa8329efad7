#include "actors/executor/internal/proc_record.hpp"

#include <gtest/gtest.h>

namespace proctor::exec_detail {
namespace {

proc_update sample() {
  proc_update u;
  u.id = 7;
  u.root_id = 3;
  u.parent_id = 5;
  u.type = "demo.timer";
  u.state = proc_state::waiting_timeout;
  u.waiting_for = "timer";
  u.started_at_ms = 11;
  u.since_ms = 12;
  u.ended_at_ms = 0;
  return u;
}

void expect_same(const proc_update& a, const proc_update& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.root_id, b.root_id);
  EXPECT_EQ(a.parent_id, b.parent_id);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.children, b.children);
  EXPECT_EQ(a.error, b.error);
  EXPECT_EQ(a.result_json, b.result_json);
  EXPECT_EQ(a.waiting_for, b.waiting_for);
  EXPECT_EQ(a.nonce, b.nonce);
  EXPECT_EQ(a.node, b.node);
  EXPECT_EQ(a.ended, b.ended);
  EXPECT_EQ(a.started_at_ms, b.started_at_ms);
  EXPECT_EQ(a.since_ms, b.since_ms);
  EXPECT_EQ(a.ended_at_ms, b.ended_at_ms);
  EXPECT_EQ(a.bypassed, b.bypassed);
}

// The memory target of a passivated waiter counts on this size: with the hash
// node's link and key, 128 bytes.
TEST(proc_record_test, fits_the_128_byte_class_with_its_hash_node) {
  EXPECT_LE(sizeof(proc_record) + 2 * sizeof(void*), 128u);
}

TEST(proc_record_test, a_waiting_procedure_round_trips_without_details) {
  name_table names;
  proc_record r;
  auto u = sample();
  r.assign(proc_update(u), names);
  expect_same(r.to_update(), u);
  EXPECT_TRUE(r.children().empty());
  EXPECT_TRUE(r.node().empty());
}

TEST(proc_record_test, details_come_and_go_with_their_fields) {
  name_table names;
  proc_record r;
  auto u = sample();
  u.children = {8, 9};
  u.error = "boom";
  u.result_json = R"({"k":1})";
  u.nonce = "n-1";
  u.node = "b";
  u.state = proc_state::success;
  u.ended = true;
  u.bypassed = true;
  u.ended_at_ms = 13;
  r.assign(proc_update(u), names);
  expect_same(r.to_update(), u);
  // Later updates without them drop them (an update is the whole status).
  auto plain = sample();
  r.assign(proc_update(plain), names);
  expect_same(r.to_update(), plain);
}

TEST(proc_record_test, type_names_are_shared) {
  name_table names;
  proc_record a, b;
  auto u = sample();
  a.assign(proc_update(u), names);
  b.assign(proc_update(u), names);
  EXPECT_EQ(&a.type(), &b.type());
  u.type = "demo.timers";
  b.assign(proc_update(u), names);
  EXPECT_EQ(b.type(), "demo.timers");
  EXPECT_EQ(a.type(), "demo.timer");
}

}  // namespace
}  // namespace proctor::exec_detail
