// A node run as replicas following the cluster group's state (cluster_follower.hpp).
#include "actors/node/cluster_follower.hpp"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/wire/endpoint.hpp"
#include "actors/wire/wire_client.hpp"

namespace proctor {

namespace {

std::string leader_of(const pb::ClusterInfo& info, const pb::ClusterState& state) {
  if (info.leader_node().empty())
    return {};
  const auto* m = find_member(state, info.leader_node());
  return m == nullptr ? std::string{} : m->client_address();
}

}  // namespace

std::string cluster_follower::next_target(const pb::ClusterInfo& known,
                                          const std::vector<std::string>& seeds,
                                          const std::string& last) {
  std::vector<std::string> c;
  auto add = [&c](const std::string& a) {
    if (!a.empty() && std::find(c.begin(), c.end(), a) == c.end())
      c.push_back(a);
  };
  add(leader_of(known, known.state()));
  for (const auto& m : known.state().members())
    if (member_takes_part(m) && !m.group_address().empty())
      add(m.client_address());
  for (const auto& s : seeds)
    add(s);
  if (c.empty())
    return {};
  auto it = std::find(c.begin(), c.end(), last);
  if (it == c.end())
    return c.front();
  ++it;
  return it == c.end() ? c.front() : *it;
}

cluster_follower::cluster_follower(cluster_follower_options options, on_change_fn on_change)
    : options_(std::move(options)), on_change_(std::move(on_change)) {
  thread_ = std::thread([this] { run(); });
}

cluster_follower::~cluster_follower() {
  {
    std::lock_guard<std::mutex> g(mtx_);
    stop_ = true;
  }
  cancel_ = true;
  cv_.notify_all();
  thread_.join();
}

cluster_state::state_ptr cluster_follower::state() const {
  std::lock_guard<std::mutex> g(mtx_);
  return state_;
}

pb::ClusterInfo cluster_follower::info() const {
  std::lock_guard<std::mutex> g(mtx_);
  auto out = info_;
  *out.mutable_state() = *state_;
  return out;
}

std::string cluster_follower::leader_address() const {
  std::lock_guard<std::mutex> g(mtx_);
  return leader_of(info_, *state_);
}

std::string cluster_follower::stopped() const {
  std::lock_guard<std::mutex> g(mtx_);
  return stopped_;
}

std::string cluster_follower::cut_off() const {
  std::lock_guard<std::mutex> g(mtx_);
  const auto quiet = std::chrono::steady_clock::now() - last_taken_;
  if (quiet < options_.cut_off_after)
    return {};
  return "no leader of the cluster group answered for "
         + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(quiet).count()) + " s ("
         + (last_failure_.empty() ? std::string{"none asked yet"} : last_failure_) + ")";
}

std::string cluster_follower::take(const std::string& target, pb::ClusterInfo answer) {
  if (!answer.stopped_applying().empty())
    return target + ": its member stopped applying the group's log";
  const auto& st = answer.state();
  if (st.cluster_id().empty())
    return target + ": it knows no founded cluster";
  cluster_state::state_ptr taken;
  {
    std::lock_guard<std::mutex> g(mtx_);
    if (!stopped_.empty())
      return stopped_;
    if (!state_->cluster_id().empty() && st.cluster_id() != state_->cluster_id())
      return target + ": a member of the cluster " + st.cluster_id() + ", not of "
             + state_->cluster_id() + " (a seed of another cluster?)";
    // Heard from the group when its leader answered: a member cut off from the leader may
    // still answer, with a state that no longer moves.
    if (answer.role() == "leader")
      last_taken_ = std::chrono::steady_clock::now();
    if (!state_->cluster_id().empty() && st.applied_index() <= state_->applied_index()) {
      if (st.applied_index() == state_->applied_index())
        *info_.mutable_group() = answer.group();  // the same state; the group as now
      if (st.applied_index() == state_->applied_index() && !answer.leader_node().empty())
        info_.set_leader_node(answer.leader_node());
      return {};
    }
    if (cluster_feature_level(st) > options_.release_level) {
      stopped_ = "the cluster's feature level is " + std::to_string(cluster_feature_level(st))
                 + " (as of the group's index " + std::to_string(st.applied_index())
                 + "), above this release's " + std::to_string(options_.release_level);
      spdlog::error("node {}: stopped taking the cluster group's states: {}", options_.node_name,
                    stopped_);
      return stopped_;
    }
    taken = std::make_shared<const pb::ClusterState>(st);
    state_ = taken;
    info_ = std::move(answer);
    info_.clear_state();  // state_ holds it
  }
  on_change_(taken);
  return {};
}

void cluster_follower::run() {
  pb::Request req;
  req.mutable_cluster()->set_op(pb::ClusterRequest::SHOW);
  const auto bytes = req.SerializeAsString();
  wire_call_options wo;
  wo.connect_timeout = std::chrono::milliseconds{1000};
  wo.reply_timeout = std::chrono::milliseconds{2000};
  wo.cancel = &cancel_;
  wo.tls = options_.tls;
  std::string target;
  auto warned = std::chrono::steady_clock::now();
  bool was_cut_off = false;
  for (;;) {
    if (target.empty())
      target = next_target(info(), options_.seeds, {});
    std::string why = "no member or seed is known to ask";
    if (auto ep = parse_endpoint(target); !target.empty() && !ep) {
      why = target + ": not HOST:PORT";
    } else if (ep) {
      auto w = wire_call(ep->host, ep->port, bytes, wo);
      pb::Response r;
      if (!w.ok())
        why = target + ": " + w.reason;
      else if (!r.ParseFromString(w.reply) || r.code() != pb::Response::OK || !r.has_cluster())
        why = target + ": " + (r.error().empty() ? std::string{"no cluster state"} : r.error());
      else
        why = take(target, std::move(*r.mutable_cluster()));
    }
    if (why.empty()) {
      if (auto l = leader_address(); !l.empty())
        target = l;
    } else {
      {
        std::lock_guard<std::mutex> g(mtx_);
        last_failure_ = why;
      }
      target = next_target(info(), options_.seeds, target);
    }
    // Cut off: said when it begins and every 10 s after; and when it ends.
    const auto cut = cut_off();
    const auto now = std::chrono::steady_clock::now();
    if (!cut.empty() && (!was_cut_off || now - warned >= std::chrono::seconds{10})) {
      spdlog::warn("node {}: cut off from the cluster group: {}; it runs what it holds and "
                   "places by the members it last heard of",
                   options_.node_name, cut);
      warned = now;
    } else if (cut.empty() && was_cut_off) {
      spdlog::info("node {}: hears the cluster group again (through {})", options_.node_name,
                   target);
    }
    was_cut_off = !cut.empty();
    std::unique_lock<std::mutex> g(mtx_);
    if (cv_.wait_for(g, options_.period, [this] { return stop_; }))
      return;
  }
}

}  // namespace proctor
