#include "actors/node/replica_node.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <thread>

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include "actors/base/leader_fence.hpp"
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

namespace {

/// `members` as replica_members, when every one carries its label.
bool labelled(const std::vector<raft_store::member_status>& members,
              std::vector<replica_member>* out) {
  if (members.empty())
    return false;
  std::vector<replica_member> g;
  for (const auto& m : members) {
    replica_member r;
    std::string err;
    if (!parse_replica(m.label, &r, &err) || r.raft_id != m.id)
      return false;
    g.push_back(std::move(r));
  }
  *out = std::move(g);
  return true;
}

/// Why --recover-group must not run on this directory ("" when it may): a store opened as
/// usual (its members stopped, it cannot be elected) says which group its log holds and
/// whether that group still has a leader.
std::string recover_refusal(const raft_store_options& o, const replica_setup& s) {
  auto probe = o;
  probe.recover = false;
  std::string err;
  auto st = open_raft_store(probe, &err);
  if (!st)
    return err;
  auto until = std::chrono::steady_clock::now()
               + 3 * std::chrono::milliseconds{std::max(s.election_timeout_ms, 100u)};
  while (st->leader().id == 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  const auto leader = st->leader();
  std::vector<replica_member> logged;
  const bool known = labelled(st->members(), &logged);
  st.reset();
  if (leader.id != 0)
    return "node " + s.node_name + "'s group has a leader (Raft address " + leader.address
           + "): it has its majority, there is nothing to recover (stop every replica but "
             "this one first, if that is what you meant)";
  if (!known)
    return "the Raft log in " + s.data_dir + " names no labelled group to recover";
  for (const auto& m : s.group)
    if (find_replica(logged, std::string_view{m.name}) == nullptr)
      return m.name + " is not a member of node " + s.node_name + "'s group (it is "
             + replica_group_spec(logged)
             + "): keep survivors only, and add new replicas afterwards (`proctor replicas add`)";
  if (same_members(logged, s.group))
    return "node " + s.node_name + "'s group is already " + replica_group_spec(logged)
           + ": start without --recover-group";
  return "";
}

}  // namespace

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
  // Which replica the data directory holds (REPLICA, beside NODE): another one's is refused.
  auto file = read_replica_file(s.data_dir);
  if (!file.name.empty() && file.name != s.replica) {
    *error = "data directory " + s.data_dir + " belongs to replica " + file.name + " of node "
             + s.node_name + ", not to " + s.replica;
    return nullptr;
  }
  // A directory with no Raft state (new, or wiped) must not be one the group knows this
  // replica by under another id: it would have forgotten its vote (replica_identity.hpp).
  // No Raft state makes a new id even where REPLICA has one (only raft/ was deleted): the
  // state the old id stood for is gone.
  const bool fresh = raft_state_is_fresh(s.data_dir);
  r->dir_id_ = fresh || file.dir_id.empty() ? new_data_dir_id() : file.dir_id;
  if (fresh) {
    if (auto why = check_not_wiped(s.group, *r->self_, s.node_name, r->dir_id_, s.tls);
        !why.empty()) {
      *error = why;
      return nullptr;
    }
  }
  raft_store_options o;
  o.id = r->self_->raft_id;
  o.address = r->self_->raft_address;
  for (const auto& m : s.group)
    o.members.push_back(raft_member{m.raft_id, m.raft_address, replica_spec(m)});
  o.dir = s.data_dir;
  o.election_timeout_ms = s.election_timeout_ms;
  o.join = s.join;
  o.name_of = [](const raft_member& m) {  // logs say "b2 (#2)"
    replica_member r;
    std::string why;
    return parse_replica(m.label, &r, &why) ? r.name : std::string{};
  };
  if (s.tls.enabled()) {
    // The Raft port is protected as the node's own (docs/replication.md, "TLS").
    std::string why;
    auto* ctx = make_tls_context(s.tls, &why);
    if (ctx == nullptr) {
      *error = why;
      return nullptr;
    }
    o.tls = std::shared_ptr<ssl_ctx_st>(ctx, SSL_CTX_free);
    o.tls_peer_node = s.node_name;  // every replica of the group is this node's
    o.tls_reload = s.tls_reload;
    o.tls_check_host = s.tls.check_host;
  }
  if (s.recover) {
    if (fresh) {
      *error = "--recover-group: " + s.data_dir
               + " holds no Raft state: run it on the survivor "
                 "with the longest log";
      return nullptr;
    }
    if (auto why = recover_refusal(o, s); !why.empty()) {
      *error = "--recover-group: " + why;
      return nullptr;
    }
    spdlog::critical("replica {} of node {}: forcing the group to be {} (--recover-group)",
                     s.replica, s.node_name, replica_group_spec(s.group));
    o.recover = true;
  }
  std::string err;
  auto store = open_raft_store(o, &err);
  if (!store) {
    *error = "replica " + s.replica + ": " + err;
    return nullptr;
  }
  r->store_ = std::shared_ptr<raft_store>(std::move(store));
  // The membership in the Raft log is the group's; --replicas is only the founding list (and
  // the address book until the log has a configuration): a configuration file that still
  // names the group as it was founded starts the replica on the group as it is (issue 47.8).
  std::vector<replica_member> logged;
  const bool has_logged_group = r->labelled_group(&logged);
  if (has_logged_group) {
    if (find_replica(logged, s.replica) == nullptr) {
      *error = "replica " + s.replica + " is not a member of node " + s.node_name
               + "'s group any more (it was removed; the group is " + replica_group_spec(logged)
               + "): to bring this machine back, delete " + s.data_dir
               + " and add it again (`proctor replicas add`, then proctord --join)";
      return nullptr;
    }
    if (!same_members(logged, s.group)) {
      spdlog::info("replica {} of node {}: the group in {} is {}, not --replicas {}: its own "
                   "is used (--replicas only founds a group; `proctor replicas add/remove` "
                   "changes it)",
                   s.replica, s.node_name, s.data_dir, replica_group_spec(logged),
                   replica_group_spec(s.group));
      r->setup_.group = std::move(logged);  // (`s` is r->setup_)
      r->self_ = find_replica(r->setup_.group, s.replica);
    }
  }
  if (file.name != s.replica || file.dir_id != r->dir_id_) {
    if (!write_replica_file(s.data_dir, {s.replica, r->dir_id_}, error))
      return nullptr;
  }
  auto* raw = r.get();
  // Only a leader acts: no step runs while this replica is not sure it leads (a follower's
  // never do: it runs no executor).
  leader_fence::install([weak = std::weak_ptr<raft_store>(r->store_)] {
    auto store = weak.lock();
    return store && store->sure_to_lead();
  });
  r->store_->on_leadership_change([raw](bool leader) {
    if (!leader && raw->leading_.load() && !raw->retired_.load())
      raw->step_down("this replica no longer leads (it lost its majority, or a newer term "
                     "began)");
  });
  front_answers answers;
  answers.why_not = [raw] { return raw->why_not(); };
  answers.replicas = [raw] { return raw->replicas(); };
  answers.metrics = [raw] { return raw->metrics_text(); };
  answers.change = [raw](const pb::ReplicasRequest& rq) { return raw->change(rq); };
  r->front_ = spawn_replica_front(sys, std::move(answers));
  client_server_config cfg;
  cfg.max_frame_bytes = s.max_frame_bytes;
  if (s.auth_policy)
    cfg.policy = s.auth_policy;
  cfg.audit_submits = s.audit_submits;
  if (s.refused_requests)
    cfg.refused_requests = s.refused_requests;
  auto served =
    spawn_client_server(sys, r->front_, r->self_->client.host, r->self_->client.port, cfg);
  if (!served) {
    *error = "cannot listen on " + r->self_->client.host + ":"
             + std::to_string(r->self_->client.port) + ": " + caf::to_string(served.error());
    return nullptr;
  }
  r->server_ = served->first;
  r->port_ = served->second;
  spdlog::info("replica {} of node {}: Raft on {}, clients on {}:{}, {} replica(s){}", s.replica,
               s.node_name, r->self_->raft_address, r->self_->client.host, r->port_, s.group.size(),
               s.join && !has_logged_group ? "; joining: waiting to be added to the group" : "");
  return r;
}

replica_node::~replica_node() {
  recorder_.reset();
  if (server_)
    caf::anon_send_exit(server_, caf::exit_reason::user_shutdown);
  if (front_)
    caf::anon_send_exit(front_, caf::exit_reason::user_shutdown);
}

bool replica_node::labelled_group(std::vector<replica_member>* out) const {
  return labelled(store_->members(), out);
}

std::vector<replica_member> replica_node::group() const {
  std::vector<replica_member> g;
  return labelled_group(&g) ? g : setup_.group;
}

std::string replica_node::peer_addresses() const {
  auto text = [](const endpoint& e) { return e.host + ":" + std::to_string(e.port); };
  std::string out = text(self_->client);
  for (const auto& m : group())
    if (m.name != self_->name)
      out += "|" + text(m.client);
  return out;
}

bool replica_node::wait_to_lead(const sigset_t& sigs, const std::function<void()>& on_hangup) {
  bool waited = false;
  auto said = std::chrono::steady_clock::now();
  // Since when no replica leads, as seen here (not since this replica started: a follower
  // under a live leader for an hour says "no leader for 2 s" two seconds after it died).
  auto since = said;
  bool had_leader = true;
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (store_->leader().id != 0) {
      had_leader = true;
    } else if (had_leader) {
      had_leader = false;
      since = now;
    }
    // No leader for long: say so every 10 s (a group elects only with a majority of its
    // voters reachable; a replica never elects itself alone).
    if (now - said >= std::chrono::seconds{10}) {
      said = now;
      if (store_->leader().id == 0) {
        auto g = group();
        std::string names;
        for (const auto& m : g)
          names += (names.empty() ? "" : ", ") + m.name;
        spdlog::warn("replica {} of node {}: no leader for {} s (term {}); an election needs "
                     "a majority of {} to reach each other{}",
                     setup_.replica, setup_.node_name,
                     std::chrono::duration_cast<std::chrono::seconds>(now - since).count(),
                     store_->term(), names,
                     store_->members().empty() ? " (this replica is in no group yet: add it "
                                                 "with `proctor replicas add` on the leader)"
                                               : "");
      }
    }
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
    if (int sig = sigtimedwait(&sigs, nullptr, &t); sig == SIGHUP)
      on_hangup();  // a reload, never a stop
    else if (sig > 0)
      return false;
  }
}

void replica_node::lead(caf::actor executor) {
  leading_ = true;
  dir_recorder::setup rs;
  rs.node_name = setup_.node_name;
  rs.self = self_;
  rs.self_dir_id = dir_id_;
  rs.self_http = setup_.http_address;
  rs.group = [this] { return group(); };
  rs.store = store_.get();
  rs.tls = setup_.tls;
  recorder_ = std::make_unique<dir_recorder>(std::move(rs));
  caf::anon_send(front_, front_lead_atom::value, std::move(executor));
  if (!store_->is_leader())
    step_down("this replica stopped leading while it took over");
}

void replica_node::step_down(const std::string& why) {
  spdlog::critical("replica {} of node {}: {}: re-executing as a follower (nothing of this "
                   "term runs on)",
                   setup_.replica, setup_.node_name, why);
  // The same command line, but --replicas as the group is now (members may have been added
  // or removed since the start: the restarted process checks its list against the log).
  std::vector<std::string> args;
  for (char** a = setup_.argv; *a != nullptr; ++a)
    args.emplace_back(*a);
  std::vector<replica_member> now;
  if (labelled_group(&now)) {
    const auto spec = replica_group_spec(now);
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--replicas" && i + 1 < args.size())
        args[i + 1] = spec;
      else if (args[i].rfind("--replicas=", 0) == 0)
        args[i] = "--replicas=" + spec;
    }
  }
  // A group recovered once is not recovered again (raft_recover runs once).
  args.erase(std::remove(args.begin(), args.end(), std::string{"--recover-group"}), args.end());
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  reexec_self(argv.data());
}

}  // namespace proctor
