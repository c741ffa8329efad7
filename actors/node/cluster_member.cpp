// A node's member of the cluster group: opening, founding, joining through seeds, and the
// ClusterRequest the client protocol carries (cluster_member.hpp).
#include "actors/node/cluster_member.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/peer_status.hpp"
#include "actors/base/placement.hpp"
#include "actors/base/rpc.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wall_clock.hpp"
#include "actors/wire/wire_client.hpp"
#include "replication/cluster_group.hpp"
#include "replication/cluster_keeper.hpp"

namespace proctor {

namespace {

std::string answer(pb::Response::Code code, const std::string& text) {
  pb::Response r;
  r.set_code(code);
  if (code == pb::Response::OK)
    r.set_text(text);
  else
    r.set_error(text);
  return r.SerializeAsString();
}

std::string random_cluster_id() {
  std::random_device rd;
  std::mt19937_64 gen{(uint64_t{rd()} << 32) ^ rd()};
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(gen()),
                static_cast<unsigned long long>(gen()));
  return buf;
}

const pb::ClusterMember* member_of_incarnation(const pb::ClusterState& st, uint64_t incarnation) {
  for (const auto& m : st.members())
    if (m.incarnation() == incarnation)
      return &m;
  return nullptr;
}

const char* role_name(raft_group::member_status::role_kind r) {
  switch (r) {
    case raft_group::member_status::role_kind::voter:
      return "voter";
    case raft_group::member_status::role_kind::standby:
      return "standby";
    case raft_group::member_status::role_kind::spare:
      return "spare";
  }
  return "?";
}

}  // namespace

struct cluster_member::core {
  cluster_member_setup setup;  // written once by start(), before `ready`
  std::atomic<bool> ready{false};
  std::mutex mtx;
  std::condition_variable cv;            // the joiner's back-off; woken by close()
  std::shared_ptr<cluster_group> group;  // mtx; copies are used outside it
  std::unique_ptr<cluster_keeper> keeper;
  std::mutex init_mtx;  // one founding at a time
  std::thread joiner;
  std::thread reporter;
  std::atomic<bool> stop{false};
  std::atomic<bool> refused{false};
  std::mutex published_mtx;
  std::string published;           // published_mtx: the members last told, as text
  uint64_t published_version = 0;  // published_mtx: ... and their state's version

  std::shared_ptr<cluster_group> current() {
    std::lock_guard<std::mutex> g(mtx);
    return group;
  }

  /// This node as a member of the cluster, for a founding or a join.
  pb::ClusterMember self_member() const {
    pb::ClusterMember m;
    m.set_name(setup.node_name);
    m.set_incarnation(setup.incarnation);
    m.set_number(setup.number);
    m.set_client_address(setup.client_address);
    m.set_peer_address(setup.client_address);
    m.set_group_address(setup.group_address);
    if (setup.next_id)
      m.set_id_floor(setup.next_id());
    return m;
  }

  /// Opens the member (mtx held). `join`: a fresh directory waits to be added rather than
  /// bootstrapping a group of one.
  bool open(bool join, std::string* error) {
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

  void close() {
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

  /// Stops the node when the group forgot its incarnation (an operator declared it lost:
  /// its trees were given up elsewhere), or gave its name another number than its ids carry
  /// (the ids it handed out could repeat another node's; a node with a new journal could
  /// take the group's number instead: not built yet, docs/cluster-group.md).
  void check_self(const pb::ClusterState& st) {
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

  /// Tells the executor of the members that take part, and keeps them in DIR/peers, when
  /// they changed.
  void publish_members(const pb::ClusterState& st) {
    std::vector<cluster_peer> members;
    std::string text, told;
    for (const auto& m : st.members()) {
      members.push_back(cluster_peer{m.name(), static_cast<uint16_t>(m.number()),
                                     m.client_address(), m.state(), m.incarnation(), m.since_ms(),
                                     m.since_index()});
      told += m.name() + " " + std::to_string(m.state()) + " " + m.client_address() + " "
              + std::to_string(m.since_index()) + "\n";
      if ((m.state() == pb::ACTIVE || m.state() == pb::DRAINING) && !m.client_address().empty()
          && m.name() != setup.node_name)
        text += m.name() + "=" + m.client_address() + "\n";
    }
    // One at a time, newest last: the loop thread's calls and open()'s first one may cross.
    std::lock_guard<std::mutex> l(published_mtx);
    if (members.empty() || told == published || st.version() < published_version)
      return;
    published = told;
    published_version = st.version();
    if (setup.executor)
      caf::anon_send(setup.executor, cluster_peers_atom::value, std::move(members));
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

  // -- founding ------------------------------------------------------------------------------

  /// Founds the cluster on this node. OK with the outcome; REFUSED when this node belongs to
  /// a cluster, or is joining one.
  pb::Response::Code found(std::string* text) {
    std::lock_guard<std::mutex> one(init_mtx);
    std::shared_ptr<cluster_group> g;
    {
      std::lock_guard<std::mutex> l(mtx);
      if (!open(false, text))
        return pb::Response::INTERNAL;
      g = group;
    }
    if (auto st = g->state(); !st->cluster_id().empty()) {
      *text = "node " + setup.node_name + " is a member of the cluster " + st->cluster_id()
              + " already: there is nothing to found";
      return pb::Response::REFUSED;
    }
    auto members = g->raft().members();
    if (members.empty()) {
      *text =
        "node " + setup.node_name + " is joining a cluster (--seeds): it cannot found another one";
      return pb::Response::REFUSED;
    }
    if (members.size() != 1 || members[0].id != setup.incarnation) {
      // (Its state may not be applied yet after a restart: the group's log says more.)
      *text = "node " + setup.node_name + "'s member of the cluster group is in a group of "
              + std::to_string(members.size()) + ": it founded or joined a cluster already";
      return pb::Response::REFUSED;
    }
    // A group of one elects itself within one or two election timeouts.
    const auto bound = std::chrono::milliseconds{5 * setup.election_timeout_ms};
    const auto until = std::chrono::steady_clock::now() + bound;
    while (!g->raft().is_leader() && !stop && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    if (!g->raft().is_leader()) {
      *text = "node " + setup.node_name + "'s member of the cluster group did not become "
              + "leader of its group of one within " + std::to_string(bound.count()) + " ms";
      return pb::Response::INTERNAL;
    }
    pb::ClusterCommand c;
    auto* f = c.mutable_found();
    f->set_cluster_id(random_cluster_id());
    f->set_slot_count(placement::slot_count);
    *f->mutable_founder() = self_member();
    auto r = g->propose(std::move(c));
    if (!r.status.ok()) {
      *text = "the founding was not committed: " + r.status.ToString();
      return pb::Response::INTERNAL;
    }
    *text = r.outcome.text;
    return r.outcome.applied ? pb::Response::OK : pb::Response::REFUSED;
  }

  // -- commands ------------------------------------------------------------------------------

  /// Proposes `req`'s command if this member leads; otherwise hands it on to the leader's
  /// node once, or answers NOT_LEADER naming it.
  std::string propose_or_forward(pb::Request req) {
    auto g = current();
    if (!g)
      return answer(pb::Response::NOT_LEADER,
                    "node " + setup.node_name + " is not a member of a cluster group yet");
    auto st = g->state();
    if (st->cluster_id().empty())
      // Not final for a joiner: the founding may be under way, or not applied here yet.
      return answer(pb::Response::NOT_LEADER, "the cluster is not founded yet as node "
                                                + setup.node_name
                                                + " knows it (`proctor cluster init` on one node)");
    if (g->raft().is_leader()) {
      auto r = g->propose(req.cluster().command());
      if (r.status.ok())
        return answer(r.outcome.applied ? pb::Response::OK : pb::Response::REFUSED, r.outcome.text);
      if (!r.status.IsBusy())
        return answer(pb::Response::INTERNAL, "the cluster group did not decide ("
                                                + r.status.ToString()
                                                + "): proposing it again is safe");
      st = g->state();  // leadership moved: on to the new leader
    }
    const auto leader = g->raft().leader();
    const auto* lm = leader.id == 0 ? nullptr : member_of_incarnation(*st, leader.id);
    if (lm == nullptr || leader.id == setup.incarnation)
      return answer(pb::Response::NOT_LEADER,
                    "no leader of the cluster group is known to node " + setup.node_name);
    auto not_leader = [&](const std::string& why) {
      pb::Response r;
      r.set_code(pb::Response::NOT_LEADER);
      r.set_error(why);
      r.set_leader(lm->client_address());
      return r.SerializeAsString();
    };
    auto ep = parse_endpoint(lm->client_address());
    if (req.cluster().forwarded() || !ep)
      return not_leader("node " + setup.node_name + " does not lead the cluster group; "
                        + lm->name() + " does");
    req.mutable_cluster()->set_forwarded(true);
    auto w = call(*ep, req);
    if (!w.ok())
      return not_leader("the cluster group's leader " + lm->name()
                        + " did not answer: " + w.reason);
    return std::move(w.reply);
  }

  /// The member named by an operator's command, or why there is none.
  const pb::ClusterMember* named(const pb::ClusterState& st, const std::string& name,
                                 std::string* why) {
    const auto* m = find_member(st, name);
    if (m == nullptr)
      *why = st.cluster_id().empty()
               ? "node " + setup.node_name + " is a member of no founded cluster"
               : "no member of the cluster is named '" + name + "'";
    return m;
  }

  /// `proctor node drain NAME --cancel`: a draining member is made active again (the
  /// keeper's activation, for a member that drains; refused for any other).
  std::string cancel_drain(pb::Request req) {
    auto g = current();
    if (!g)
      return answer(pb::Response::REFUSED, "node " + setup.node_name + " is in no cluster group");
    auto* a = req.mutable_cluster()->mutable_command()->mutable_activate();
    std::string why;
    const auto st = g->state();
    const auto* m = named(*st, a->name(), &why);
    if (m == nullptr)
      return answer(pb::Response::REFUSED, why);
    if (m->state() != pb::DRAINING)
      return answer(pb::Response::REFUSED, "node " + m->name() + " is "
                                             + member_state_name(m->state())
                                             + ", not draining: there is no drain to cancel");
    a->set_incarnation(m->incarnation());
    return propose_or_forward(std::move(req));
  }

  /// `proctor node remove NAME`: only the member itself can say it holds nothing
  /// unfinished, so the request goes to it; there, a draining member that holds no
  /// procedure that has not ended proposes its removal under its incarnation.
  std::string remove(pb::Request req) {
    auto g = current();
    if (!g)
      return answer(pb::Response::REFUSED, "node " + setup.node_name + " is in no cluster group");
    auto* r = req.mutable_cluster()->mutable_command()->mutable_remove();
    if (req.cluster().forwarded() && r->incarnation() != 0)
      return propose_or_forward(std::move(req));  // the member's own, handed to the leader
    std::string why;
    const auto st = g->state();
    const auto* m = named(*st, r->name(), &why);
    if (m == nullptr)
      return answer(pb::Response::REFUSED, why);
    if (m->state() == pb::LEFT)
      return answer(pb::Response::OK, "node " + m->name() + " left the cluster already");
    if (m->state() != pb::DRAINING)
      return answer(pb::Response::REFUSED,
                    "node " + m->name() + " is " + member_state_name(m->state())
                      + ": drain it first (`proctor node drain " + m->name()
                      + "`), then remove it once it holds nothing unfinished");
    if (m->name() != setup.node_name) {
      auto ep = parse_endpoint(m->client_address());
      if (req.cluster().forwarded() || !ep)
        return answer(pb::Response::REFUSED,
                      "node " + m->name() + " is not node " + setup.node_name + ": ask it");
      req.mutable_cluster()->set_forwarded(true);
      auto w = call(*ep, req);
      if (!w.ok())
        return answer(pb::Response::REFUSED,
                      "node " + m->name() + " could not be asked what it still holds (" + w.reason
                        + "); a node that is lost is forgotten (`proctor node forget " + m->name()
                        + " --confirm-lost`), not removed");
      return std::move(w.reply);
    }
    const uint64_t live = setup.live ? setup.live() : 0;
    if (live > 0)
      return answer(pb::Response::REFUSED,
                    "node " + m->name() + " still holds " + std::to_string(live)
                      + " procedure(s) that have not ended (`proctor list` on it): it can be "
                        "removed once they did; nothing new is placed on it meanwhile");
    if (setup.nonces_handed) {
      auto why = setup.nonces_handed();
      if (!why.empty())
        return answer(pb::Response::REFUSED,
                      why
                        + ": it can be removed once they did (within a second of the "
                          "drain while every member is up); retry");
    }
    r->set_incarnation(setup.incarnation);
    req.mutable_cluster()->set_forwarded(false);
    return propose_or_forward(std::move(req));
  }

  /// `proctor node forget NAME --confirm-lost` on a node of the cluster group (the node's
  /// executor journaled the forgetting first): recorded in the group under the incarnation
  /// it holds, so that every node forgets it and it never takes work again.
  std::string forget(pb::Request req) {
    auto g = current();
    if (!g)
      return answer(pb::Response::REFUSED, "node " + setup.node_name + " is in no cluster group");
    auto* f = req.mutable_cluster()->mutable_command()->mutable_forget();
    std::string why;
    const auto st = g->state();
    const auto* m = named(*st, f->name(), &why);
    if (m == nullptr)
      return answer(pb::Response::REFUSED, why);
    if (f->incarnation() == 0)
      f->set_incarnation(m->incarnation());
    return propose_or_forward(std::move(req));
  }

  wire_result call(const endpoint& ep, const pb::Request& req) {
    wire_call_options wo;
    wo.connect_timeout = std::chrono::milliseconds{2000};
    wo.reply_timeout = std::chrono::milliseconds{15'000};  // above the group's write timeout
    wo.cancel = &stop;
    wo.tls = setup.tls;
    return wire_call(ep.host, ep.port, req.SerializeAsString(), wo);
  }

  std::string show() {
    pb::Response r;
    auto* ci = r.mutable_cluster();
    ci->set_node(setup.node_name);
    auto g = current();
    if (!g) {
      ci->set_role("none");
      return r.SerializeAsString();
    }
    auto st = g->state();
    *ci->mutable_state() = *st;
    ci->set_role(g->raft().role());
    const auto leader = g->raft().leader();
    ci->set_leader_id(leader.id);
    if (const auto* lm = member_of_incarnation(*st, leader.id))
      ci->set_leader_node(lm->name());
    ci->set_applied_index(g->raft().applied_index());
    for (const auto& m : g->raft().members()) {
      auto* gm = ci->add_group();
      gm->set_id(m.id);
      gm->set_name(m.label);
      gm->set_address(m.address);
      gm->set_role(role_name(m.role));
      gm->set_heard(m.recently_heard);
      gm->set_match_index(m.match_index);
    }
    return r.SerializeAsString();
  }

  std::string serve(const std::string& bytes) {
    if (!ready.load(std::memory_order_acquire))
      return answer(pb::Response::NOT_LEADER, "the node is starting: try again");
    pb::Request req;
    if (!req.ParseFromString(bytes) || !req.has_cluster())
      return answer(pb::Response::BAD_REQUEST, "not a cluster request");
    switch (req.cluster().op()) {
      case pb::ClusterRequest::SHOW:
        return show();
      case pb::ClusterRequest::INIT: {
        std::string text;
        auto code = found(&text);
        spdlog::log(code == pb::Response::OK ? spdlog::level::info : spdlog::level::warn,
                    "node {}: proctor cluster init: {}", setup.node_name, text);
        return answer(code, text);
      }
      case pb::ClusterRequest::PROPOSE:
        switch (req.cluster().command().command_case()) {
          case pb::ClusterCommand::kJoin:
          case pb::ClusterCommand::kRaiseFloor:
          case pb::ClusterCommand::kDrain:
            return propose_or_forward(std::move(req));
          case pb::ClusterCommand::kActivate:
            return cancel_drain(std::move(req));
          case pb::ClusterCommand::kRemove:
            return remove(std::move(req));
          case pb::ClusterCommand::kForget:
            return forget(std::move(req));
          default:
            return answer(pb::Response::BAD_REQUEST,
                          "a cluster command that is not proposed over the client protocol "
                          "(found: `proctor cluster init`)");
        }
      default:
        return answer(pb::Response::BAD_REQUEST, "an unknown cluster request");
    }
  }

  // -- reporting ---------------------------------------------------------------------------

  static constexpr uint64_t report_ids = uint64_t{1} << 16;
  static constexpr std::chrono::seconds report_every{10};

  /// Every second: how far this node's ids and journal went, proposed to the group (handed to
  /// its leader) when the ids moved 2^16 past the group's floor for this name, or anything
  /// moved and the last report is 10 s old. Only while this incarnation takes part.
  void report_loop() {
    auto last = std::chrono::steady_clock::now() - report_every;
    while (!stop) {
      {
        std::unique_lock<std::mutex> l(mtx);
        cv.wait_for(l, std::chrono::seconds{1}, [this] { return stop.load(); });
      }
      auto g = current();
      if (stop || !g || !setup.next_id)
        continue;
      const auto st = g->state();
      const auto* me = member_of_incarnation(*st, setup.incarnation);
      if (me == nullptr || !member_takes_part(*me))
        continue;
      const uint64_t id = setup.next_id();
      const uint64_t lsn = setup.durable_lsn ? setup.durable_lsn() : 0;
      const auto now = std::chrono::steady_clock::now();
      const bool moved = id > me->id_floor() || lsn > me->journal_lsn();
      if (!moved || (id < me->id_floor() + report_ids && now - last < report_every))
        continue;
      pb::Request req;
      req.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
      auto* f = req.mutable_cluster()->mutable_command()->mutable_raise_floor();
      f->set_name(setup.node_name);
      f->set_incarnation(setup.incarnation);
      f->set_id_floor(id);
      f->set_journal_lsn(lsn);
      pb::Response r;
      if (r.ParseFromString(propose_or_forward(std::move(req))) && r.code() == pb::Response::OK)
        last = now;
      else
        spdlog::debug("node {}: its id floor {} not reported to the cluster group yet: {}",
                      setup.node_name, id, r.error());
    }
  }

  // -- joining -------------------------------------------------------------------------------

  void refuse(const std::string& why) {
    if (!refused.exchange(true) && setup.on_refused)
      setup.on_refused(why);
  }

  /// Sends the join to the seeds in turn (or to the leader one named) until the group
  /// decides; backs off up to 2 s between rounds and warns at most every 10 s.
  void join_loop() {
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
      std::string target = hint.empty() ? setup.seeds[next++ % setup.seeds.size()]
                                        : std::exchange(hint, std::string{});
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
};

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
