// The cluster group's own membership: the decision (next_group_change) and the leader's loop
// carrying it out (cluster_keeper).
#include "replication/cluster_keeper.hpp"

#include <algorithm>
#include <future>
#include <map>

#include <spdlog/spdlog.h>

#include "replication/cluster_group.hpp"

namespace proctor {

namespace {

using role_kind = raft_group::member_status::role_kind;

}  // namespace

size_t voters_wanted(size_t members) {
  if (members >= 5)
    return 5;
  if (members >= 3)
    return 3;
  return members == 0 ? 0 : 1;
}

std::optional<membership_change>
next_group_change(const pb::ClusterState& state,
                  const std::vector<raft_group::member_status>& config, uint64_t self,
                  bool trust_liveness) {
  // Before the founding the state says nothing of who belongs: nothing is changed (a group
  // bootstrapped with several members keeps them).
  if (state.cluster_id().empty())
    return std::nullopt;
  // Who belongs: by incarnation (the Raft id), in name order (members are sorted by name).
  std::map<uint64_t, const pb::ClusterMember*> wanted;
  std::vector<const pb::ClusterMember*> by_name;
  for (const auto& m : state.members())
    if (member_takes_part(m) && m.incarnation() != 0 && !m.group_address().empty()) {
      wanted[m.incarnation()] = &m;
      by_name.push_back(&m);
    }
  auto as_member = [](const pb::ClusterMember& m) {
    return raft_member{m.incarnation(), m.group_address(), m.name()};
  };
  auto change = [](membership_change::kind k, raft_member m) {
    membership_change c;
    c.what = k;
    c.member = std::move(m);
    c.catch_up_timeout = std::chrono::seconds(30);
    return c;
  };

  // 1. Who does not belong leaves (the leader itself cannot: it stays until another leads);
  // and so does a member the configuration has at another address than its node now says
  // (restarted with another --listen or --group-port): 2. brings it back, as a standby at its
  // new address, with the log it kept (the same Raft id, the same disk).
  for (const auto& c : config) {
    if (c.id == self)
      continue;
    auto w = wanted.find(c.id);
    if (w == wanted.end() || w->second->group_address() != c.address)
      return change(membership_change::kind::remove, raft_member{c.id, c.address, c.label});
  }

  // 2. Who belongs and is missing comes in as a standby.
  std::map<uint64_t, const raft_group::member_status*> in_config;
  for (const auto& c : config)
    in_config[c.id] = &c;
  for (const auto* m : by_name)
    if (in_config.count(m->incarnation()) == 0)
      return change(membership_change::kind::add_standby, as_member(*m));

  // 3. Voters: as many as the settled members (active or draining) want, good ones first. A
  // member's score: 0 active and heard, 1 draining and heard, 2 joining or unheard.
  auto score = [&](const raft_group::member_status& c) {
    auto it = wanted.find(c.id);
    if (it == wanted.end() || (trust_liveness && c.id != self && !c.recently_heard))
      return 2;
    switch (it->second->state()) {
      case pb::ACTIVE:
        return 0;
      case pb::DRAINING:
        return 1;
      default:
        return 2;
    }
  };
  size_t settled = 0;
  for (const auto& [id, m] : wanted)
    settled += m->state() == pb::ACTIVE || m->state() == pb::DRAINING ? 1 : 0;
  size_t voters = 0, good_voters = 0;
  for (const auto& c : config)
    if (c.role == role_kind::voter) {
      ++voters;
      good_voters += score(c) < 2 ? 1 : 0;
    }
  const size_t want = voters_wanted(settled);
  if (good_voters < want) {
    // Promoted first, so that the group never counts fewer good voters than it had.
    const pb::ClusterMember* best = nullptr;
    int best_score = 2;
    for (const auto* m : by_name) {
      const auto& c = *in_config[m->incarnation()];
      if (c.role != role_kind::voter && score(c) < best_score) {
        best = m;
        best_score = score(c);
      }
    }
    if (best != nullptr)
      return change(membership_change::kind::add, as_member(*best));
  }
  if (voters > want) {
    // The worst voter goes back to standby: the highest score, then the last by name; never
    // the leader.
    const raft_group::member_status* worst = nullptr;
    auto rank = [&](const raft_group::member_status& c) {
      return std::make_pair(score(c), c.label);
    };
    for (const auto& c : config)
      if (c.role == role_kind::voter && c.id != self
          && (worst == nullptr || rank(c) > rank(*worst)))
        worst = &c;
    if (worst != nullptr)
      return change(membership_change::kind::demote,
                    raft_member{worst->id, worst->address, worst->label});
  }
  return std::nullopt;
}

std::optional<pb::ClusterCommand>
next_activation(const pb::ClusterState& state, const std::vector<raft_group::member_status>& config,
                uint64_t last_index) {
  for (const auto& m : state.members()) {
    if (m.state() != pb::JOINING || m.group_address().empty())
      continue;
    for (const auto& c : config)
      if (c.id == m.incarnation() && c.match_index > 0
          && c.match_index + caught_up_entries >= last_index) {
        pb::ClusterCommand cmd;
        cmd.mutable_activate()->set_name(m.name());
        cmd.mutable_activate()->set_incarnation(m.incarnation());
        return cmd;
      }
  }
  return std::nullopt;
}

// -- cluster_keeper ---------------------------------------------------------------------------

cluster_keeper::cluster_keeper(cluster_group& group, std::chrono::milliseconds period)
    : group_(group), period_(period), wake_(std::make_shared<wake>()) {
  group_.subscribe([w = std::weak_ptr<wake>(wake_)](const cluster_state::state_ptr&) {
    if (auto s = w.lock()) {
      std::lock_guard<std::mutex> g(s->mtx);
      s->poked = true;
      s->cv.notify_all();
    }
  });
  thread_ = std::thread([this] { run(); });
}

cluster_keeper::~cluster_keeper() {
  {
    std::lock_guard<std::mutex> g(wake_->mtx);
    wake_->stop = true;
  }
  wake_->cv.notify_all();
  thread_.join();
}

void cluster_keeper::run() {
  using clock = std::chrono::steady_clock;
  auto& raft = group_.raft();
  clock::time_point leading_since{};
  bool leading = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> g(wake_->mtx);
      wake_->cv.wait_for(g, period_, [&] { return wake_->stop || wake_->poked; });
      if (wake_->stop)
        return;
      wake_->poked = false;
    }
    if (!raft.is_leader()) {
      leading = false;
      continue;
    }
    if (!leading) {
      leading = true;
      leading_since = clock::now();
    }
    const bool trust = clock::now() - leading_since >= liveness_grace;
    const uint64_t self = raft.id();
    auto next = next_group_change(*group_.state(), raft.members(), self, trust);
    if (!next) {
      if (auto activate = next_activation(*group_.state(), raft.members(), raft.commit_index())) {
        auto r = group_.propose(*activate);
        if (r.status.ok() && r.outcome.applied) {
          changes_.fetch_add(1);
          spdlog::info("cluster group: {}", r.outcome.text);
        } else {
          spdlog::warn("cluster group: activating {}: {}", activate->activate().name(),
                       r.status.ok() ? r.outcome.text : r.status.ToString());
        }
      }
      continue;
    }
    static constexpr const char* verbs[] = {"making a voter of", "removing", "adding as a standby",
                                            "demoting to a standby"};
    const auto* verb = verbs[static_cast<size_t>(next->what)];
    spdlog::info("cluster group: {} {} (#{}) at {}", verb, next->member.label, next->member.id,
                 next->member.address);
    const auto bound = next->catch_up_timeout + std::chrono::seconds(5);
    const auto deadline = clock::now() + bound;
    auto done = raft.change_membership(*next);
    // The future is always made ready (raft_group::change_membership); the bound is a second
    // guard, and a change still under way when it passes is found under way next time.
    bool ended = true;
    while (done.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
      std::lock_guard<std::mutex> g(wake_->mtx);
      if (wake_->stop)
        return;
      if (clock::now() >= deadline) {
        ended = false;
        break;
      }
    }
    if (!ended) {
      spdlog::warn("cluster group: {} {} did not end within {} s", verb, next->member.label,
                   std::chrono::duration_cast<std::chrono::seconds>(bound).count());
      continue;
    }
    auto out = done.get();
    if (out.status.ok())
      changes_.fetch_add(1);
    else
      spdlog::warn("cluster group: {} {}: {} ({})", verb, next->member.label, out.text,
                   out.status.ToString());
  }
}

}  // namespace proctor
