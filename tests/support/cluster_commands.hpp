// Test support: the cluster group's commands (cluster_state.hpp) built by hand, and a runner
// that applies them at increasing indexes as the group would. Used by replication/'s
// cluster_rules and cluster_state_machine tests.
#pragma once

#include <cstdint>
#include <string>

#include "replication/cluster_state.hpp"

namespace proctor::cluster_testing {

inline pb::ClusterMember member(const std::string& name, uint64_t incarnation,
                                uint32_t number = 0) {
  pb::ClusterMember m;
  m.set_name(name);
  m.set_incarnation(incarnation);
  m.set_number(number);
  m.set_client_address("127.0.0.1:" + std::to_string(7000 + incarnation % 1000));
  m.set_peer_address("127.0.0.1:" + std::to_string(8000 + incarnation % 1000));
  return m;
}

inline pb::ClusterCommand found(const std::string& id, const pb::ClusterMember& founder) {
  pb::ClusterCommand c;
  c.mutable_found()->set_cluster_id(id);
  c.mutable_found()->set_slot_count(1024);
  *c.mutable_found()->mutable_founder() = founder;
  return c;
}
inline pb::ClusterCommand join(const pb::ClusterMember& m) {
  pb::ClusterCommand c;
  *c.mutable_join()->mutable_member() = m;
  return c;
}
inline pb::ClusterCommand activate(const std::string& name, uint64_t inc) {
  pb::ClusterCommand c;
  c.mutable_activate()->set_name(name);
  c.mutable_activate()->set_incarnation(inc);
  return c;
}
inline pb::ClusterCommand drain(const std::string& name) {
  pb::ClusterCommand c;
  c.mutable_drain()->set_name(name);
  return c;
}
inline pb::ClusterCommand remove(const std::string& name, uint64_t inc) {
  pb::ClusterCommand c;
  c.mutable_remove()->set_name(name);
  c.mutable_remove()->set_incarnation(inc);
  return c;
}
inline pb::ClusterCommand forget(const std::string& name, uint64_t inc) {
  pb::ClusterCommand c;
  c.mutable_forget()->set_name(name);
  c.mutable_forget()->set_incarnation(inc);
  return c;
}
inline pb::ClusterCommand raise(const std::string& name, uint64_t inc, uint64_t floor,
                                uint64_t lsn) {
  pb::ClusterCommand c;
  auto* r = c.mutable_raise_floor();
  r->set_name(name);
  r->set_incarnation(inc);
  r->set_id_floor(floor);
  r->set_journal_lsn(lsn);
  return c;
}
inline pb::ClusterCommand limit(const std::string& type, uint32_t max, bool cleared = false) {
  pb::ClusterCommand c;
  c.mutable_set_limit()->mutable_limit()->set_type(type);
  c.mutable_set_limit()->mutable_limit()->set_max_running(max);
  c.mutable_set_limit()->mutable_limit()->set_cleared(cleared);
  return c;
}
inline pb::ClusterCommand schedule(const std::string& name, int64_t created, bool paused = false,
                                   int64_t decided = 0) {
  pb::ClusterCommand c;
  auto* x = c.mutable_set_schedule()->mutable_schedule();
  x->set_name(name);
  x->set_cron("* * * * *");
  x->set_type("demo.noop");
  x->set_created_at_ms(created);
  x->set_decided_until_ms(decided != 0 ? decided : created);
  x->set_paused(paused);
  x->set_fired(9);  // a node's own count: not held by the group
  return c;
}
inline pb::ClusterCommand deleted(const std::string& name) {
  pb::ClusterCommand c;
  c.mutable_set_schedule()->mutable_schedule()->set_name(name);
  c.mutable_set_schedule()->mutable_schedule()->set_deleted(true);
  return c;
}
inline pb::ClusterCommand progress(const std::string& name, int64_t created, int64_t until) {
  pb::ClusterCommand c;
  auto* p = c.mutable_schedule_progress();
  p->set_name(name);
  p->set_created_at_ms(created);
  p->set_decided_until_ms(until);
  return c;
}

/// Applies commands at increasing indexes, as the group would.
struct rules {
  pb::ClusterState st;
  uint64_t index = 0;
  cluster_outcome run(const pb::ClusterCommand& c) {
    return apply_cluster_command(&st, c, ++index);
  }
  pb::MemberState state_of(const std::string& name) const {
    const auto* m = find_member(st, name);
    return m == nullptr ? pb::MEMBER_STATE_UNSPECIFIED : m->state();
  }
};

inline pb::ClusterMember at_level(pb::ClusterMember m, uint32_t level) {
  m.set_feature_level(level);
  return m;
}
inline pb::ClusterCommand report_level(const std::string& name, uint64_t inc, uint32_t level) {
  auto c = raise(name, inc, 0, 0);
  c.mutable_raise_floor()->set_feature_level(level);
  return c;
}

}  // namespace proctor::cluster_testing
