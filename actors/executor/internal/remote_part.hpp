// Internal: the executor's part in trees across nodes (executor_remote.cpp owns the routes and
// ends of children placed on other nodes; executor_forget.cpp the orphans of a forgotten node).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <caf/all.hpp>

namespace proctor::exec_detail {

struct remote_part {
  /// Fragments here whose parent's node an operator forgot, to roll back (node, id), one at
  /// a time; one not taken yet goes to the back, tried again after orphan_retry_atom.
  std::deque<std::pair<std::string, uint64_t>> orphans;
  bool orphan_in_flight = false;
  bool orphan_retry_armed = false;
  std::unordered_map<uint64_t, int> orphan_tries;  ///< not taken so far, by id
  /// Peers being forgotten as another node forgot them (their record on its way to the
  /// journal), and "name@incarnation" already said to be up here (logged once).
  std::unordered_set<std::string> forgetting;
  std::unordered_set<std::string> forget_deferred;
  /// The members the cluster group forgot (name -> incarnation, when), as it last said: each
  /// is forgotten here too once it is down here (executor_cluster.cpp, on_cluster_peers).
  std::unordered_map<std::string, std::pair<uint64_t, int64_t>> group_forgotten;
  /// Children placed on other nodes: who takes the messages about them (their placeholder,
  /// or the root rolling their tree back).
  std::unordered_map<uint64_t, caf::actor> routes;
  /// Of those, the children held passivated by their parent (the route is the parent): told
  /// to spawn the placeholder (wake_child_atom) rather than the messages themselves.
  std::unordered_set<uint64_t> via;
  /// Ends of such children journaled here (a serialized pb::RemoteEnd, and the time of the
  /// Finished record that journaled it), told again to whoever registers for the child
  /// later; forgotten when the tree ends.
  struct remote_end_note {
    std::string bytes;
    int64_t at_ms = 0;
  };
  std::unordered_map<uint64_t, remote_end_note> ends;
};

}  // namespace proctor::exec_detail
