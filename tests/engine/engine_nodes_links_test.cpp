// `tree` views of a wide tree spread over two in-process nodes joined by real peer links (TCP
// on 127.0.0.1, heartbeats and all, as between proctord processes): every view, at either
// node, about any procedure of the tree, while it runs and after it ended, is the whole tree,
// and the links never go down. (Issue 32: once the tree had ended, a view sent the nodes
// asking each other for the released fragments without end; past 1,024 requests in flight
// the node asked closed the connection with an untagged refusal, which the link took for an
// unreadable answer: the peer was "down", every request on the link failed.)
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/rpc.hpp"
#include "actors/cluster/peer_transport.hpp"
#include "actors/node/node.hpp"
#include "procedures/demo.hpp"

namespace proctor::testing {
namespace {

namespace fs = std::filesystem;

/// A TCP port on 127.0.0.1 nothing listens on (the kernel's pick, released at once).
uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

class node_links : public ::testing::Test {
protected:
  void SetUp() override {
    const char* lvl = std::getenv("PROCTOR_TEST_LOG");
    spdlog::set_level(lvl != nullptr ? spdlog::level::from_str(lvl) : spdlog::level::warn);
    char tmpl[] = "/tmp/proctor-links-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    fs::create_directories(dir_ + "/ledger");
    fs::create_directories(dir_ + "/gates");
    register_demo_procedures(types_);
    cfg_.load<caf::io::middleman>();
    tune_actor_system(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    std::map<std::string, uint16_t> ports{{"a", free_loopback_port()}, {"b", free_loopback_port()}};
    for (const auto& [name, port] : ports) {
      const std::string other = name == "a" ? "b" : "a";
      peer_transport_config pc;
      pc.self_name = name;
      pc.peers[other].endpoints = {peer_endpoint{"127.0.0.1", ports[other]}};
      transports_[name] = spawn_peer_transport(*sys_, pc);
      node_options o;
      o.data_dir = dir_ + "/" + name;
      o.workers = 2;
      o.name = name;
      o.peer_names = {other};
      o.transport = transports_[name];
      auto n = std::make_unique<node>(*sys_, types_);
      auto started = n->start(o);
      ASSERT_TRUE(started) << sys_->render(started.error());
      auto served = n->serve_clients("127.0.0.1", port);
      ASSERT_TRUE(served) << sys_->render(served.error());
      nodes_[name] = std::move(n);
    }
    ASSERT_TRUE(eventually([&] { return link("a").up && link("b").up; }));
  }

  void TearDown() override {
    for (auto& [name, n] : nodes_)
      n->stop();
    for (auto& [name, t] : transports_)
      caf::anon_send_exit(t, caf::exit_reason::user_shutdown);
    nodes_.clear();
    sys_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  /// How node `at`'s link sees the other node.
  peer_status link(const std::string& at) {
    caf::scoped_actor self{*sys_};
    peer_status out;
    self->request(transports_.at(at), std::chrono::seconds{5}, peer_status_atom::value)
      .receive(
        [&](std::vector<peer_status>& all) {
          if (!all.empty())
            out = all.front();
        },
        [](caf::error&) {});
    return out;
  }

  pb::Response call(const std::string& at, const pb::Request& req) {
    caf::scoped_actor self{*sys_};
    pb::Response resp;
    self
      ->request(nodes_.at(at)->executor(), std::chrono::seconds{30}, rpc_atom::value,
                req.SerializeAsString())
      .receive([&](const std::string& bytes) { EXPECT_TRUE(resp.ParseFromString(bytes)); },
               [&](caf::error& e) {
                 resp.set_code(pb::Response::INTERNAL);
                 resp.set_error(sys_->render(e));
               });
    return resp;
  }

  pb::Response tree(const std::string& at, uint64_t id) {
    pb::Request q;
    q.mutable_tree()->set_id(id);
    return call(at, q);
  }

  /// Procedures node `at` holds itself (any state).
  int held(const std::string& at) {
    pb::Request q;
    q.mutable_list()->set_all(true);
    q.mutable_list()->set_local(true);
    return call(at, q).list_size();
  }

  template <class Pred>
  bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds{30}) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (pred())
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    return pred();
  }

  std::string dir_;
  registry types_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::map<std::string, caf::actor> transports_;
  std::map<std::string, std::unique_ptr<node>> nodes_;
};

TEST_F(node_links, views_of_a_wide_tree_across_linked_nodes_are_whole_and_leave_the_links_up) {
  constexpr int children = 400;  // 200 on a, 200 on b
  constexpr int size = children + 1;
  const auto gates = dir_ + "/gates";
  std::ofstream(gates + "/step.0").put('\n');
  pb::Request sub;
  sub.mutable_submit()->set_type("demo.ledger");
  sub.mutable_submit()->set_args_json(R"({"ledger_dir":")" + dir_ + R"(/ledger","spread":true,)"
                                      + R"("steps":1,"depth":1,"children":)"
                                      + std::to_string(children) + R"(,"gate_dir":")" + gates
                                      + "\"}");
  auto submitted = call("a", sub);
  ASSERT_EQ(submitted.code(), pb::Response::OK) << submitted.error();
  const auto root = submitted.id();
  // The children end at once; the root waits at its gate step.1.
  pb::Response v;
  ASSERT_TRUE(eventually([&] {
    v = tree("a", root);
    int ended = 0;
    for (const auto& s : v.list())
      ended += s.state() == pb::SUCCESS ? 1 : 0;
    return v.list_size() == size && ended == children;
  }))
    << v.ShortDebugString().substr(0, 2000);
  uint64_t on_b = 0;
  for (const auto& s : v.list())
    if (s.node() == "b")
      on_b = s.id();
  ASSERT_NE(on_b, 0u);
  const auto a_sees = link("a"), b_sees = link("b");

  // Each view, at each node, about the root and about a child on b, is the whole tree.
  auto views = [&](const char* phase) {
    for (int round = 0; round < 5; ++round)
      for (const auto& at : {"a", "b"})
        for (auto about : {root, on_b}) {
          auto x = tree(at, about);
          ASSERT_EQ(x.code(), pb::Response::OK) << phase << " at " << at << ": " << x.error();
          ASSERT_EQ(x.list_size(), size) << phase << " at " << at << " about " << about;
          EXPECT_EQ(x.list(0).id(), root) << phase << " at " << at;
          EXPECT_EQ(x.unreachable_size(), 0) << phase << " at " << at << ": " << x.unreachable(0);
          int on_other = 0;
          for (const auto& s : x.list())
            on_other += s.node().empty() ? 0 : 1;
          // a holds the root and half the children; b the other half.
          EXPECT_EQ(on_other, std::string(at) == "a" ? children / 2 : children / 2 + 1)
            << phase << " at " << at;
        }
  };
  views("running");
  std::ofstream(gates + "/step.1").put('\n');
  pb::Request w;
  w.mutable_wait()->set_id(root);
  w.mutable_wait()->set_timeout_ms(30'000);
  ASSERT_EQ(call("a", w).status().state(), pb::SUCCESS);
  // b lets its fragments go once the tree has ended: a's placeholders stand for them.
  ASSERT_TRUE(eventually([&] { return held("b") == 0; })) << held("b") << " left on b";
  views("ended");

  // The links stayed up all along: no down, no answer they could not read.
  for (const auto& [at, before] : {std::pair{"a", a_sees}, std::pair{"b", b_sees}}) {
    auto now = link(at);
    EXPECT_TRUE(now.up) << at << ": " << now.reason;
    EXPECT_EQ(now.since_ms, before.since_ms) << at;
    EXPECT_EQ(now.downs, 0u) << at << ": " << now.reason;
    EXPECT_EQ(now.stray_answers, 0u) << at;
  }
}

}  // namespace
}  // namespace proctor::testing
