// The cluster group's state machine (cluster_state.hpp): applies the rules of
// cluster_rules.cpp to committed entries, keeps their outcomes for their proposers, publishes
// the state, and takes and restores snapshots.
#include "replication/cluster_state.hpp"

#include <utility>

namespace proctor {

cluster_state::cluster_state(uint32_t release_level)
    : release_level_(release_level), state_(std::make_shared<pb::ClusterState>()) {
  // nop
}

std::string cluster_state::above_release(const pb::ClusterState& next) const {
  const auto level = cluster_feature_level(next);
  if (level <= release_level_)
    return "";
  return "the cluster applies its commands at feature level " + std::to_string(level)
         + ", and this release knows up to " + std::to_string(release_level_)
         + ": it stops applying rather than decide what it does not know; run this node on "
           "a release of level "
         + std::to_string(level) + " or above (a downgrade below the cluster's level is not "
         + "possible once every member was upgraded)";
}

rocksdb::Status cluster_state::stop_applying(const std::string& why) {
  std::lock_guard<std::mutex> g(mtx_);
  if (stopped_.empty())
    stopped_ = why;
  return rocksdb::Status::Aborted(why);
}

std::string cluster_state::stopped() const {
  std::lock_guard<std::mutex> g(mtx_);
  return stopped_;
}

cluster_state::state_ptr cluster_state::current() const {
  std::lock_guard<std::mutex> g(mtx_);
  return state_;
}

std::optional<cluster_outcome> cluster_state::outcome(uint64_t request_id) const {
  std::lock_guard<std::mutex> g(mtx_);
  auto it = outcomes_.find(request_id);
  if (it == outcomes_.end())
    return std::nullopt;
  return it->second;
}

void cluster_state::subscribe(std::function<void(const state_ptr&)> fn) {
  std::lock_guard<std::mutex> g(mtx_);
  subs_.push_back(std::move(fn));
}

rocksdb::Status cluster_state::apply(uint64_t index, std::string_view entry) {
  if (index <= applied_index())
    return rocksdb::Status::OK();
  pb::ClusterCommand c;
  if (!decode_cluster_command(entry, &c))
    return rocksdb::Status::Corruption("cluster group entry " + std::to_string(index)
                                       + " is not a cluster command");
  auto next = *current();
  const uint64_t version = next.version();
  auto out = apply_cluster_command(&next, c, index);
  if (auto why = above_release(next); !why.empty())
    return stop_applying(why);  // the Raft store stops applying, saying why
  next.set_applied_index(index);
  const bool changed = next.version() != version;
  std::vector<std::function<void(const state_ptr&)>> subs;
  state_ptr published;
  {
    std::lock_guard<std::mutex> g(mtx_);
    state_ = std::make_shared<pb::ClusterState>(std::move(next));
    published = state_;
    if (c.request_id() != 0 && outcomes_.emplace(c.request_id(), std::move(out)).second) {
      outcome_order_.push_back(c.request_id());
      if (outcome_order_.size() > kept_outcomes) {
        outcomes_.erase(outcome_order_.front());
        outcome_order_.pop_front();
      }
    }
    if (changed)
      subs = subs_;
  }
  applied_.store(index, std::memory_order_release);
  for (auto& fn : subs)
    fn(published);
  return rocksdb::Status::OK();
}

void cluster_state::begin_snapshot(uint64_t index) {
  auto s = current();
  // The snapshot libraft takes is at `index`, which may be past the last command (barriers
  // and configuration entries do not reach the state machine): the state is the same.
  auto pinned = std::make_shared<pb::ClusterState>(*s);
  pinned->set_applied_index(std::max(pinned->applied_index(), index));
  pinned_ = std::move(pinned);
}

rocksdb::Status cluster_state::serialize_snapshot(std::vector<std::string>* chunks) {
  if (!pinned_)
    return rocksdb::Status::InvalidArgument("no snapshot pinned");
  chunks->push_back(pinned_->SerializeAsString());
  return rocksdb::Status::OK();
}

void cluster_state::end_snapshot() {
  pinned_.reset();
}

rocksdb::Status cluster_state::restore(std::string_view data, bool* replaced) {
  pb::ClusterState s;
  if (!s.ParseFromArray(data.data(), static_cast<int>(data.size())))
    return rocksdb::Status::Corruption("the cluster group's snapshot does not parse");
  *replaced = false;
  if (s.applied_index() <= applied_index())
    return rocksdb::Status::OK();
  if (auto why = above_release(s); !why.empty())
    return stop_applying(why);
  const uint64_t index = s.applied_index();
  std::vector<std::function<void(const state_ptr&)>> subs;
  state_ptr published;
  {
    std::lock_guard<std::mutex> g(mtx_);
    state_ = std::make_shared<pb::ClusterState>(std::move(s));
    published = state_;
    subs = subs_;
  }
  applied_.store(index, std::memory_order_release);
  *replaced = true;
  for (auto& fn : subs)
    fn(published);
  return rocksdb::Status::OK();
}

}  // namespace proctor
