// Test support: the probe procedure and the world it acts on. A probe's data lists what each
// of its steps does (commit, end, fail, crash once, spawn children, wait for an event), how
// long it takes and whether it waits at a gate the test opens, so a test can build any tree
// and any interleaving of sibling steps, failures, stops and aborts on purpose. Every step
// and every undo is recorded in the world, which the test checks afterwards: each state that
// started is undone exactly once by a rollback, no state that never started is undone, and
// each undo sees the data its contract promises.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/util/json_util.h>

#include <proctor/procedure.hpp>
#include <proctor/registry.hpp>

#include "probe.pb.h"

namespace proctor::testing {

/// One step's action of a probe; with a `gate`, the step waits there until the test opens it.
inline testpb::ProbeAction act(testpb::ProbeAction::Kind kind, std::string gate = {}) {
  testpb::ProbeAction a;
  a.set_kind(kind);
  a.set_gate(std::move(gate));
  return a;
}

/// A probe's data in world `world`, doing `actions`, on `node` (empty: where it is submitted).
inline testpb::ProbeData make_probe(const std::string& world,
                                    std::vector<testpb::ProbeAction> actions,
                                    const std::string& node = {}) {
  testpb::ProbeData d;
  d.set_world(world);
  d.set_node(node);
  for (auto& a : actions)
    *d.add_actions() = std::move(a);
  return d;
}

/// A probe's data as the JSON its submit takes ("" if it cannot be printed).
inline std::string json(const testpb::ProbeData& d) {
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(d, &out).ok())
    out.clear();
  return out;
}

/// What the probes of one test did. Keys are "<procedure id>.<state>".
class probe_world {
public:
  /// The world named `name` (created on first use; lives for the whole test binary).
  static probe_world& get(const std::string& name) {
    static std::mutex m;
    static std::map<std::string, std::unique_ptr<probe_world>> worlds;
    std::lock_guard<std::mutex> g(m);
    auto& w = worlds[name];
    if (!w)
      w = std::make_unique<probe_world>();
    return *w;
  }

  static std::string key(uint64_t id, int32_t state) {
    return std::to_string(id) + "." + std::to_string(state);
  }
  /// What step `state` of procedure `id` obtains (and its undo must see).
  static int64_t token(uint64_t id, int32_t state) {
    return static_cast<int64_t>(id) * 100 + state;
  }

  void started(const std::string& k) {
    std::lock_guard<std::mutex> g(m_);
    ++started_[k];
    cv_.notify_all();
  }
  void undone(const std::string& k, bool committed) {
    std::lock_guard<std::mutex> g(m_);
    ++undos_[k];
    undo_order_.push_back(k + (committed ? "" : " (partial)"));
  }
  void error(std::string e) {
    std::lock_guard<std::mutex> g(m_);
    errors_.push_back(std::move(e));
  }
  /// True the first time for `k`.
  bool first_crash(const std::string& k) {
    std::lock_guard<std::mutex> g(m_);
    return crashed_.insert(k).second;
  }
  int attempt(const std::string& k) {
    std::lock_guard<std::mutex> g(m_);
    return ++attempts_[k];
  }

  void open(const std::string& gate) {
    std::lock_guard<std::mutex> g(m_);
    open_.insert(gate);
    cv_.notify_all();
  }
  /// Waits until `gate` is open; a test that forgets to open it gets a stuck-free step after
  /// `limit` (and an error recorded), never a hang.
  void pass(const std::string& gate, std::chrono::milliseconds limit = std::chrono::seconds{20}) {
    std::unique_lock<std::mutex> g(m_);
    if (!cv_.wait_for(g, limit, [&] { return open_.count(gate) > 0; }))
      errors_.push_back("gate " + gate + " never opened");
  }
  /// Waits until step `k` started; false after `limit`.
  bool wait_started(const std::string& k,
                    std::chrono::milliseconds limit = std::chrono::seconds{20}) {
    std::unique_lock<std::mutex> g(m_);
    return cv_.wait_for(g, limit, [&] { return started_.count(k) > 0; });
  }

  /// One child as the step after a SPAWN saw it: "<id>:<state>", ":cancelled" when so.
  static std::string join_entry(uint64_t id, const std::string& state, bool cancelled = false) {
    return std::to_string(id) + ":" + state + (cancelled ? ":cancelled" : "");
  }

  /// What the step after a SPAWN of procedure `id` saw of its children, each a join_entry
  /// (the last such step's).
  void joined(uint64_t id, std::vector<std::string> results) {
    std::lock_guard<std::mutex> g(m_);
    joins_[id] = std::move(results);
  }
  std::vector<std::string> joins(uint64_t id) const {
    std::lock_guard<std::mutex> g(m_);
    auto r = joins_.find(id);
    return r == joins_.end() ? std::vector<std::string>{} : r->second;
  }

  /// The reply (or "" after a passed deadline) the step after a CALL of procedure `id` got.
  void replied(uint64_t id, std::string reply) {
    std::lock_guard<std::mutex> g(m_);
    replies_[id].push_back(std::move(reply));
  }
  std::vector<std::string> replies(uint64_t id) const {
    std::lock_guard<std::mutex> g(m_);
    auto r = replies_.find(id);
    return r == replies_.end() ? std::vector<std::string>{} : r->second;
  }

  std::map<std::string, int> starts() const {
    std::lock_guard<std::mutex> g(m_);
    return started_;
  }
  std::map<std::string, int> undos() const {
    std::lock_guard<std::mutex> g(m_);
    return undos_;
  }
  std::vector<std::string> undo_order() const {
    std::lock_guard<std::mutex> g(m_);
    return undo_order_;
  }
  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> g(m_);
    return errors_;
  }

  /// check_rolled_back (below) for ids in any container (a tree's list, as `tree()` gives
  /// it).
  template <class Ids>
  std::string check_rolled_back(const Ids& ids, int max_undos = 1) const {
    return check_rolled_back(std::set<uint64_t>(ids.begin(), ids.end()), max_undos);
  }

  /// "" if every state that started in the procedures `ids` was undone exactly once (at most
  /// `max_undos` times: a node restart may undo a state again) and no state that never
  /// started was undone; otherwise what is wrong.
  std::string check_rolled_back(const std::set<uint64_t>& ids, int max_undos = 1) const {
    std::lock_guard<std::mutex> g(m_);
    std::string out;
    auto of = [&](const std::string& k) { return ids.count(std::stoull(k)) > 0; };
    for (const auto& [k, n] : started_)
      if (of(k)) {
        auto u = undos_.find(k);
        int undos = u == undos_.end() ? 0 : u->second;
        if (undos < 1 || undos > max_undos)
          out += " state " + k + " started, undone " + std::to_string(undos) + " times;";
      }
    for (const auto& [k, n] : undos_)
      if (of(k) && started_.count(k) == 0 && max_undos == 1)
        out += " state " + k + " never started, undone " + std::to_string(n) + " times;";
    return out;
  }
  /// "" if no state of the procedures `ids` was undone.
  std::string check_not_undone(const std::set<uint64_t>& ids) const {
    std::lock_guard<std::mutex> g(m_);
    std::string out;
    for (const auto& [k, n] : undos_)
      if (ids.count(std::stoull(k)) > 0)
        out += " " + k + " undone " + std::to_string(n) + " times;";
    return out;
  }

private:
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::map<std::string, int> started_, undos_, attempts_;
  std::set<std::string> crashed_, open_;
  std::vector<std::string> undo_order_, errors_;
  std::map<uint64_t, std::vector<std::string>> replies_;
  std::map<uint64_t, std::vector<std::string>> joins_;
};

/// The probe: state k (1-based) runs actions[k - 1]; state n + 1, after a last SPAWN,
/// SUSPEND or CALL, ends it.
class probe : public procedure {
public:
  google::protobuf::Message& data() override { return data_; }
  int32_t initial_state() const override { return 1; }

  outcome execute(int32_t state, context& ctx) override {
    auto& w = probe_world::get(data_.world());
    auto k = probe_world::key(ctx.id(), state);
    if (state < 1 || state > data_.actions_size() + 1)
      throw std::logic_error("probe has no state " + std::to_string(state));
    w.started(k);
    data_.set_obtained(probe_world::token(ctx.id(), state));
    if (state > 1 && data_.actions(state - 2).kind() == testpb::ProbeAction::CALL)
      w.replied(ctx.id(), ctx.event_payload());
    if (state > 1 && data_.actions(state - 2).kind() == testpb::ProbeAction::SPAWN) {
      std::vector<std::string> seen;
      for (const auto& c : ctx.children())
        seen.push_back(probe_world::join_entry(c.id, std::string(to_string(c.state)), c.cancelled));
      // Exactly the children of the spawn just before, however the procedure got here (a
      // restart from its journal once showed those of every earlier spawn too).
      const auto made = static_cast<size_t>(data_.actions(state - 2).children_size());
      if (seen.size() != made)
        w.error("procedure " + std::to_string(ctx.id()) + " state " + std::to_string(state)
                + " sees " + std::to_string(seen.size()) + " children, its spawn made "
                + std::to_string(made));
      w.joined(ctx.id(), std::move(seen));
    } else if (state > 1 && !ctx.children().empty()) {
      w.error("procedure " + std::to_string(ctx.id()) + " state " + std::to_string(state) + " sees "
              + std::to_string(ctx.children().size())
              + " children after a step that spawned nothing");
    }
    if (state == data_.actions_size() + 1)  // after a last SPAWN or SUSPEND: the end
      return outcome::done();
    const auto& a = data_.actions(state - 1);
    if (!a.gate().empty())
      w.pass(a.gate());
    if (a.sleep_ms() > 0 && a.sleep_until_cancelled()) {
      auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds{a.sleep_ms()};
      while (std::chrono::steady_clock::now() < until)
        if (ctx.cancelled())
          return outcome::yield(state);  // not wanted: nothing done, nothing committed
        else
          std::this_thread::sleep_for(std::chrono::milliseconds{5});
    } else if (a.sleep_ms() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds{a.sleep_ms()});
    }
    bool last = state == data_.actions_size();
    auto then = [&] {
      return last ? outcome::done(R"({"sum":)" + std::to_string(data_.sum()) + "}")
                  : outcome::next(state + 1);
    };
    switch (a.kind()) {
      case testpb::ProbeAction::NEXT:
        return then();
      case testpb::ProbeAction::DONE:
        return outcome::done();
      case testpb::ProbeAction::FAIL:
        return outcome::fail("probe " + k + " fails as asked");
      case testpb::ProbeAction::CRASH_ONCE:
        if (w.first_crash(k))
          throw std::runtime_error("probe " + k + " crashes as asked");
        return then();
      case testpb::ProbeAction::SPAWN: {
        std::vector<child_spec> kids;
        for (const auto& c : a.children()) {
          auto k = child("test.probe", c);
          kids.push_back(c.node().empty() ? std::move(k) : std::move(k).on_node(c.node()));
        }
        auto o = outcome::spawn(std::move(kids), state + 1);
        if (a.join_at_least() > 0)
          o = std::move(o).join(join::at_least(a.join_at_least()));
        if (a.wait_for_siblings())
          o = std::move(o).on_child_failure(child_failure::wait_for_siblings);
        return o;
      }
      case testpb::ProbeAction::SUSPEND: {
        auto o = a.wait_ms() > 0 ? outcome::suspend(a.event_key(), state + 1,
                                                    std::chrono::milliseconds{a.wait_ms()})
                                 : outcome::suspend(a.event_key(), state + 1);
        if (a.timeout_state() > 0)
          return std::move(o).on_timeout(a.timeout_state());
        return o;
      }
      case testpb::ProbeAction::SLEEP_FOR:
        return outcome::wait(std::chrono::milliseconds{a.wait_ms()}, state + 1);
      case testpb::ProbeAction::CALL:
        return outcome::call(a.event_key(), std::to_string(ctx.id()), state + 1,
                             std::chrono::milliseconds{a.wait_ms()});
      case testpb::ProbeAction::FAIL_TWICE:
        data_.set_sum(data_.sum() + 5);
        if (w.attempt(k) <= 2)
          return outcome::fail("probe " + k + " fails (attempt " + std::to_string(ctx.attempt())
                               + ")");
        return then();
      default:
        throw std::logic_error("unknown probe action");
    }
  }

  void rollback(int32_t state, context& ctx) override {
    auto& w = probe_world::get(data_.world());
    auto k = probe_world::key(ctx.id(), state);
    if (state < 1 || state > data_.actions_size() + 1)
      throw std::logic_error("probe has no state " + std::to_string(state));
    static const testpb::ProbeAction end;
    const auto& a = state <= data_.actions_size() ? data_.actions(state - 1) : end;
    if (!a.undo_gate().empty())
      w.pass(a.undo_gate());
    if (a.undo_failures() > 0 && w.attempt("undo " + k) <= a.undo_failures())
      throw std::runtime_error("undo of " + k + " fails as asked");
    bool committed = ctx.undo_of_committed_step();
    // The undo of a committed step sees what that step obtained; the undo of a state that
    // may have run partly sees the data that state started with.
    bool sees_own = data_.obtained() == probe_world::token(ctx.id(), state);
    if (committed != sees_own)
      w.error("undo of " + k + (committed ? " (committed)" : " (partial)")
              + " saw obtained=" + std::to_string(data_.obtained()));
    w.undone(k, committed);
  }

private:
  testpb::ProbeData data_;
};

inline void register_probe(registry& types) {
  retry_policy retry;  // FAIL_TWICE: three attempts in all, quickly
  retry.kind = retry_policy::backoff::fixed;
  retry.delay = std::chrono::milliseconds{5};
  retry.max_attempts = 3;
  supervision_policy sup;
  sup.backoff_min = std::chrono::milliseconds{5};
  sup.backoff_max = std::chrono::milliseconds{20};
  sup.max_restarts = 100;
  types.add<probe>("test.probe", 1, sup, retry);
}

}  // namespace proctor::testing
