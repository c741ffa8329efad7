#include "actors/node/replica_node.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include "actors/cluster/client_server.hpp"

namespace proctor {

void reexec_self(char** argv) {
  spdlog::default_logger()->flush();
  // Every descriptor is closed by the exec: RocksDB's and libraft's files (and with them the
  // locks on them), the listening sockets, the connections (peers and clients see them
  // drop and go to another address).
  if (DIR* d = opendir("/proc/self/fd")) {
    int self_fd = dirfd(d);
    while (auto* e = readdir(d)) {
      int fd = std::atoi(e->d_name);
      if (fd > 2 && fd != self_fd)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    closedir(d);
  }
  execv("/proc/self/exe", argv);
  spdlog::critical("cannot re-execute this process ({}): exiting", std::strerror(errno));
  spdlog::default_logger()->flush();
  std::_Exit(75);
}

std::unique_ptr<replica_node> replica_node::open(caf::actor_system& sys, replica_setup setup,
                                                 std::string* error) {
  std::unique_ptr<replica_node> r{new replica_node};
  r->sys_ = &sys;
  r->setup_ = std::move(setup);
  const auto& s = r->setup_;
  r->self_ = find_replica(s.group, s.replica);
  if (r->self_ == nullptr) {
    *error = "--replica " + s.replica + " is not one of --replicas";
    return nullptr;
  }
  raft_store_options o;
  o.id = r->self_->raft_id;
  o.address = r->self_->raft_address;
  for (const auto& m : s.group)
    o.members.push_back(raft_member{m.raft_id, m.raft_address});
  o.dir = s.data_dir;
  o.election_timeout_ms = s.election_timeout_ms;
  std::string err;
  auto store = open_raft_store(o, &err);
  if (!store) {
    *error = "replica " + s.replica + ": " + err;
    return nullptr;
  }
  r->store_ = std::shared_ptr<raft_store>(std::move(store));
  auto* raw = r.get();
  r->store_->on_leadership_change([raw](bool leader) {
    if (!leader && raw->leading_.load() && !raw->retired_.load())
      raw->step_down("this replica no longer leads (it lost its majority, or a newer term "
                     "began)");
  });
  front_answers answers;
  answers.why_not = [raw] { return raw->why_not(); };
  answers.replicas = [raw] { return raw->replicas(); };
  answers.metrics = [raw] { return raw->metrics_text(); };
  r->front_ = spawn_replica_front(sys, std::move(answers));
  client_server_config cfg;
  cfg.max_frame_bytes = s.max_frame_bytes;
  auto served =
    spawn_client_server(sys, r->front_, r->self_->client.host, r->self_->client.port, cfg);
  if (!served) {
    *error = "cannot listen on " + r->self_->client.host + ":"
             + std::to_string(r->self_->client.port) + ": " + caf::to_string(served.error());
    return nullptr;
  }
  r->server_ = served->first;
  r->port_ = served->second;
  spdlog::info("replica {} of node {}: Raft on {}, clients on {}:{}, {} replica(s)", s.replica,
               s.node_name, r->self_->raft_address, r->self_->client.host, r->port_,
               s.group.size());
  return r;
}

replica_node::~replica_node() {
  if (server_)
    caf::anon_send_exit(server_, caf::exit_reason::user_shutdown);
  if (front_)
    caf::anon_send_exit(front_, caf::exit_reason::user_shutdown);
}

not_leader_answer replica_node::why_not() const {
  const auto& s = setup_;
  auto me = "replica " + s.replica + " of node " + s.node_name;
  auto l = store_->leader();
  if (l.id == 0)
    return {me + " does not lead it, and no leader is known (an election is under way)", ""};
  auto* m = find_replica(s.group, l.id);
  if (m == nullptr)
    return {me + " does not lead it; its leader has Raft address " + l.address
              + ", not one of --replicas",
            ""};
  auto addr = m->client.host + ":" + std::to_string(m->client.port);
  if (m == self_)
    return {me + " was just elected and is taking over: ask again", addr};
  return {me + " is a follower; the leader is " + m->name + " at " + addr, addr};
}

pb::ReplicasInfo replica_node::replicas() const {
  pb::ReplicasInfo info;
  info.set_node(setup_.node_name);
  info.set_term(store_->term());
  info.set_commit_index(store_->commit_index());
  info.set_applied_index(store_->applied_index());
  info.set_snapshot_index(store_->snapshot_index());
  auto l = store_->leader();
  const auto* lm = l.id != 0 ? find_replica(setup_.group, l.id) : nullptr;
  if (lm != nullptr)
    info.set_leader(lm->name);
  else if (l.id != 0)
    info.set_leader(l.address);
  const bool leading = l.id == self_->raft_id;
  const auto last = store_->commit_index();
  for (const auto& m : store_->members()) {
    auto* r = info.add_replicas();
    const auto* gm = find_replica(setup_.group, m.id);
    r->set_name(gm != nullptr ? gm->name : "id " + std::to_string(m.id));
    if (gm != nullptr)
      r->set_address(gm->client.host + ":" + std::to_string(gm->client.port));
    r->set_raft_address(m.address);
    r->set_voter(m.role == raft_store::member_status::role_kind::voter);
    r->set_self(m.id == self_->raft_id);
    if (r->self())
      r->set_role(store_->role());
    else if (m.id == l.id)
      r->set_role("leader");
    else if (leading)
      r->set_role(m.role == raft_store::member_status::role_kind::voter ? "follower" : "standby");
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
  for (const auto& m : store_->members()) {
    const auto* gm = find_replica(setup_.group, m.id);
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
  return prometheus::TextSerializer{}.Serialize(out);
}

bool replica_node::wait_to_lead(const sigset_t& sigs) {
  bool waited = false;
  for (;;) {
    if (store_->is_leader()) {
      spdlog::info("replica {} of node {} leads (term {}): taking over", setup_.replica,
                   setup_.node_name, store_->term());
      return true;
    }
    if (!waited) {
      spdlog::info("replica {} of node {}: a follower until it is elected", setup_.replica,
                   setup_.node_name);
      waited = true;
    }
    timespec t{0, 100'000'000};
    if (sigtimedwait(&sigs, nullptr, &t) > 0)
      return false;
  }
}

void replica_node::lead(caf::actor executor) {
  leading_ = true;
  caf::anon_send(front_, front_lead_atom::value, std::move(executor));
  if (!store_->is_leader())
    step_down("this replica stopped leading while it took over");
}

void replica_node::step_down(const std::string& why) {
  spdlog::critical("replica {} of node {}: {}: re-executing as a follower (nothing of this "
                   "term runs on)",
                   setup_.replica, setup_.node_name, why);
  reexec_self(setup_.argv);
}

}  // namespace proctor
