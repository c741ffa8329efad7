// Nodes in one process, connected without sockets: a transport that hands each request for a
// peer to that node's executor, as its `--listen` address would. The crash harness runs a
// tree over several nodes on it (crash_harness.hpp); the engine's tests of trees across nodes
// too (tests/engine/engine_nodes_fixture.hpp).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include <caf/all.hpp>

namespace proctor::testing {

/// Where each node's executor is, and which nodes are cut off.
struct switchboard {
  std::mutex mtx;
  std::map<std::string, caf::actor> executors;
  std::set<std::string> cut;               ///< nodes nobody reaches
  std::atomic<uint64_t> tree_requests{0};  ///< `tree` requests between nodes (cut off too)

  /// The executor of `name`, or none while it is cut off or was never plugged in.
  caf::actor executor(const std::string& name);
  /// Makes `name` reachable at `executor` (again, after a restart).
  void plug(const std::string& name, caf::actor executor);
  /// Cuts `name` off: requests for it fail at once, as to a stopped process.
  void unplug(const std::string& name);
};

/// The transport actor of node_options::transport: (peer_request_atom, name, bytes,
/// timeout_ms) -> the named node's answer.
caf::actor spawn_switchboard_transport(caf::actor_system& sys, std::shared_ptr<switchboard> sb);

}  // namespace proctor::testing
