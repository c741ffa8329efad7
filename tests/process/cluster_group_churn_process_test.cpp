// A cluster group that changes under load, with real proctord processes
// (docs/cluster-group.md, "Tested"): while a client thread submits with nonces over HTTP
// through random nodes (sending some nonces again, and again through another node when a
// submit is refused or unanswered), and the test submits trees spread over the nodes with
// the CLI, a cluster founded on one node grows to five (the group's leader SIGKILLed while d
// joins, e SIGKILLed while it joins and started again) and shrinks back to two: e SIGKILLed,
// d drained while e holds up the handoff (e still a member), e forgotten mid-handoff, d and c
// removed. Then: no nonce ever answered two ids (but those of roots on e: lost with it, as
// documented), every nonce answers its first id again through the two nodes left, every
// acknowledged root not on e ended SUCCESS, and every spread tree's ledgers are whole.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/process/cluster_group_fixture.hpp"

namespace proctor::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using google::protobuf::Value;

constexpr const char* token = "churn-t0ken";
constexpr size_t max_nonces = 800;  ///< new nonces the client sends at most; then only again

class cluster_group_churn : public cluster_group_fixture {
protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    members_.reserve(5);
    for (size_t i = 0; i < 5; ++i)
      http_[i] = free_port();
  }

  void TearDown() override { stop_client(); }

  /// Adds node i (named `name`) with its HTTP port and `extra`.
  member& add_node(size_t i, const std::string& name, std::vector<std::string> extra) {
    extra.insert(extra.end(),
                 {"--http", "127.0.0.1:" + std::to_string(http_[i]), "--http-token", token});
    return add(name, std::move(extra));
  }

  /// The client thread may send to node i (or not).
  void serve(size_t i, bool on) {
    std::lock_guard<std::mutex> l(mtx_);
    if (on)
      live_.insert(i);
    else
      live_.erase(i);
  }

  /// One submit of nonce `n` over HTTP to a random live node: its id, or 0 if refused or
  /// unanswered (to be sent again; `why` says which, as a kind: digits as '#').
  uint64_t http_submit(const std::string& n, std::mt19937& rng, std::string* why = nullptr) {
    size_t at = 0;
    {
      std::lock_guard<std::mutex> l(mtx_);
      if (live_.empty())
        return 0;
      auto k = std::uniform_int_distribution<size_t>(0, live_.size() - 1)(rng);
      at = *std::next(live_.begin(), static_cast<std::ptrdiff_t>(k));
    }
    httplib::Client c("127.0.0.1", http_[at]);
    c.set_connection_timeout(2, 0);
    c.set_read_timeout(35, 0);
    auto r = c.Post("/api/procs", {{"Authorization", std::string("Bearer ") + token}},
                    R"({"type":"demo.noop","args":{"steps":1},"nonce":")" + n + R"("})",
                    "application/json");
    auto v = r ? parse_json(r->body) : std::nullopt;
    if (!r || r->status != 200 || !v) {
      if (why != nullptr)
        *why = !r ? "no answer (" + httplib::to_string(r.error()) + ")"
                  : std::to_string(r->status) + " "
                      + (v ? kind(field(*v, "error").string_value()) : r->body);
      return 0;
    }
    return static_cast<uint64_t>(field(*v, "id").number_value());
  }

  /// An error's kind: its first words, digits as '#'.
  static std::string kind(const std::string& error) {
    std::string out;
    for (size_t i = 0; i < error.size() && out.size() < 64; ++i) {
      if (std::isdigit(static_cast<unsigned char>(error[i])) == 0)
        out += error[i];
      else if (out.empty() || out.back() != '#')
        out += '#';
    }
    return out;
  }

  /// The client thread: new nonces, and every fourth send one acknowledged before again.
  void client() {
    std::mt19937 rng(seed_ + 1);
    std::vector<std::string> pending;
    size_t next = 0;
    while (!stop_) {
      std::string n;
      bool again = false;
      {
        std::lock_guard<std::mutex> l(mtx_);
        if (!pending.empty()) {
          n = pending.back();
        } else if (!acked_.empty() && (next >= max_nonces || rng() % 4 == 0)) {
          auto it = std::next(acked_.begin(), static_cast<std::ptrdiff_t>(rng() % acked_.size()));
          n = it->first;
          again = true;
        } else {
          n = "churn-" + std::to_string(next++);
          pending.push_back(n);
        }
      }
      std::string why;
      const auto id = http_submit(n, rng, &why);
      std::this_thread::sleep_for(10ms);  // a steady client, not a flood: its pace
      std::lock_guard<std::mutex> l(mtx_);
      if (id == 0) {
        ++unanswered_;
        ++refusals_[why];
        continue;  // sent again, maybe to another node
      }
      if (!again)
        pending.pop_back();
      auto [it, first] = acked_.emplace(n, id);
      if (!first && it->second != id && !lost(it->second))
        twice_.push_back("nonce " + n + " answered " + std::to_string(it->second) + " and then "
                         + std::to_string(id));
    }
    // What is unanswered is sent until it is answered (bounded: the test's nodes are up).
    for (const auto& n : pending)
      for (int tries = 0; tries < 200; ++tries)
        if (auto id = http_submit(n, rng); id != 0) {
          std::lock_guard<std::mutex> l(mtx_);
          acked_.emplace(n, id);
          break;
        }
  }

  void start_client() {
    client_ = std::thread([this] { client(); });
  }
  void stop_client() {
    stop_ = true;
    if (client_.joinable())
      client_.join();
  }

  /// Whether root `id` was on the forgotten node (its nonce is lost with it).
  bool lost(uint64_t id) const { return lost_number_ != 0 && (id >> 40) == lost_number_; }

  /// A tree of 1 + 3 procedures spread over the nodes, submitted on node i: its root's id.
  uint64_t spread_tree(size_t i) {
    auto r = members_[i].proc->ctl({"submit", "demo.ledger", "--args-json",
                                    R"({"ledger_dir":")" + (dir_.path() / "ledger").string()
                                      + R"(","spread":true,"steps":2,"children":3,"depth":1})"},
                                   30s);
    EXPECT_EQ(r.exit_code, 0) << describe(r) << node_logs();
    auto id = parse_id(r.out).value_or(0);
    if (id != 0) {
      trees_.emplace_back(i, id);
      ++trees_total_;
    }
    return id;
  }

  /// The final state of `id`, asked through node i.
  std::string final_state(size_t i, uint64_t id) {
    auto r = members_[i].proc->ctl({"wait", std::to_string(id), "--timeout-s", "60"}, 90s);
    auto v = parse_json(r.out);
    return v ? state_of(*v) : "(" + describe(r) + ")";
  }

  /// Every spread tree submitted since the last call ends SUCCESS (asked of the node it
  /// was submitted to, which holds its root: another may not have linked to it again yet).
  void trees_succeed() {
    for (auto [at, id] : trees_)
      EXPECT_EQ(final_state(at, id), "SUCCESS") << "tree " << id << "\n" << node_logs();
    trees_.clear();
  }

  /// Node i's number, as the cluster lists it.
  uint64_t number_of(size_t i) {
    auto r = members_[0].proc->ctl({"cluster", "nodes", "--json"}, 15s);
    auto v = parse_json(r.out);
    if (v)
      for (const auto& m : field(*v, "members").list_value().values())
        if (field(m, "name").string_value() == members_[i].name)
          return static_cast<uint64_t>(field(m, "number").number_value());
    return 0;
  }

  /// The group's leader's index, as node i says (nullopt: none known).
  std::optional<size_t> leader(size_t i) {
    auto r = members_[i].proc->ctl({"cluster", "nodes", "--json"}, 15s);
    auto v = parse_json(r.out);
    if (!v)
      return std::nullopt;
    auto name = field(*v, "leader").string_value();
    for (size_t k = 0; k < members_.size(); ++k)
      if (members_[k].name == name)
        return k;
    return std::nullopt;
  }

  /// The nodes' logs' last lines but the console's line per HTTP request (the client's
  /// submits would fill them).
  /// The nodes' last log lines, without the HTTP API's line for each submit.
  std::string node_logs() { return logs(40, "console: POST /api/procs"); }

  std::map<size_t, uint16_t> http_;
  std::mutex mtx_;
  std::set<size_t> live_;                   // mtx_
  std::map<std::string, uint64_t> acked_;   // mtx_: nonce -> its first id
  std::vector<std::string> twice_;          // mtx_
  size_t unanswered_ = 0;                   // mtx_
  std::map<std::string, size_t> refusals_;  // mtx_: how many of each kind
  std::atomic<uint64_t> lost_number_{0};
  std::atomic<bool> stop_{false};
  std::thread client_;
  std::vector<std::pair<size_t, uint64_t>> trees_;  ///< (node asked, root) not yet seen ended
  size_t trees_total_ = 0;
  unsigned seed_ = 0;
  std::mt19937 rng_;
};

TEST_F(cluster_group_churn, five_nodes_grow_and_shrink_under_load_and_nothing_runs_twice) {
  fs::create_directories(dir_.path() / "ledger");
  add_node(0, "a", {"--cluster-init"});
  ASSERT_TRUE(members_[0].proc->start()) << node_logs();
  ASSERT_TRUE(all_see({{"a", "active"}})) << node_logs();
  serve(0, true);
  start_client();

  // b and c join (c through b); trees spread over the three.
  add_node(1, "b", {"--seeds", seed_of(0)});
  ASSERT_TRUE(members_[1].proc->start()) << node_logs();
  serve(1, true);
  add_node(2, "c", {"--seeds", seed_of(1)});
  ASSERT_TRUE(members_[2].proc->start()) << node_logs();
  serve(2, true);
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "active"}, {"c", "active"}})) << node_logs();
  spread_tree(1);

  // d joins while the group's leader is SIGKILLed: another leads, d's join goes on, and the
  // old leader comes back.
  std::optional<size_t> old_leader;
  ASSERT_TRUE(eventually([&] { return (old_leader = leader(0)).has_value(); }, 20s, 100ms))
    << node_logs();
  add_node(3, "d", {"--seeds", seed_of(*old_leader == 2 ? 1 : 2)});
  // (Launched from this thread: a node's process dies with the thread that started it.)
  ASSERT_TRUE(members_[3].proc->launch()) << node_logs();
  eventually([&] { return !states_seen_by(*old_leader == 0 ? 1 : 0)["d"].empty(); }, 20s, 20ms);
  serve(*old_leader, false);
  members_[*old_leader].proc->kill();
  ASSERT_TRUE(members_[3].proc->wait_ready()) << "d did not come up while the leader was killed\n"
                                              << node_logs();
  serve(3, true);
  ASSERT_TRUE(members_[*old_leader].proc->start()) << node_logs();
  serve(*old_leader, true);
  ASSERT_TRUE(all_see({{"a", "active"}, {"b", "active"}, {"c", "active"}, {"d", "active"}}, 60s))
    << seen() << node_logs();

  // e joins, is SIGKILLed in the middle of it (once a member lists it) and started again on
  // what it wrote: five; a tree over all of them. (Started again, e took itself for a node
  // alone until the group spoke, and answered nonces the others had answered with roots of
  // its own: executor_handoff.cpp, handoff_refusal.)
  add_node(4, "e", {"--seeds", seed_of(3)});
  ASSERT_TRUE(members_[4].proc->launch()) << node_logs();
  eventually([&] { return !states_seen_by(0)["e"].empty(); }, 20s, 20ms);
  members_[4].proc->kill();
  ASSERT_TRUE(members_[4].proc->start()) << node_logs();
  serve(4, true);
  const std::map<std::string, std::string> five{
    {"a", "active"}, {"b", "active"}, {"c", "active"}, {"d", "active"}, {"e", "active"}};
  ASSERT_TRUE(all_see(five)) << seen() << node_logs();
  spread_tree(4);
  trees_succeed();  // before e is lost: their children on e ended
  const auto e_number = number_of(4);
  ASSERT_NE(e_number, 0u) << node_logs();

  // e SIGKILLed; d drained while e, still a member, holds up the handoff of the slots that
  // move; e forgotten mid-handoff; the slots move on without it.
  serve(4, false);
  members_[4].proc->kill();
  lost_number_ = e_number;
  auto drain = members_[0].proc->ctl({"node", "drain", "d"}, 30s);
  ASSERT_EQ(drain.exit_code, 0) << describe(drain) << node_logs();
  serve(3, false);
  auto forget = members_[1].proc->ctl({"node", "forget", "e", "--confirm-lost"}, 30s);
  ASSERT_EQ(forget.exit_code, 0) << describe(forget) << node_logs();
  ASSERT_TRUE(all_see(
    {{"a", "active"}, {"b", "active"}, {"c", "active"}, {"d", "draining"}, {"e", "forgotten"}},
    60s))
    << seen() << node_logs();
  auto removed = ctl_until_ok(0, {"node", "remove", "d"}, 60s);
  ASSERT_EQ(removed.exit_code, 0) << describe(removed) << node_logs();
  spread_tree(2);

  // c drained and removed: two are left.
  auto drain_c = members_[1].proc->ctl({"node", "drain", "c"}, 30s);
  ASSERT_EQ(drain_c.exit_code, 0) << describe(drain_c) << node_logs();
  serve(2, false);
  trees_succeed();
  auto removed_c = ctl_until_ok(0, {"node", "remove", "c"}, 60s);
  ASSERT_EQ(removed_c.exit_code, 0) << describe(removed_c) << node_logs();
  // (What a and b list: a node that left hears the group no more.)
  const std::map<std::string, std::string> two{
    {"a", "active"}, {"b", "active"}, {"c", "left"}, {"d", "left"}, {"e", "forgotten"}};
  EXPECT_TRUE(
    eventually([&] { return states_seen_by(0) == two && states_seen_by(1) == two; }, 30s, 200ms))
    << seen() << node_logs();
  std::this_thread::sleep_for(1s);  // the client goes on against the two for a moment
  stop_client();

  // The client thread has ended: what it recorded is read without its lock.
  std::cout << "[ churn    ] " << acked_.size() << " nonces acknowledged, " << unanswered_
            << " sends refused or unanswered (sent again), " << trees_total_ << " spread trees\n";
  std::vector<std::pair<size_t, std::string>> kinds;
  for (const auto& [why, n] : refusals_)
    kinds.emplace_back(n, why);
  std::sort(kinds.rbegin(), kinds.rend());
  for (const auto& [n, why] : kinds)
    std::cout << "[ churn    ]   " << n << " x " << why << "\n";
  EXPECT_TRUE(twice_.empty()) << twice_.size()
                              << " nonce(s) answered two ids, first: " << twice_.front()
                              << "\nseed " << seed_ << "\n"
                              << node_logs();
  ASSERT_GE(acked_.size(), 20u) << "the client got few answers (" << unanswered_
                                << " refused or unanswered)\n"
                                << node_logs();
  // Every nonce answers its first id again through the two left (none on e: lost with it),
  // and every root it started ended SUCCESS.
  std::mt19937 rng(seed_ + 2);
  size_t checked = 0;
  for (const auto& [n, id] : acked_) {
    if (lost(id))
      continue;
    uint64_t again = 0;
    const std::string& nonce = n;  // (clang-tidy 14 cannot capture a structured binding)
    eventually([&] { return (again = http_submit(nonce, rng)) != 0; }, 20s, 100ms);
    EXPECT_EQ(again, id) << "nonce " << n << " answers another id: it ran twice\nseed " << seed_;
    ++checked;
  }
  EXPECT_GT(checked, 0u);
  // Every root of a nonce ended SUCCESS (demo.noop: nothing else could end it).
  std::map<uint64_t, std::string> states;
  for (size_t i = 0; i < 4; ++i) {  // a and b, and c and d, which left and still run
    auto all = members_[i].proc->ctl({"list", "--local", "--json"}, 60s);
    auto listed = parse_json(all.out);
    ASSERT_TRUE(listed) << describe(all);
    for (const auto& p : listed->list_value().values())
      states[id_of(p)] = state_of(p);
  }
  for (const auto& [n, id] : acked_) {
    if (!lost(id)) {
      EXPECT_EQ(states[id], "SUCCESS") << "root " << id << " of nonce " << n << "\n" << node_logs();
    }
  }
  // Every spread tree's ledgers: 4 procedures of 2 steps, each step one file (demo.ledger)
  // with one line per run of the step: no node died under a tree, so each ran once.
  EXPECT_EQ(count_files(dir_.path() / "ledger"), 8 * trees_total_) << node_logs();
  for (const auto& f : file_names(dir_.path() / "ledger")) {
    auto text = read_file(dir_.path() / "ledger" / f);
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << f << ":\n" << text;
  }
}

}  // namespace
}  // namespace proctor::test
