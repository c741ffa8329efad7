// Test support for trees across nodes, in one process: three nodes (a, b, c; numbered from
// their names, as real nodes are, so that each finds the others by the numbers in ids) over
// their own data directories, their outboxes connected by a transport that hands each
// request to the named node's executor (and can cut a node off, or restart it).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <caf/all.hpp>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/rpc.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/cluster/peer_link.hpp"
#include "actors/node/node.hpp"
#include "actors/node/node_identity.hpp"
#include "actors/testing/switchboard.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/journal_store.hpp"
#include "procedures/demo.hpp"
#include "tests/engine/engine_probe.hpp"

namespace proctor::testing {

namespace fs = std::filesystem;

class nodes_fixture : public ::testing::Test {
protected:
  void SetUp() override {
    // PROCTOR_TEST_LOG=debug (or info) shows the nodes' logs.
    const char* lvl = std::getenv("PROCTOR_TEST_LOG");
    spdlog::set_level(lvl != nullptr ? spdlog::level::from_str(lvl) : spdlog::level::warn);
    char tmpl[] = "/tmp/proctor-nodes-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    fs::create_directories(dir_ + "/ledger");
    register_demo_procedures(types_);
    register_probe(types_);
    tune_actor_system(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    sb_ = std::make_shared<switchboard>();
    transport_ = spawn_switchboard_transport(*sys_, sb_);
    for (std::string name : {"a", "b", "c"})
      start_node(name);
  }

  /// Starts node `name` on its data directory (again, after stop_node).
  void start_node(const std::string& name) {
    auto n = std::make_unique<node>(*sys_, types_);
    node_options o;
    o.data_dir = dir_ + "/" + name;
    o.workers = workers_;
    o.recovery_part_procs = 1;  // the take-over interleaved with the scan at every tree
    o.name = name;
    for (std::string p : {"a", "b", "c"})
      if (p != name && peerless_.count(name) == 0)
        o.peer_names.push_back(p);
    o.transport = transport_;
    // A request in flight to a node stopped here is never answered (its executor's promise
    // goes with it; over TCP the closed connection says so at once).
    o.peer_reply_timeout = std::chrono::milliseconds{1'000};
    if (passivate_after_)
      o.executor.passivate_after = *passivate_after_;
    std::shared_ptr<journal_store> store;
    if (open_store_) {
      // The test's store (a crash injected in it): a frozen store is the crash, not a fatal
      // error of the test's process.
      o.on_journal_fatal = [](const std::string&) {};
      // The node stopped just before lets go of its directory when its journal's thread ends.
      ASSERT_TRUE(
        eventually([&] { return static_cast<bool>(store = open_store_(name, o.data_dir)); },
                   std::chrono::seconds{10}))
        << "node " << name << ": its store did not open";
      o.store = store;
    }
    if (group_member_)  // as a node of the cluster group (the test publishes its members)
      o.cluster_member = sys_->spawn([]() -> caf::behavior {
        return {[](rpc_atom, const std::string&) { return std::string{}; }};
      });
    // A node stopped just before lets go of the directory's lock when its journal's thread
    // ends.
    caf::expected<recovery_report> r = caf::make_error(caf::sec::runtime_error);
    ASSERT_TRUE(eventually(
      [&] {
        r = n->start(o);
        return static_cast<bool>(r);
      },
      std::chrono::seconds{10}))
      << sys_->render(r.error());
    nodes_[name] = std::move(n);
    uncut(name);
  }

  /// Stops node `name` (cut off meanwhile): like a crash, nothing that was not durable is
  /// acknowledged, and the restart recovers from its journal.
  void stop_node(const std::string& name) {
    cut(name);
    nodes_.at(name)->stop();
    nodes_.erase(name);
  }

  /// Tells the other nodes that node `name` is up (or down), as its link would: the
  /// in-process nodes have none, so they know nothing of each other's state otherwise.
  void report(const std::string& name, bool up) {
    peer_status s;
    s.name = name;
    s.up = up;
    s.since_ms = wall_ms();
    s.number = node_number_of(name);
    if (!up)
      s.reason = "reported down by the test";
    for (auto& [n, x] : nodes_)
      if (n != name)
        caf::anon_send(x->executor(), peer_status_atom::value, s);
  }

  /// When set, each node started opens its journal store through it (name, data
  /// directory), nullptr while the directory is still held (tried again): tests inject
  /// crashes there.
  std::function<std::shared_ptr<journal_store>(const std::string&, const std::string&)> open_store_;

  void cut(const std::string& name) { sb_->unplug(name); }

  /// Makes `name` reachable again and asks every outbox to deliver to it at once.
  void uncut(const std::string& name) {
    if (nodes_.count(name) > 0)
      sb_->plug(name, nodes_.at(name)->executor());
    else {
      std::lock_guard<std::mutex> g(sb_->mtx);
      sb_->cut.erase(name);
    }
    for (auto& [n, x] : nodes_)
      caf::anon_send(x->outbox(), outbox_kick_atom::value, name);
  }

  void TearDown() override {
    for (auto& [name, n] : nodes_)
      n->stop();
    caf::anon_send_exit(transport_, caf::exit_reason::user_shutdown);
    nodes_.clear();
    sys_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  pb::Response call(const std::string& at, const pb::Request& req,
                    std::chrono::milliseconds timeout = std::chrono::seconds{30}) {
    caf::scoped_actor self{*sys_};
    pb::Response resp;
    self->request(nodes_.at(at)->executor(), timeout, rpc_atom::value, req.SerializeAsString())
      .receive([&](const std::string& bytes) { EXPECT_TRUE(resp.ParseFromString(bytes)); },
               [&](caf::error& e) {
                 resp.set_code(pb::Response::INTERNAL);
                 resp.set_error(sys_->render(e));
               });
    return resp;
  }

  uint64_t submit(const std::string& at, const std::string& args,
                  const std::string& type = "demo.ledger") {
    pb::Request req;
    req.mutable_submit()->set_type(type);
    req.mutable_submit()->set_args_json(args);
    auto r = call(at, req);
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    return r.id();
  }

  pb::ProcStatus wait(const std::string& at, uint64_t id) {
    pb::Request req;
    req.mutable_wait()->set_id(id);
    req.mutable_wait()->set_timeout_ms(30'000);
    auto r = call(at, req, std::chrono::seconds{40});
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    return r.status();
  }

  /// Procedures the node holds itself (any state): a list not asked of its peers.
  size_t procs_on(const std::string& at) {
    pb::Request req;
    req.mutable_list()->set_all(true);
    req.mutable_list()->set_local(true);
    return static_cast<size_t>(call(at, req).list_size());
  }

  /// Fragments (roots of trees whose parent runs on another node) the node holds itself.
  size_t fragments_on(const std::string& at) {
    pb::Request req;
    req.mutable_list()->set_all(true);
    req.mutable_list()->set_local(true);
    size_t n = 0;
    auto r = call(at, req);
    for (const auto& p : r.list())
      n += p.id() == p.root_id() && p.parent_id() != 0 ? 1 : 0;
    return n;
  }

  size_t ledger_files() {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_ + "/ledger"))
      n += e.path().filename() == "undo.log" ? 0 : 1;
    return n;
  }

  template <class Pred>
  bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds{20}) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (pred())
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
    return pred();
  }

  std::string args(const std::string& extra) {
    return R"({"ledger_dir":")" + dir_ + R"(/ledger","spread":true,"undo_log":true)" + extra + "}";
  }

  std::string dir_;
  /// The nodes' passivate_after (set before SetUp: in a derived fixture's constructor).
  std::optional<std::chrono::milliseconds> passivate_after_;
  size_t workers_ = 2;         ///< the nodes' run slots (likewise)
  bool group_member_ = false;  ///< the nodes take part in a cluster group (likewise)
  /// Nodes started knowing no peer (as one that learns them from the cluster group only).
  std::set<std::string> peerless_;
  registry types_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::shared_ptr<switchboard> sb_;
  caf::actor transport_;
  std::map<std::string, std::unique_ptr<node>> nodes_;
};

}  // namespace proctor::testing
