// Trees across nodes, in one process: three nodes over their own data directories, their
// outboxes connected by a transport that hands each request to the named node's executor
// (and can cut a node off). The process tests (tests/cluster_process_test.cpp) do the same
// with real proctord processes, kills and stops.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/node.hpp"
#include "actors/outbox.hpp"
#include "actors/rpc.hpp"
#include "procedures/demo.hpp"
#include "wire.pb.h"

namespace proctor::testing {
namespace {

namespace fs = std::filesystem;

/// Routes (peer_request_atom, name, bytes, timeout) to the named node's executor.
struct switchboard {
  std::mutex mtx;
  std::map<std::string, caf::actor> executors;
  std::set<std::string> cut;  ///< nodes nobody reaches

  caf::actor executor(const std::string& name) {
    std::lock_guard<std::mutex> g(mtx);
    if (cut.count(name) > 0)
      return {};
    auto i = executors.find(name);
    return i == executors.end() ? caf::actor{} : i->second;
  }
};

caf::behavior transport_fn(caf::event_based_actor* self, std::shared_ptr<switchboard> sb) {
  return {
    [self, sb](peer_request_atom, const std::string& peer, const std::string& bytes,
               uint32_t) -> caf::result<std::string> {
      auto e = sb->executor(peer);
      if (!e)
        return caf::make_error(caf::sec::request_receiver_down, "node " + peer + " unreachable");
      auto rp = self->make_response_promise<std::string>();
      self->request(e, std::chrono::seconds{30}, rpc_atom::value, bytes)
        .then([rp](std::string& r) mutable { rp.deliver(std::move(r)); },
              [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return rp;
    },
  };
}

class nodes : public ::testing::Test {
protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    char tmpl[] = "/tmp/proctor-nodes-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    fs::create_directories(dir_ + "/ledger");
    register_demo_procedures(types_);
    tune_actor_system(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    sb_ = std::make_shared<switchboard>();
    transport_ = sys_->spawn(transport_fn, sb_);
    uint16_t number = 1;
    for (std::string name : {"a", "b", "c"}) {
      auto n = std::make_unique<node>(*sys_, types_);
      node_options o;
      o.data_dir = dir_ + "/" + name;
      o.workers = 2;
      o.name = name;
      o.number = number++;
      for (std::string p : {"a", "b", "c"})
        if (p != name)
          o.peer_names.push_back(p);
      o.transport = transport_;
      auto r = n->start(o);
      ASSERT_TRUE(r) << sys_->render(r.error());
      {
        std::lock_guard<std::mutex> g(sb_->mtx);
        sb_->executors[name] = n->executor();
      }
      nodes_[name] = std::move(n);
    }
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

  uint64_t submit(const std::string& at, const std::string& args) {
    pb::Request req;
    req.mutable_submit()->set_type("demo.ledger");
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

  /// Procedures the node holds (any state).
  size_t procs_on(const std::string& at) {
    pb::Request req;
    req.mutable_list()->set_all(true);
    return static_cast<size_t>(call(at, req).list_size());
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
    return R"({"ledger_dir":")" + dir_ + R"(/ledger","spread":true,"undo_log":true)" + extra
           + "}";
  }

  std::string dir_;
  registry types_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::shared_ptr<switchboard> sb_;
  caf::actor transport_;
  std::map<std::string, std::unique_ptr<node>> nodes_;
};

struct undo_line {
  std::string node;
  uint64_t id = 0, parent = 0;
  int step = 0;
};

std::vector<undo_line> read_undo_log(const std::string& path) {
  std::vector<undo_line> out;
  std::ifstream in(path);
  undo_line l;
  while (in >> l.node >> l.id >> l.parent >> l.step)
    out.push_back(l);
  return out;
}

TEST_F(nodes, a_tree_spread_over_three_nodes_succeeds_and_its_fragments_are_released) {
  auto id = submit("a", args(R"(,"steps":3,"children":6,"depth":1)"));
  EXPECT_EQ(id >> id_node_shift, 1u) << "ids carry the node number";
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(s.children_size(), 6);
  // Root: 3 steps; six children of 3 steps each, two on each node.
  EXPECT_EQ(ledger_files(), 3u + 6 * 3);
  // The fragments on b and c are released once the tree ended.
  EXPECT_TRUE(eventually([&] { return procs_on("b") == 0 && procs_on("c") == 0; }))
    << procs_on("b") << " on b, " << procs_on("c") << " on c";
}

TEST_F(nodes, a_failure_after_the_children_rolls_back_every_node_in_reverse_causal_order) {
  // Step 0 spawns the children (two per node), step 1 runs after they ended, step 2 fails.
  auto id = submit("a", args(R"(,"steps":4,"children":6,"depth":1,"fail_at":2)"));
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::ROLLEDBACK) << s.error();
  EXPECT_EQ(ledger_files(), 0u);
  auto log = read_undo_log(dir_ + "/ledger/undo.log");
  // Every child's undos come after the root's step 1 (which saw their ends) and before the
  // root's step 0 (which spawned them).
  size_t root1 = SIZE_MAX, root0 = SIZE_MAX;
  std::set<std::string> child_nodes;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].id == id && log[i].step == 1)
      root1 = i;
    if (log[i].id == id && log[i].step == 0)
      root0 = i;
  }
  ASSERT_NE(root1, SIZE_MAX);
  ASSERT_NE(root0, SIZE_MAX);
  size_t children = 0;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].parent != id)
      continue;
    ++children;
    child_nodes.insert(log[i].node);
    EXPECT_GT(i, root1) << "child " << log[i].id << " on " << log[i].node << " undone too early";
    EXPECT_LT(i, root0) << "child " << log[i].id << " on " << log[i].node << " undone too late";
  }
  EXPECT_EQ(children, 6u * 4);  // each child: 4 steps, each undone
  EXPECT_EQ(child_nodes, (std::set<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(eventually([&] { return procs_on("b") == 0 && procs_on("c") == 0; }));
}

TEST_F(nodes, an_unreachable_node_holds_the_tree_and_its_rollback_until_it_returns) {
  // Two levels across the nodes first: grandchildren spread again from b and c.
  auto id = submit("a", args(R"(,"steps":2,"children":3,"depth":2)"));
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(ledger_files(), 2u + 3 * 2 + 9 * 2);
  // Cut c off and abort a tree while its child placed on c cannot be delivered.
  {
    std::lock_guard<std::mutex> g(sb_->mtx);
    sb_->cut.insert("c");
  }
  auto id2 = submit("a", args(R"(,"steps":2,"children":3,"depth":1)"));
  // The child placed on c cannot be delivered: the tree waits for it.
  EXPECT_TRUE(eventually([&] {
    pb::Request req;
    req.mutable_status()->set_id(id2);
    auto r = call("a", req);
    return r.status().state() == pb::WAITING;
  }));
  pb::Request ab;
  ab.mutable_abort()->set_id(id2);
  EXPECT_EQ(call("a", ab).code(), pb::Response::OK);
  // The rollback needs c: it waits, saying so.
  EXPECT_TRUE(eventually([&] {
    pb::Request req;
    req.mutable_status()->set_id(id2);
    return call("a", req).status().waiting_for().find("node c") != std::string::npos;
  })) << "waiting for: " << [&] {
    pb::Request req;
    req.mutable_status()->set_id(id2);
    return call("a", req).status().waiting_for();
  }();
  {
    std::lock_guard<std::mutex> g(sb_->mtx);
    sb_->cut.erase("c");
  }
  caf::anon_send(nodes_.at("a")->outbox(), outbox_kick_atom::value, std::string{"c"});
  auto s2 = wait("a", id2);
  EXPECT_EQ(s2.state(), pb::ROLLEDBACK) << s2.error();
  EXPECT_EQ(ledger_files(), 2u + 3 * 2 + 9 * 2) << "the second tree left nothing";
  EXPECT_TRUE(eventually([&] { return procs_on("b") == 0 && procs_on("c") == 0; }));
}

TEST_F(nodes, a_node_restarted_mid_tree_carries_its_fragments_on) {
  auto id = submit("a", args(R"(,"steps":4,"children":9,"depth":1,"step_sleep_ms":20)"));
  ASSERT_TRUE(eventually([&] { return procs_on("b") >= 2; }));
  // b goes down (its actors stop at once; nothing is acknowledged that is not durable) and
  // comes back on its journal.
  {
    std::lock_guard<std::mutex> g(sb_->mtx);
    sb_->cut.insert("b");
  }
  nodes_.at("b")->stop();
  nodes_.erase("b");
  auto n = std::make_unique<node>(*sys_, types_);
  node_options o;
  o.data_dir = dir_ + "/b";
  o.workers = 2;
  o.name = "b";
  o.number = 2;
  o.peer_names = {"a", "c"};
  o.transport = transport_;
  // The old journal lets go of the directory's lock when its thread ends.
  caf::expected<recovery_report> r = caf::make_error(caf::sec::runtime_error);
  ASSERT_TRUE(eventually([&] {
    r = n->start(o);
    return static_cast<bool>(r);
  }, std::chrono::seconds{10})) << sys_->render(r.error());
  {
    std::lock_guard<std::mutex> g(sb_->mtx);
    sb_->executors["b"] = n->executor();
    sb_->cut.erase("b");
  }
  nodes_["b"] = std::move(n);
  for (auto& [name, x] : nodes_)
    caf::anon_send(x->outbox(), outbox_kick_atom::value, std::string{"b"});
  auto s = wait("a", id);
  ASSERT_EQ(s.state(), pb::SUCCESS) << s.error();
  EXPECT_EQ(ledger_files(), 4u + 9 * 4) << "no step lost or doubled";
  EXPECT_TRUE(eventually([&] { return procs_on("b") == 0 && procs_on("c") == 0; }));
}

} // namespace
} // namespace proctor::testing
