// A node's member of the cluster group, its life: opening, the members it publishes to the
// executor, the id floor it reports, the join through seeds, and the actor that serves the
// client protocol's ClusterRequest (cluster_member.hpp; what it serves:
// cluster_member_commands.cpp).
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

}  // namespace cluster_detail

using cluster_detail::answer;
using cluster_detail::member_of_incarnation;

pb::ClusterMember cluster_member::core::self_member() const {
  pb::ClusterMember m;
  m.set_name(setup.node_name);
  m.set_incarnation(setup.incarnation);
  m.set_number(setup.number);
  m.set_client_address(setup.client_address);
  m.set_peer_address(setup.client_address);
  m.set_group_address(setup.group_address);
  m.set_feature_level(release_feature_level);
  if (setup.next_id)
    m.set_id_floor(setup.next_id());
  return m;
}

bool cluster_member::core::open(bool join, std::string* error) {
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
  {
    std::lock_guard<std::mutex> l(mtx);
    keeper.reset();  // before the group it uses
    g = std::move(group);
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
    members.push_back(cluster_peer{m.name(), static_cast<uint16_t>(m.number()), m.client_address(),
                                   m.state(), m.incarnation(), m.since_ms(), m.since_index()});
    told += m.name() + " " + std::to_string(m.state()) + " " + m.client_address() + " "
            + std::to_string(m.since_index()) + "\n";
    if ((m.state() == pb::ACTIVE || m.state() == pb::DRAINING) && !m.client_address().empty()
        && m.name() != setup.node_name)
      text += m.name() + "=" + m.client_address() + "\n";
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

void cluster_member::core::report_loop() {
  auto last = std::chrono::steady_clock::now() - report_every;
  auto warned = std::chrono::steady_clock::now() - std::chrono::minutes{1};
  while (!stop) {
    {
      std::unique_lock<std::mutex> l(mtx);
      cv.wait_for(l, std::chrono::seconds{1}, [this] { return stop.load(); });
    }
    auto g = current();
    if (stop || !g || !setup.next_id)
      continue;
    // A member that stopped applying (its release is below the cluster's level) says so
    // every minute, not once: the node runs on, but learns no change of the cluster.
    if (auto why = g->stopped_applying();
        !why.empty() && std::chrono::steady_clock::now() - warned >= std::chrono::minutes{1}) {
      warned = std::chrono::steady_clock::now();
      spdlog::error("node {}: its member of the cluster group stopped applying the group's log "
                    "at index {}: {}. It runs what it holds and learns no change of the "
                    "cluster (members, placement, limits, schedules) until it runs such a "
                    "release; `proctor cluster nodes` on it says so",
                    setup.node_name, g->raft().applied_index(), why);
    }
    const auto st = g->state();
    const auto* me = member_of_incarnation(*st, setup.incarnation);
    if (me == nullptr || !member_takes_part(*me))
      continue;
    const uint64_t id = setup.next_id();
    const uint64_t lsn = setup.durable_lsn ? setup.durable_lsn() : 0;
    const auto now = std::chrono::steady_clock::now();
    const bool moved = id > me->id_floor() || lsn > me->journal_lsn();
    // A release of another level than the group recorded for it (upgraded, or a member
    // recorded before levels existed) says so at once: the cluster's level waits for it.
    const bool level_told = me->feature_level() == release_feature_level;
    if (level_told && (!moved || (id < me->id_floor() + report_ids && now - last < report_every)))
      continue;
    pb::Request req;
    req.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
    auto* f = req.mutable_cluster()->mutable_command()->mutable_raise_floor();
    f->set_name(setup.node_name);
    f->set_incarnation(setup.incarnation);
    f->set_id_floor(id);
    f->set_journal_lsn(lsn);
    if (!level_told)
      f->set_feature_level(release_feature_level);
    pb::Response r;
    if (r.ParseFromString(propose_or_forward(std::move(req))) && r.code() == pb::Response::OK)
      last = now;
    else
      spdlog::debug("node {}: its id floor {} not reported to the cluster group yet: {}",
                    setup.node_name, id, r.error());
  }
}

void cluster_member::core::refuse(const std::string& why) {
  if (!refused.exchange(true) && setup.on_refused)
    setup.on_refused(why);
}

void cluster_member::core::join_loop() {
  pb::Request req;
  req.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  *req.mutable_cluster()->mutable_command()->mutable_join()->mutable_member() = self_member();
  const auto bytes = req.SerializeAsString();
  wire_call_options wo;
  wo.connect_timeout = std::chrono::milliseconds{2000};
  wo.reply_timeout = std::chrono::milliseconds{20'000};  // a seed may hand it on
  wo.cancel = &stop;
  wo.tls = setup.tls;
  size_t next = 0;
  std::string hint, why;
  auto backoff = std::chrono::milliseconds{100};
  auto last_warn = std::chrono::steady_clock::now();
  const auto started = last_warn;
  while (!stop) {
    std::string target =
      hint.empty() ? setup.seeds[next++ % setup.seeds.size()] : std::exchange(hint, std::string{});
    auto ep = parse_endpoint(target);
    auto w = wire_call(ep->host, ep->port, bytes, wo);
    pb::Response r;
    if (!w.ok())
      why = target + ": " + w.reason;
    else if (!r.ParseFromString(w.reply))
      why = target + ": an answer that does not parse";
    else if (r.code() == pb::Response::OK) {
      spdlog::info("node {}: joined the cluster through {} in {} ms: {}", setup.node_name, target,
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - started)
                     .count(),
                   r.text());
      return;
    } else if (r.code() == pb::Response::REFUSED || r.code() == pb::Response::BAD_REQUEST) {
      refuse("the cluster refused node " + setup.node_name + " (asked through " + target
             + "): " + r.error());
      return;
    } else {
      why = target + ": " + r.error();
      if (r.code() == pb::Response::NOT_LEADER && !r.leader().empty() && r.leader() != target)
        hint = r.leader();
    }
    if (auto now = std::chrono::steady_clock::now(); now - last_warn > std::chrono::seconds{10}) {
      spdlog::warn("node {}: not joined to the cluster yet, trying again ({})", setup.node_name,
                   why);
      last_warn = now;
    }
    if (!hint.empty())
      continue;  // the leader named: at once
    std::unique_lock<std::mutex> l(mtx);
    cv.wait_for(l, backoff, [this] { return stop.load(); });
    backoff = std::min(backoff * 2, std::chrono::milliseconds{2000});
  }
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
                 && !m.client_address().empty())
          out->members[m.name()] = m.client_address();
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
