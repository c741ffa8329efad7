#include "actors/testing/switchboard.hpp"

#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/peer_status.hpp"
#include "actors/base/rpc.hpp"
#include "actors/cluster/outbox.hpp"

namespace proctor::testing {

caf::actor switchboard::executor(const std::string& name) {
  std::lock_guard<std::mutex> g(mtx);
  if (cut.count(name) > 0)
    return {};
  auto i = executors.find(name);
  return i == executors.end() ? caf::actor{} : i->second;
}

void switchboard::plug(const std::string& name, caf::actor executor) {
  std::lock_guard<std::mutex> g(mtx);
  cut.erase(name);
  executors[name] = std::move(executor);
}

void switchboard::unplug(const std::string& name) {
  std::lock_guard<std::mutex> g(mtx);
  cut.insert(name);
}

namespace {

/// Requests in flight, by the executor they went to: a node torn down fails them at once, as
/// a closed connection would, instead of leaving its peers to their reply timeout.
struct transport_state {
  uint64_t next = 0;
  std::map<uint64_t, std::pair<caf::actor_addr, caf::typed_response_promise<std::string>>> pending;
  std::set<caf::actor_addr> watched;
};

caf::behavior transport_fn(caf::stateful_actor<transport_state>* self,
                           std::shared_ptr<switchboard> sb) {
  self->set_down_handler([self](caf::down_msg& dm) {
    self->state.watched.erase(dm.source);
    for (auto i = self->state.pending.begin(); i != self->state.pending.end();)
      if (i->second.first == dm.source) {
        i->second.second.deliver(
          caf::make_error(caf::sec::request_receiver_down, "the node went down"));
        i = self->state.pending.erase(i);
      } else {
        ++i;
      }
  });
  return {
    [self, sb](peer_request_atom, const std::string& peer, const std::string& bytes,
               uint32_t) -> caf::result<std::string> {
      if (pb::Request req; req.ParseFromString(bytes) && req.has_tree())
        ++sb->tree_requests;
      auto e = sb->executor(peer);
      if (!e)
        return caf::make_error(caf::sec::request_receiver_down, "node " + peer + " unreachable");
      if (self->state.watched.insert(e.address()).second)
        self->monitor(e);
      auto token = self->state.next++;
      auto rp = self->make_response_promise<std::string>();
      self->state.pending.emplace(token, std::make_pair(e.address(), rp));
      spdlog::debug("transport: {} bytes to node {}", bytes.size(), peer);
      auto answer = [self, token](auto&& x) {
        auto i = self->state.pending.find(token);
        if (i == self->state.pending.end())
          return;  // its node went down: failed already
        auto p = std::move(i->second.second);
        self->state.pending.erase(i);
        p.deliver(std::forward<decltype(x)>(x));
      };
      self->request(e, std::chrono::seconds{30}, rpc_atom::value, bytes)
        .then([answer](std::string& r) { answer(std::move(r)); },
              [answer](caf::error& err) { answer(std::move(err)); });
      return rp;
    },
    // The in-process nodes have no links: no peer status to report, no incarnations to check.
    [](peer_subscribe_atom, const caf::actor&) {},
    [](peer_expect_atom, const std::map<std::string, uint64_t>&, const caf::actor&) {},
    [](peer_forget_atom, const std::string&, uint64_t) {},
    // A peer the cluster group names: reached by its name here, as every other.
    [](peer_add_atom, const std::string&, const std::string&) {},
  };
}

}  // namespace

caf::actor spawn_switchboard_transport(caf::actor_system& sys, std::shared_ptr<switchboard> sb) {
  return sys.spawn(transport_fn, std::move(sb));
}

}  // namespace proctor::testing
