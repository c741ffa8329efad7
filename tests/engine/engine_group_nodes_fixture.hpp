// Three in-process nodes of a cluster group whose members the test holds and publishes, as
// the group would (tests of the nonce handoff: executor_handoff.cpp).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "actors/base/peer_status.hpp"
#include "actors/base/placement.hpp"
#include "tests/engine/engine_nodes_fixture.hpp"

namespace proctor::testing {

class group_nodes_fixture : public nodes_fixture {
protected:
  group_nodes_fixture() { group_member_ = true; }

  struct member_state {
    int state = pb::ACTIVE;
    uint64_t since_index = 0;  ///< the group's log index of its last change
  };

  /// Tells node `n` the members as `members_` holds them now (nothing if it is down).
  void publish(const std::string& n) {
    std::vector<cluster_peer> list;
    for (const auto& [name, m] : members_)
      list.push_back(
        cluster_peer{name, node_number_of(name), "", m.state, 1, wall_ms(), m.since_index});
    if (nodes_.count(n) > 0)
      caf::anon_send(nodes_.at(n)->executor(), cluster_peers_atom::value, list);
  }

  /// A demo.noop submit with `nonce` (placed by `key` when not empty) through node `at`.
  pb::Response submit_nonce(const std::string& at, const std::string& nonce, const std::string& key,
                            std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
    pb::Request req;
    auto* s = req.mutable_submit();
    s->set_type("demo.noop");
    s->set_args_json(R"({"steps":1})");
    s->set_nonce(nonce);
    s->set_key(key);
    return call(at, req, timeout);
  }

  /// The first of "<prefix>0", "<prefix>1", ... whose slot `owner` owns among `members`.
  static std::string key_owned_by(const std::vector<std::string>& members, const std::string& owner,
                                  const std::string& prefix) {
    const placement::table t(members);
    for (int i = 0;; ++i)
      if (auto k = prefix + std::to_string(i); t.owner_of(k) == owner)
        return k;
  }

  std::map<std::string, member_state> members_;
};

}  // namespace proctor::testing
