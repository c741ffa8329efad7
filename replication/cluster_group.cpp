// The cluster group: opening this node's member, proposing commands and reading outcomes.
#include "replication/cluster_group.hpp"

#include <chrono>
#include <random>

namespace proctor {

std::unique_ptr<cluster_group> cluster_group::open(raft_store_options options, std::string* error,
                                                   uint32_t release_level) {
  if (options.write_timeout_ms == 0)
    options.write_timeout_ms = 5000;
  auto state = std::make_unique<cluster_state>(release_level);
  auto* sm = state.get();
  auto raft = open_raft_group(options, std::move(state), error);
  if (!raft)
    return nullptr;
  std::unique_ptr<cluster_group> g(new cluster_group());
  g->state_ = sm;
  g->raft_ = std::move(raft);
  return g;
}

cluster_group::result cluster_group::propose(pb::ClusterCommand command) {
  if (command.request_id() == 0) {
    thread_local std::mt19937_64 gen{std::random_device{}()};
    uint64_t id = 0;
    while (id == 0)
      id = gen();
    command.set_request_id(id);
  }
  if (command.proposed_ms() == 0)
    command.set_proposed_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count());
  result r;
  r.status = raft_->propose(encode_cluster_command(command));
  if (!r.status.ok())
    return r;
  auto out = state_->outcome(command.request_id());
  if (!out) {
    // Applied here (propose returned OK) but its outcome is gone: more than 4096 commands
    // applied since, which a blocked proposer cannot see in practice. Said, not guessed.
    r.status = rocksdb::Status::Incomplete("the cluster command applied, but its outcome is "
                                           "no longer known here");
    return r;
  }
  r.outcome = std::move(*out);
  r.state = state_->current();
  return r;
}

}  // namespace proctor
