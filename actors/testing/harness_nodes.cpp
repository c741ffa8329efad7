#include "actors/testing/harness_nodes.hpp"

#include <filesystem>
#include <future>
#include <stdexcept>
#include <thread>

#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/testing/fault_store.hpp"

namespace proctor::testing {

harness_nodes::harness_nodes(const registry& types, std::vector<std::string> names,
                             const std::string& dir, size_t workers,
                             std::shared_ptr<record_namer> namer, arm_fn arm)
    : types_(types), workers_(workers), namer_(std::move(namer)), arm_(std::move(arm)) {
  tune_actor_system(cfg_);
  sys_ = std::make_unique<caf::actor_system>(cfg_);
  if (names.size() > 1) {
    sb_ = std::make_shared<switchboard>();
    transport_ = spawn_switchboard_transport(*sys_, sb_);
  }
  for (auto& name : names) {
    member m;
    m.dir = names.size() > 1 ? dir + "/" + name : dir;
    m.name = std::move(name);
    members_.push_back(std::move(m));
  }
  for (auto& m : members_)
    start(m);
}

harness_nodes::~harness_nodes() {
  for (auto& m : members_)
    if (m.n)
      m.n->stop();
  if (transport_)
    caf::anon_send_exit(transport_, caf::exit_reason::user_shutdown);
  members_.clear();
  sys_.reset();
}

void harness_nodes::start(member& m) {
  ++m.incarnation;
  node_options o;
  o.data_dir = m.dir;
  o.workers = workers_;
  o.recovery_part_procs = 1;  // the take-over interleaved with the scan at every tree
  o.on_journal_fatal = [](const std::string&) {};  // a frozen store is the simulated crash
  if (sb_) {
    o.name = m.name;
    for (const auto& p : members_)
      if (p.name != m.name)
        o.peer_names.push_back(p.name);
    o.transport = transport_;
    // A request in flight to a node torn down here is never answered (its executor's
    // promise goes with it; over TCP the closed connection would say so at once).
    o.peer_reply_timeout = std::chrono::milliseconds{1'000};
  }
  // The incarnation torn down just before lets go of its RocksDB when the last actor holding
  // its store ends: try again for a while.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  for (;;) {
    std::string err;
    std::shared_ptr<journal_store> inner = open_rocksdb_store(m.dir, &err);
    if (inner) {
      m.store = std::make_shared<boundary_store>(std::make_shared<fault_store>(std::move(inner)),
                                                 namer_, m.name);
      if (arm_)
        arm_(static_cast<size_t>(&m - members_.data()), m.incarnation, *m.store);
      o.store = m.store;
      m.n = std::make_unique<node>(*sys_, types_);
      auto started = m.n->start(o);
      if (started)
        break;
      err = error_text(*sys_, started.error());
      m.n.reset();
      m.store.reset();
    }
    if (std::chrono::steady_clock::now() > until)
      throw std::runtime_error("node " + (m.name.empty() ? m.dir : m.name)
                               + " did not start: " + err);
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  if (sb_) {
    sb_->plug(m.name, m.n->executor());
    // Its peers deliver what they hold for it at once, not at their next retry.
    for (auto& p : members_)
      if (p.n && &p != &m)
        caf::anon_send(p.n->outbox(), outbox_kick_atom::value, m.name);
  }
}

void harness_nodes::stop(member& m) {
  if (sb_)
    sb_->unplug(m.name);
  m.n->stop();
  m.n.reset();
  past_writes_ += m.store->writes();
  for (const auto& [key, n] : m.store->durable_events())
    past_events_[key] += n;
  m.store.reset();
}

int harness_nodes::restart_crashed() {
  int n = 0;
  for (auto& m : members_)
    if (m.store->frozen()) {
      stop(m);
      start(m);
      ++n;
    }
  return n;
}

std::optional<pb::Response> harness_nodes::call(size_t i, const pb::Request& req,
                                                std::chrono::milliseconds timeout) {
  // The request goes from an actor of its own, so that this thread can stop waiting as soon as
  // the node's store freezes: a crashed node answers nothing (its journal never acknowledges),
  // and waiting out the timeout at every crash made a matrix's runs take seconds each.
  using answer = std::optional<pb::Response>;
  auto got = std::make_shared<std::promise<answer>>();
  auto fut = got->get_future();
  auto caller = sys_->spawn([got, timeout, target = members_[i].n->executor(),
                             bytes = req.SerializeAsString()](caf::event_based_actor* self) {
    self->request(target, timeout, rpc_atom::value, bytes)
      .then(
        [got](const std::string& b) {
          pb::Response r;
          got->set_value(r.ParseFromString(b) ? answer{std::move(r)} : std::nullopt);
        },
        [got](caf::error&) { got->set_value(std::nullopt); });
  });
  // The actor always answers by the request's timeout; the slack is for a loaded machine.
  auto give_up = std::chrono::steady_clock::now() + timeout + std::chrono::seconds{5};
  while (fut.wait_for(std::chrono::milliseconds{5}) != std::future_status::ready) {
    if (frozen(i) || std::chrono::steady_clock::now() > give_up) {
      // The crash cut the answer. The caller goes now: the actor system's end waits for it.
      caf::anon_send_exit(caller, caf::exit_reason::kill);
      return std::nullopt;
    }
  }
  return fut.get();
}

uint64_t harness_nodes::writes() const {
  auto n = past_writes_;
  for (const auto& m : members_)
    n += m.store->writes();
  return n;
}

std::map<std::string, int> harness_nodes::durable_events() const {
  auto out = past_events_;
  for (const auto& m : members_)
    for (const auto& [key, n] : m.store->durable_events())
      out[key] += n;
  return out;
}

std::vector<boundary> harness_nodes::records() const {
  std::vector<boundary> out;
  for (const auto& m : members_) {
    auto r = m.store->seen();
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

}  // namespace proctor::testing
