// Test support: a node in the test's own process over a temporary data directory, with a
// client that speaks the wire protocol to its executor. Used by the actors/ tests.
#pragma once

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <proctor/journal.pb.h>
#include <proctor/wire.pb.h>

#include "actors/base/rpc.hpp"
#include "actors/node/node.hpp"
#include "actors/testing/fault_store.hpp"
#include "persistence/rocksdb_store.hpp"
#include "procedures/demo.hpp"
#include "tests/support/test_seed.hpp"

namespace proctor::testing {

/// A journal_store that records the order of step commits and undos it is asked to write.
class recording_store : public forwarding_store {
public:
  struct step_rec {
    uint64_t root = 0, lsn = 0, proc = 0;
    int32_t state = 0;
  };

  explicit recording_store(std::shared_ptr<journal_store> inner)
      : forwarding_store(std::move(inner)) {}

  rocksdb::Status write(const std::vector<store_op>& ops) override {
    auto st = forwarding_store::write(ops);
    if (!st.ok())
      return st;
    std::lock_guard<std::mutex> g(mtx_);
    for (const auto& op : ops) {
      if (op.what != store_op::kind::put)
        continue;
      pb::JournalRecord r;
      if (!r.ParseFromString(op.value))
        continue;
      if (r.has_step())
        steps_.push_back({op.root_id, op.lsn, r.step().proc_id(), r.step().executed_state()});
      else if (r.has_undone() && r.undone().undone_lsn() != 0)
        undone_.push_back(r.undone().undone_lsn());
    }
    return st;
  }

  std::vector<step_rec> steps(uint64_t root) const {
    std::lock_guard<std::mutex> g(mtx_);
    std::vector<step_rec> out;
    for (const auto& s : steps_)
      if (s.root == root)
        out.push_back(s);
    return out;
  }
  std::vector<uint64_t> undone() const {
    std::lock_guard<std::mutex> g(mtx_);
    return undone_;
  }

private:
  mutable std::mutex mtx_;
  std::vector<step_rec> steps_;
  std::vector<uint64_t> undone_;
};

class engine : public ::testing::Test {
protected:
  void SetUp() override {
    // PROCTOR_TEST_LOG=debug (or info) shows the node's logs.
    const char* lvl = std::getenv("PROCTOR_TEST_LOG");
    spdlog::set_level(lvl != nullptr ? spdlog::level::from_str(lvl) : spdlog::level::warn);
    char tmpl[] = "/tmp/proctor-engine-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/ledger");
    register_demo_procedures(types_);
  }

  void TearDown() override {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  /// Starts a node on the test's data directory; `tweak` adjusts the options.
  void start(const std::function<void(node_options&)>& tweak = {}) {
    cfg_ = std::make_unique<caf::actor_system_config>();
    tune_actor_system(*cfg_);
    if (middleman_)
      cfg_->load<caf::io::middleman>();
    sys_ = std::make_unique<caf::actor_system>(*cfg_);
    node_ = std::make_unique<node>(*sys_, types_);
    node_options o;
    o.data_dir = dir_ + "/data";
    o.workers = 4;
    o.recovery_part_procs = 1;  // the take-over interleaved with the scan at every tree
    o.on_procedure_start = [this](uint64_t id) {
      std::lock_guard<std::mutex> g(starts_mtx_);
      ++starts_[id];
    };
    if (tweak)
      tweak(o);
    auto r = node_->start(o);
    ASSERT_TRUE(r) << sys_->render(r.error());
  }

  void stop() {
    if (node_)
      node_->stop();
    node_.reset();
    sys_.reset();
  }

  void restart(const std::function<void(node_options&)>& tweak = {}) {
    stop();
    start(tweak);
  }

  pb::Response call(const pb::Request& req,
                    std::chrono::milliseconds timeout = std::chrono::seconds{30}) {
    caf::scoped_actor self{*sys_};
    pb::Response resp;
    self->request(node_->executor(), timeout, rpc_atom::value, req.SerializeAsString())
      .receive([&](const std::string& bytes) { EXPECT_TRUE(resp.ParseFromString(bytes)); },
               [&](caf::error& e) {
                 resp.set_code(pb::Response::INTERNAL);
                 resp.set_error("request failed: " + sys_->render(e));
               });
    return resp;
  }

  uint64_t submit(const std::string& type, const std::string& args, const std::string& nonce = {},
                  int32_t priority = 0) {
    pb::Request req;
    auto* s = req.mutable_submit();
    s->set_type(type);
    s->set_args_json(args);
    s->set_nonce(nonce);
    s->set_priority(priority);
    auto r = call(req);
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    return r.id();
  }

  pb::ProcStatus wait(uint64_t id, std::chrono::milliseconds timeout = std::chrono::seconds{30}) {
    pb::Request req;
    req.mutable_wait()->set_id(id);
    req.mutable_wait()->set_timeout_ms(static_cast<uint64_t>(timeout.count()));
    auto r = call(req, timeout + std::chrono::seconds{5});
    EXPECT_EQ(r.code(), pb::Response::OK) << "wait " << id << ": " << r.error();
    return r.status();
  }

  pb::ProcStatus status(uint64_t id) {
    pb::Request req;
    req.mutable_status()->set_id(id);
    return call(req).status();
  }

  /// Every procedure of the tree under `root` (itself included), as `status` names children.
  std::set<uint64_t> tree_ids(uint64_t root) {
    std::set<uint64_t> ids;
    std::vector<uint64_t> todo{root};
    while (!todo.empty()) {
      auto id = todo.back();
      todo.pop_back();
      ids.insert(id);
      auto st = status(id);  // not a temporary's member in the range-for
      for (auto c : st.children())
        todo.push_back(c);
    }
    return ids;
  }

  /// Polls (without sleeping longer than needed) until `pred` holds or `timeout` passes.
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

  /// A sample of the node's metrics (Prometheus text) by name; -1, and a failure, if absent.
  double metric(const std::string& name) {
    pb::Request req;
    req.mutable_metrics();
    auto text = call(req).text();
    auto at = text.find("\n" + name + " ");
    EXPECT_NE(at, std::string::npos) << name << " not in:\n" << text;
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }

  pb::Response event(const std::string& key, const std::string& payload,
                     const std::string& event_id = {}) {
    pb::Request req;
    req.mutable_event()->set_key(key);
    req.mutable_event()->set_payload_json(payload);
    req.mutable_event()->set_event_id(event_id);
    return call(req);
  }

  int starts(uint64_t id) {
    std::lock_guard<std::mutex> g(starts_mtx_);
    return starts_[id];
  }

  size_t ledger_files(const std::string& sub = "ledger") {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_ + "/" + sub))
      ++n;
    return n;
  }

  std::string dir_;
  bool middleman_ = false;  ///< load CAF's middleman (serve_clients)
  registry types_;
  std::unique_ptr<caf::actor_system_config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<node> node_;
  std::mutex starts_mtx_;
  std::map<uint64_t, int> starts_;
};

}  // namespace proctor::testing
