// What a replica says about its group: why it does not serve (the answer a client gets
// from a replica that does not lead), `proctor replicas` (pb::ReplicasInfo) and the Raft
// metrics its /metrics adds. Read-only: changes to the group are replica_node_change.cpp's.
#include <limits>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "actors/node/replica_node.hpp"

namespace proctor {

not_leader_answer replica_node::why_not() const {
  const auto& s = setup_;
  auto me = "replica " + s.replica + " of node " + s.node_name;
  const auto g = group();
  if (find_replica(g, self_->raft_id) == nullptr)
    return {me + " is not a member of the group any more (it was removed): stop it", "", ""};
  auto l = store_->leader();
  if (l.id == 0)
    return {me + " does not lead it, and no leader is known (an election is under way)", "", ""};
  auto* m = find_replica(g, l.id);
  if (m == nullptr)
    return {me + " does not lead it; its leader has Raft address " + l.address
              + ", not one of --replicas",
            "", ""};
  auto addr = client_address(*m);
  if (m->raft_id == self_->raft_id)
    return {me + " was just elected and is taking over: ask again", addr, setup_.http_address};
  std::string http;
  if (auto recorded = read_recorded_dirs(*store_); recorded.count(m->raft_id) > 0)
    http = recorded[m->raft_id].http;
  return {me + " is a follower; the leader is " + m->name + " at " + addr, addr, http};
}

pb::ReplicasInfo replica_node::replicas() const {
  pb::ReplicasInfo info;
  info.set_node(setup_.node_name);
  info.set_term(store_->term());
  info.set_commit_index(store_->commit_index());
  info.set_applied_index(store_->applied_index());
  info.set_snapshot_index(store_->snapshot_index());
  auto l = store_->leader();
  const auto g = group();
  const auto* lm = l.id != 0 ? find_replica(g, l.id) : nullptr;
  if (lm != nullptr)
    info.set_leader(lm->name);
  else if (l.id != 0)
    info.set_leader(l.address);
  const bool leading = l.id == self_->raft_id;
  const auto last = store_->commit_index();
  // A few keys, read afresh: a replica asking whether it is known must see a removal at once.
  const auto recorded = read_recorded_dirs(*store_);
  for (const auto& m : store_->members()) {
    auto* r = info.add_replicas();
    if (auto i = recorded.find(m.id); i != recorded.end())
      r->set_recorded_data_dir_id(i->second.dir_id);
    if (m.id == self_->raft_id) {
      r->set_data_dir_id(dir_id_);
      r->set_http_address(setup_.http_address);
    } else if (auto i = recorded.find(m.id); i != recorded.end()) {
      r->set_http_address(i->second.http);
    }
    const auto* gm = find_replica(g, m.id);
    r->set_name(gm != nullptr ? gm->name : "id " + std::to_string(m.id));
    if (gm != nullptr)
      r->set_address(client_address(*gm));
    r->set_raft_address(m.address);
    r->set_voter(m.role == raft_store::member_status::role_kind::voter);
    r->set_self(m.id == self_->raft_id);
    if (r->self())
      r->set_role(store_->role());
    else if (m.id == l.id)
      r->set_role("leader");
    else if (leading)
      r->set_role(m.role == raft_store::member_status::role_kind::voter     ? "follower"
                  : m.role == raft_store::member_status::role_kind::standby ? "standby"
                                                                            : "spare");
    if (leading) {
      r->set_match_index(m.match_index);
      r->set_lag(last > m.match_index ? last - m.match_index : 0);
      r->set_reachable(m.recently_heard);
    }
  }
  return info;
}

std::string replica_node::metrics_text() const {
  using prometheus::ClientMetric;
  using prometheus::MetricFamily;
  using prometheus::MetricType;
  auto gauge = [](std::string name, std::string help, double v) {
    ClientMetric m;
    m.gauge.value = v;
    return MetricFamily{std::move(name), std::move(help), MetricType::Gauge, {std::move(m)}};
  };
  std::vector<MetricFamily> out;
  out.push_back(gauge("proctor_raft_term", "The Raft term of this node's replica group.",
                      static_cast<double>(store_->term())));
  out.push_back(gauge("proctor_raft_leader",
                      "1 on the replica that leads its group (and serves the node), 0 on the "
                      "others.",
                      store_->leader().id == self_->raft_id ? 1 : 0));
  out.push_back(gauge("proctor_raft_commit_index", "The group's last committed Raft index.",
                      static_cast<double>(store_->commit_index())));
  out.push_back(gauge("proctor_raft_applied_index",
                      "The last Raft index applied to this replica's RocksDB.",
                      static_cast<double>(store_->applied_index())));
  out.push_back(gauge("proctor_raft_snapshot_index", "The index of this replica's last snapshot.",
                      static_cast<double>(store_->snapshot_index())));
  MetricFamily stored{"proctor_raft_replica_stored_index",
                      "The last Raft index each replica stored, as the leader knows it.",
                      MetricType::Gauge,
                      {}};
  MetricFamily lag{"proctor_raft_replica_lag",
                   "Raft entries each replica is behind the commit index, as the leader knows it.",
                   MetricType::Gauge,
                   {}};
  MetricFamily up{"proctor_raft_replica_reachable",
                  "1 if the leader heard from the replica within an election timeout.",
                  MetricType::Gauge,
                  {}};
  const auto commit = store_->commit_index();
  const auto g = group();
  for (const auto& m : store_->members()) {
    const auto* gm = find_replica(g, m.id);
    std::vector<ClientMetric::Label> labels{
      {"replica", gm != nullptr ? gm->name : "id " + std::to_string(m.id)}};
    ClientMetric s, l, u;
    s.label = l.label = u.label = labels;
    s.gauge.value = static_cast<double>(m.match_index);
    l.gauge.value = static_cast<double>(commit > m.match_index ? commit - m.match_index : 0);
    u.gauge.value = m.recently_heard ? 1 : 0;
    stored.metric.push_back(std::move(s));
    lag.metric.push_back(std::move(l));
    up.metric.push_back(std::move(u));
  }
  out.push_back(std::move(stored));
  out.push_back(std::move(lag));
  out.push_back(std::move(up));
  // Replication latency: a journal write, from handed to Raft to committed on a majority
  // and applied here (this process's writes as leader).
  auto h = store_->commit_latency();
  ClientMetric hm;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    hm.histogram.bucket.push_back({cumulative, h.bounds[i]});
  }
  hm.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
  hm.histogram.sample_count = h.count;
  hm.histogram.sample_sum = h.sum_seconds;
  out.push_back(MetricFamily{"proctor_raft_commit_seconds",
                             "Journal writes from handed to Raft to committed on a majority and "
                             "applied here, while this replica leads.",
                             MetricType::Histogram,
                             {std::move(hm)}});
  return prometheus::TextSerializer{}.Serialize(out);
}

}  // namespace proctor
