// Part of (m): how long a change of the cluster group (docs/cluster-group.md) takes to reach
// every member of 5. Five members of one group in this process, each with its own data
// directory and port as five nodes would have (they share this machine's disk and cores),
// grown the way a cluster grows: one founds, four join, the keeper makes them active and
// gives them five voters. Then each change (a member's id floor raised) is timed from its proposal
// on the leader until every member applied it.
#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "replication/cluster_group.hpp"
#include "replication/cluster_keeper.hpp"

namespace proctor::bench {

namespace {

struct member_proc {
  raft_member self;
  std::unique_ptr<cluster_group> group;
  std::unique_ptr<cluster_keeper> keeper;
};

cluster_group::result propose_on_leader(std::vector<member_proc>& ms, pb::ClusterCommand c) {
  cluster_group::result r;
  await(
    [&] {
      for (auto& m : ms)
        if (m.group->raft().is_leader()) {
          r = m.group->propose(c);
          return r.status.ok();
        }
      return false;
    },
    std::chrono::seconds{30}, "no leader took a cluster group command for 30 s");
  if (!r.outcome.applied)
    throw std::runtime_error("cluster group refused a command: " + r.outcome.text);
  return r;
}

}  // namespace

void measure_group_propagation(reporter& r, const std::string& dir, size_t changes) {
  std::vector<member_proc> ms(5);
  for (size_t i = 0; i < ms.size(); ++i) {
    ms[i].self = {i + 1, {}, std::string(1, static_cast<char>('a' + i))};
    // Each member's port is picked as it opens, and again if it was taken meanwhile: the
    // members opened before make connections, whose ephemeral ports come from the same range.
    std::string err;
    for (int attempt = 0; attempt < 5 && !ms[i].group; ++attempt) {
      ms[i].self.address = "127.0.0.1:" + std::to_string(free_port());
      raft_store_options o;
      o.id = ms[i].self.id;
      o.address = ms[i].self.address;
      o.members = {ms[0].self};  // the founder's one-member group; the others join it
      o.join = i > 0;
      o.dir = dir + "/member-" + ms[i].self.label + "-" + std::to_string(attempt);
      ms[i].group = cluster_group::open(o, &err);
      if (!ms[i].group && err.find("cannot listen") == std::string::npos)
        break;
    }
    if (!ms[i].group)
      throw std::runtime_error("cluster group member " + ms[i].self.label + ": " + err);
    ms[i].keeper = std::make_unique<cluster_keeper>(*ms[i].group, std::chrono::milliseconds{250});
  }
  auto as_member = [&](size_t i) {
    pb::ClusterMember m;
    m.set_name(ms[i].self.label);
    m.set_incarnation(ms[i].self.id);
    m.set_group_address(ms[i].self.address);
    return m;
  };
  pb::ClusterCommand found;
  found.mutable_found()->set_cluster_id("bench");
  found.mutable_found()->set_slot_count(1024);
  *found.mutable_found()->mutable_founder() = as_member(0);
  propose_on_leader(ms, found);
  for (size_t i = 1; i < ms.size(); ++i) {
    pb::ClusterCommand join;
    *join.mutable_join()->mutable_member() = as_member(i);
    propose_on_leader(ms, join);  // the keeper makes it active once it caught up
  }
  auto voters = [&] {
    for (auto& m : ms)
      if (m.group->raft().is_leader()) {
        size_t v = 0;
        for (const auto& s : m.group->raft().members())
          v += s.role == raft_group::member_status::role_kind::voter ? 1 : 0;
        return v;
      }
    return size_t{0};
  };
  await([&] { return voters() == 5; }, std::chrono::seconds{60},
        "the cluster group did not reach 5 voters in 60 s");

  std::vector<double> ms_taken;
  for (size_t k = 0; k < changes; ++k) {
    pb::ClusterCommand raise;
    raise.mutable_raise_floor()->set_name("b");
    raise.mutable_raise_floor()->set_incarnation(2);
    raise.mutable_raise_floor()->set_id_floor(1000 * (k + 1));
    const auto t0 = clk::now();
    auto res = propose_on_leader(ms, raise);
    const auto version = res.state->version();
    // Polled every 100 us: the figure is milliseconds.
    while (std::any_of(ms.begin(), ms.end(), [&](const member_proc& m) {
      return m.group->state()->version() < version;
    })) {
      if (clk::now() - t0 > std::chrono::seconds{10})
        throw std::runtime_error("a cluster group change did not reach every member in 10 s");
      std::this_thread::sleep_for(std::chrono::microseconds{100});
    }
    ms_taken.push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  }
  std::sort(ms_taken.begin(), ms_taken.end());
  r.put("group_change_p50_ms", percentile(ms_taken, 0.5));
  r.put("group_change_max_ms", ms_taken.back());
  r.put("group_changes", static_cast<double>(changes));
  for (auto& m : ms)
    m.keeper.reset();
  for (auto& m : ms)
    m.group.reset();
}

}  // namespace proctor::bench
