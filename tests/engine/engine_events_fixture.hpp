// The fixture of the event tests (engine_events_test.cpp: live, passivated, across restarts and
// crashes; engine_events_races_test.cpp: races with deadlines and random interleavings): the
// passivation fixture's node, a store that crashes at the n-th EventDelivered, a log sink
// that counts lines.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/sinks/base_sink.h>

#include "actors/testing/fault_store.hpp"
#include "persistence/rocksdb_store.hpp"
#include "tests/engine/engine_passivation_fixture.hpp"

namespace proctor::testing {

/// A store that "crashes" (freezes: this write and every later one refused) at the write
/// holding the `n`th EventDelivered record from the moment it is armed.
class crash_at_delivery_store : public fault_store {
public:
  explicit crash_at_delivery_store(std::shared_ptr<journal_store> inner)
      : fault_store(std::move(inner)) {}

  void arm(int n) {
    std::lock_guard<std::mutex> g(m_);
    left_ = n;
  }
  fault_store& faults() { return *this; }

  rocksdb::Status write(const std::vector<store_op>& ops) override {
    {
      std::lock_guard<std::mutex> g(m_);
      if (left_ > 0) {
        for (const auto& op : ops) {
          pb::JournalRecord r;
          if (op.what == store_op::kind::put && r.ParseFromString(op.value) && r.has_delivered()
              && --left_ == 0)
            crash_now();
        }
      }
    }
    return fault_store::write(ops);
  }

private:
  std::mutex m_;
  int left_ = 0;
};

/// Counts the log lines that contain `what`.
class counting_sink : public spdlog::sinks::base_sink<std::mutex> {
public:
  explicit counting_sink(std::string what) : what_(std::move(what)) {}
  std::atomic<int> count{0};

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (std::string_view(msg.payload.data(), msg.payload.size()).find(what_)
        != std::string_view::npos)
      ++count;
  }
  void flush_() override {}

private:
  std::string what_;
};

class events_test : public passivation_test {
protected:
  /// (Re)starts the node over a store the test can crash (store_), passivation as given.
  void start_crashable(std::chrono::milliseconds passivate = std::chrono::seconds{1}) {
    stop();          // a clean stop, or what is left of a node whose store "crashed"
    store_.reset();  // the previous incarnation's database is closed first
    start([&](node_options& o) {
      o.executor.passivate_after = passivate;
      std::string err;
      std::shared_ptr<journal_store> inner = open_rocksdb_store(o.data_dir, &err);
      ASSERT_TRUE(inner) << err;
      store_ = std::make_shared<crash_at_delivery_store>(inner);
      o.store = store_;
      o.on_journal_fatal = [](const std::string&) {};  // the "crash"
    });
  }

  /// A demo.wait_event on `key`, once suspended (or already woken by a kept event).
  uint64_t waiter(const std::string& key) {
    auto id = submit("demo.wait_event", R"({"key":")" + key + R"("})");
    EXPECT_TRUE(eventually([&] {
      auto s = status(id);
      return s.state() == pb::SUCCESS
             || (s.state() == pb::WAITING && s.waiting_for() == "event " + key);
    }))
      << "procedure " << id << " neither waits for " << key << " nor ended";
    return id;
  }

  /// `id` ends SUCCESS with `payload` (the payload of the event it consumed).
  void expect_woken_by(uint64_t id, const std::string& payload) {
    auto s = wait(id, std::chrono::seconds{20});
    EXPECT_EQ(s.state(), pb::SUCCESS) << "procedure " << id << ": " << s.error();
    EXPECT_EQ(s.result_json(), payload) << "procedure " << id;
  }

  /// `id` still waits `for_ms` later: no event woke it.
  void expect_still_waiting(uint64_t id, int for_ms = 300) {
    std::this_thread::sleep_for(std::chrono::milliseconds{for_ms});
    auto s = status(id);
    EXPECT_EQ(s.state(), pb::WAITING)
      << "procedure " << id << " was woken (result " << s.result_json() << ")";
  }

  static std::string delivered(const std::string& key, int n) {
    return "event '" + key + "' delivered to " + std::to_string(n) + " waiting procedure(s)";
  }
  static std::string kept(const std::string& key) {
    return "event '" + key
           + "' kept for 5 min for the first procedure that suspends on it (none waits now)";
  }

  std::shared_ptr<crash_at_delivery_store> store_;
};

}  // namespace proctor::testing
