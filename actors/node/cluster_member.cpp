// A node's member of the cluster group, its life: opening (a Raft member, or a follower for a
// node run as replicas), the members it publishes to the executor, and the actor that serves
// the client protocol's ClusterRequest (cluster_member.hpp; what it serves:
// cluster_member_commands.cpp; what it tells the group of itself: cluster_member_reports.cpp).
#include "actors/node/cluster_member.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <utility>

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/peer_status.hpp"
#include "actors/base/rpc.hpp"
#include "actors/node/cluster_member_core.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wall_clock.hpp"
#include "actors/wire/wire_client.hpp"

namespace proctor {

namespace cluster_detail {

std::string answer(pb::Response::Code code, const std::string& text) {
  pb::Response r;
  r.set_code(code);
  if (code == pb::Response::OK)
    r.set_text(text);
  else
    r.set_error(text);
  return r.SerializeAsString();
}

const pb::ClusterMember* member_of_incarnation(const pb::ClusterState& st, uint64_t incarnation) {
  for (const auto& m : st.members())
    if (m.incarnation() == incarnation)
      return &m;
  return nullptr;
}

std::string peer_address_of(const pb::ClusterMember& m) {
  return m.peer_address().empty() ? m.client_address() : m.peer_address();
}

}  // namespace cluster_detail

using cluster_detail::answer;
using cluster_detail::member_of_incarnation;
using cluster_detail::peer_address_of;

pb::ClusterMember cluster_member::core::self_member() const {
  pb::ClusterMember m;
  m.set_name(setup.node_name);
  m.set_incarnation(setup.incarnation);
  m.set_number(setup.number);
  m.set_client_address(setup.client_address);
  m.set_peer_address(setup.peer_address ? setup.peer_address() : setup.client_address);
  m.set_group_address(setup.group_address);
  m.set_feature_level(release_feature_level);
  if (setup.next_id)
    m.set_id_floor(setup.next_id());
  return m;
}

cluster_state::state_ptr cluster_member::core::state_now() {
  if (auto g = current())
    return g->state();
  if (auto f = current_follower())
    return f->state();
  return nullptr;
}

std::string cluster_member::core::stopped_now() {
  if (auto g = current())
    return g->stopped_applying();
  if (auto f = current_follower())
    return f->stopped();
  return {};
}

void cluster_member::core::open_follower() {
  if (follower)
    return;
  std::error_code ec;
  std::filesystem::create_directories(setup.dir, ec);  // for DIR/peers
  cluster_follower_options o;
  o.node_name = setup.node_name;
  o.seeds = setup.seeds;
  o.tls = setup.tls;
  follower = std::make_shared<cluster_follower>(o, [this](const cluster_state::state_ptr& st) {
    check_self(*st);
    publish_members(*st);
    {
      std::lock_guard<std::mutex> l(mtx);
      poked = true;  // the reporter: a joining node asks to be made active at once
    }
    cv.notify_all();
  });
  std::string seeds;
  for (const auto& seed : setup.seeds)
    seeds += (seeds.empty() ? "" : ",") + seed;
  spdlog::info("node {}: run as replicas, it takes part in the cluster group with no Raft member "
               "of its own: it follows the group's state through its members (seeds {})",
               setup.node_name, seeds);
}

bool cluster_member::core::open(bool join, std::string* error) {
  if (setup.follow) {
    open_follower();
    return true;
  }
  if (group)
    return true;
  raft_store_options o;
  o.id = setup.incarnation;
  o.address = setup.group_address;
  o.members = {raft_member{setup.incarnation, setup.group_address, setup.node_name}};
  o.dir = setup.dir;
  o.join = join;
  o.election_timeout_ms = setup.election_timeout_ms;
  o.name_of = [](const raft_member& m) { return m.label; };
  if (setup.tls.enabled()) {
    std::string why;
    auto* ctx = make_tls_context(setup.tls, &why);
    if (ctx == nullptr) {
      *error = why;
      return false;
    }
    o.tls = std::shared_ptr<ssl_ctx_st>(ctx, SSL_CTX_free);
    o.tls_reload = setup.tls_reload;
    o.tls_check_host = setup.tls.check_host;
  }
  std::string why;
  auto g = cluster_group::open(o, &why);
  if (!g) {
    *error = "the cluster group's member in " + setup.dir + ": " + why;
    return false;
  }
  group = std::move(g);
  group->subscribe([this](const cluster_state::state_ptr& st) {
    check_self(*st);
    publish_members(*st);
  });
  publish_members(*group->state());
  keeper = std::make_unique<cluster_keeper>(*group, setup.keeper_period);
  spdlog::info("node {}: its member of the cluster group is open on {} (Raft id {:016x}{})",
               setup.node_name, setup.group_address, setup.incarnation,
               join ? ", waiting to be added" : "");
  return true;
}

void cluster_member::core::close() {
  stop = true;
  cv.notify_all();
  if (joiner.joinable())
    joiner.join();
  if (reporter.joinable())
    reporter.join();
  std::shared_ptr<cluster_group> g;
  std::shared_ptr<cluster_follower> f;
  {
    std::lock_guard<std::mutex> l(mtx);
    keeper.reset();  // before the group it uses
    g = std::move(group);
    f = std::move(follower);
  }
  // The actor may still hold a copy: the group closes when the last one goes.
}

void cluster_member::core::check_self(const pb::ClusterState& st) {
  const auto* me = member_of_incarnation(st, setup.incarnation);
  if (me == nullptr)
    return;
  if (me->state() == pb::FORGOTTEN)
    refuse("the cluster forgot node " + setup.node_name + " (this incarnation) at "
           + utc_text(me->since_ms())
           + ": its trees were given up; start it with an empty data directory to join as "
             "a new incarnation");
  else if (me->number() != setup.number)
    refuse("the cluster gave node " + setup.node_name + " the number "
           + std::to_string(me->number()) + ", but the ids of its journal carry "
           + std::to_string(setup.number) + " (another name holds it)");
}

void cluster_member::core::publish_members(const pb::ClusterState& st) {
  std::vector<cluster_peer> members;
  std::string text, told;
  for (const auto& m : st.members()) {
    members.push_back(cluster_peer{m.name(), static_cast<uint16_t>(m.number()), peer_address_of(m),
                                   m.state(), m.incarnation(), m.since_ms(), m.since_index()});
    told += m.name() + " " + std::to_string(m.state()) + " " + peer_address_of(m) + " "
            + std::to_string(m.since_index()) + "\n";
    if ((m.state() == pb::ACTIVE || m.state() == pb::DRAINING) && !peer_address_of(m).empty()
        && m.name() != setup.node_name)
      text += m.name() + "=" + peer_address_of(m) + "\n";
  }
  std::vector<cluster_limit> limits;
  std::string limits_told = "limits\n";
  for (const auto& x : st.limits()) {
    limits.push_back(cluster_limit{x.type(), x.max_running(), x.rate(), x.per_ms()});
    limits_told += x.type() + " " + std::to_string(x.max_running()) + " " + std::to_string(x.rate())
                   + "/" + std::to_string(x.per_ms()) + "\n";
  }
  pb::ClusterState schedules;
  *schedules.mutable_schedules() = st.schedules();
  std::string schedules_told = schedules.SerializeAsString();
  // One at a time, newest last: the loop thread's calls and open()'s first one may cross.
  std::lock_guard<std::mutex> l(published_mtx);
  if (members.empty() || st.version() < published_version)
    return;
  published_version = st.version();
  const bool members_changed = told != published;
  published = told;
  // Before the members: a node that the new members make a schedule's owner knows how far
  // it was decided.
  if (setup.executor && schedules_told != published_schedules) {
    published_schedules = schedules_told;
    caf::anon_send(setup.executor, cluster_schedules_atom::value, std::move(schedules_told));
  }
  if (setup.executor && members_changed)
    caf::anon_send(setup.executor, cluster_peers_atom::value, std::move(members));
  if (setup.executor && limits_told != published_limits) {
    published_limits = limits_told;
    caf::anon_send(setup.executor, cluster_limits_atom::value, std::move(limits));
  }
  if (!members_changed)
    return;
  if (text.empty())
    return;
  const auto path = cluster_peers_file(setup.dir);
  const auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "# The cluster's members as the cluster group last named them (written by "
           "proctord;\n# read at its next start, before the group speaks).\n"
        << text;
    out.flush();
    if (!out) {
      spdlog::warn("node {}: cannot write {}: its next start learns its peers from the "
                   "cluster group only",
                   setup.node_name, tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
}

namespace {

/// Serves one request on a thread of its own, then quits: requests block (a proposal, a
/// request handed on to another node that may hand one back here), so they must not wait for
/// each other.
caf::behavior cluster_request_actor(caf::event_based_actor* self,
                                    std::shared_ptr<cluster_member::core> c) {
  return {[self, c](rpc_atom, const std::string& bytes) {
    auto rp = self->make_response_promise<std::string>();
    rp.deliver(c->serve(bytes));
    self->quit();
    return rp;
  }};
}

caf::behavior cluster_member_actor(caf::event_based_actor* self,
                                   std::shared_ptr<cluster_member::core> c) {
  return {[self, c](rpc_atom, std::string& bytes) {
    auto worker = self->spawn<caf::detached>(cluster_request_actor, c);
    return self->delegate(worker, rpc_atom::value, std::move(bytes));
  }};
}

}  // namespace

std::string cluster_peers_file(const std::string& dir) {
  return dir + "/peers";
}

bool ask_seeds(const std::vector<std::string>& seeds, const tls_options& tls,
               const std::string& self, std::chrono::milliseconds bound, seed_answer* out,
               std::string* error) {
  pb::Request req;
  req.mutable_cluster()->set_op(pb::ClusterRequest::SHOW);
  const auto bytes = req.SerializeAsString();
  wire_call_options wo;
  wo.connect_timeout = std::chrono::milliseconds{2000};
  wo.reply_timeout = std::chrono::milliseconds{5000};
  wo.tls = tls;
  const auto until = std::chrono::steady_clock::now() + bound;
  for (size_t i = 0;; ++i) {
    const auto& seed = seeds[i % seeds.size()];
    auto ep = parse_endpoint(seed);
    auto w = ep ? wire_call(ep->host, ep->port, bytes, wo) : wire_result{};
    pb::Response r;
    if (!ep)
      *error = seed + ": not HOST:PORT";
    else if (!w.ok())
      *error = seed + ": " + w.reason;
    else if (!r.ParseFromString(w.reply) || r.code() != pb::Response::OK)
      *error =
        seed + ": " + (r.error().empty() ? std::string{"no answer it understood"} : r.error());
    else if (r.cluster().state().cluster_id().empty())
      *error = seed + ": it knows no founded cluster";
    else {
      for (const auto& m : r.cluster().state().members()) {
        if (m.name() == self)
          out->id_floor = m.id_floor();
        else if ((m.state() == pb::ACTIVE || m.state() == pb::DRAINING)
                 && !peer_address_of(m).empty())
          out->members[m.name()] = peer_address_of(m);
      }
      return true;
    }
    if (std::chrono::steady_clock::now() >= until)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{200});
  }
}

cluster_member::cluster_member(caf::actor_system& sys) : core_(std::make_shared<core>()) {
  actor_ = sys.spawn(cluster_member_actor, core_);
}

cluster_member::~cluster_member() {
  core_->close();
  caf::anon_send_exit(actor_, caf::exit_reason::user_shutdown);
}

bool cluster_member::start(cluster_member_setup setup, std::string* error) {
  auto& c = *core_;
  c.setup = std::move(setup);
  c.ready.store(true, std::memory_order_release);
  const auto& s = c.setup;
  if (s.init && !s.seeds.empty()) {
    *error = "--cluster-init founds a cluster and --seeds joins one: give one of them";
    return false;
  }
  for (const auto& seed : s.seeds)
    if (!parse_endpoint(seed)) {
      *error = "--seeds wants HOST:PORT,..., got '" + seed + "'";
      return false;
    }
  if (s.follow) {
    // No Raft member: it joins (again) through the seeds at every start, which also tells
    // the group the client address of the replica that leads now.
    if (s.init || s.seeds.empty()) {
      *error = "a node run as replicas takes part in the cluster group through --seeds only";
      return false;
    }
    {
      std::lock_guard<std::mutex> l(c.mtx);
      c.open_follower();
    }
    c.joiner = std::thread([&c] { c.join_loop(); });
    c.reporter = std::thread([&c] { c.report_loop(); });
    return true;
  }
  const bool fresh = raft_state_is_fresh(s.dir);
  if (!fresh || !s.seeds.empty()) {
    std::lock_guard<std::mutex> l(c.mtx);
    if (!c.open(fresh, error))
      return false;
  }
  if (s.init && !fresh) {
    // Founded or joined at an earlier start: the group's log says which (its state is
    // applied once the member hears the group's commit index).
    spdlog::info("node {}: --cluster-init: its member of the cluster group holds Raft state "
                 "already (founded or joined at an earlier start): nothing to found",
                 s.node_name);
  } else if (s.init) {
    std::string text;
    auto code = c.found(&text);
    if (code == pb::Response::OK)
      spdlog::info("node {}: {}", s.node_name, text);
    else {
      *error = "--cluster-init: " + text;
      return false;
    }
  } else if (fresh && s.seeds.empty()) {
    spdlog::info("node {}: a member of no cluster (found one with `proctor cluster init`, or "
                 "start it with --seeds to join one)",
                 s.node_name);
  }
  if (!s.seeds.empty())
    c.joiner = std::thread([&c] { c.join_loop(); });
  c.reporter = std::thread([&c] { c.report_loop(); });
  return true;
}

}  // namespace proctor
