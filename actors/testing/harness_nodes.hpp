// The nodes of one crash-harness run (crash_harness.hpp), in one actor system: each over its
// own directory and journal store, connected by a switchboard (switchboard.hpp) when there
// are several. A node whose store froze (the simulated crash) is torn down and started again
// from its directory alone, while the others go on, as a killed process on one machine would
// be restarted by its supervisor.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <proctor/wire.pb.h>

#include "actors/node/node.hpp"
#include "actors/testing/crash_boundary.hpp"
#include "actors/testing/switchboard.hpp"

namespace proctor::testing {

class harness_nodes {
public:
  /// Arms the store of node `index`'s `incarnation` (0 = its first start) before it starts.
  using arm_fn = std::function<void(size_t index, int incarnation, boundary_store&)>;

  /// `names`: {""} for one node without a name (in `dir` itself); otherwise each node in
  /// `dir`/NAME, the others its peers. Starts every node.
  harness_nodes(const registry& types, std::vector<std::string> names, const std::string& dir,
                size_t workers, std::shared_ptr<record_namer> namer, arm_fn arm);
  ~harness_nodes();
  harness_nodes(const harness_nodes&) = delete;
  harness_nodes& operator=(const harness_nodes&) = delete;

  size_t size() const { return members_.size(); }
  const std::string& name(size_t i) const { return members_[i].name; }

  /// Restarts every node whose store froze; returns how many.
  int restart_crashed();
  bool frozen(size_t i) const { return members_[i].store->frozen(); }

  /// Sends one request to node `i`; nullopt when no answer came within `timeout` (e.g. its
  /// journal froze).
  std::optional<pb::Response> call(size_t i, const pb::Request& req,
                                   std::chrono::milliseconds timeout);

  /// Writes that became durable, over every incarnation of every node.
  uint64_t writes() const;
  /// Events of each key made durable (their EventArrived records), over every incarnation.
  std::map<std::string, int> durable_events() const;
  /// Every record the nodes' current incarnations wrote, node by node, each in write order.
  std::vector<boundary> records() const;

private:
  struct member {
    std::string name;
    std::string dir;
    int incarnation = -1;
    std::unique_ptr<node> n;
    std::shared_ptr<boundary_store> store;
  };

  void start(member& m);
  void stop(member& m);

  const registry& types_;
  size_t workers_;
  std::shared_ptr<record_namer> namer_;
  arm_fn arm_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::shared_ptr<switchboard> sb_;
  caf::actor transport_;
  std::vector<member> members_;
  uint64_t past_writes_ = 0;                ///< of incarnations torn down
  std::map<std::string, int> past_events_;  ///< likewise
};

}  // namespace proctor::testing
