// Test support for trees across real proctord processes: three named nodes a, b, c on
// 127.0.0.1 (free ports, temp directories), each with the others as --peers (a derived
// fixture may set count_ to 2 in its constructor: a and b only). demo.ledger
// spreads its children over the nodes; its ledger files (one per committed step) and its
// undo log say what ran and what was undone, in which order, whatever happened to the
// processes.
#pragma once

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace proctor::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class cluster : public ::testing::Test {
protected:
  void SetUp() override {
    fs::create_directories(ledger());
    for (size_t i = 0; i < count_; ++i)
      ports_[i] = free_port();
    for (size_t i = 0; i < count_; ++i)
      nodes_[i] = make(i);
    for (size_t i = 0; i < count_; ++i)
      ASSERT_TRUE(nodes_[i]->start()) << nodes_[i]->log_tail();
    // Every link up (a link that found its peer not started yet retries within 2 s), so
    // each test starts from the same cluster.
    for (size_t i = 0; i < count_; ++i) {
      for (size_t j = 0; j < count_; ++j) {
        if (i == j)
          continue;
        ASSERT_TRUE(sees(i, names_[j], true)) << nodes_[i]->log_tail();
      }
    }
  }

  std::unique_ptr<node> make(size_t i) {
    std::string peers;
    for (size_t j = 0; j < count_; ++j)
      if (j != i)
        peers += (peers.empty() ? "" : ",") + names_[j] + "=127.0.0.1:" + std::to_string(ports_[j]);
    return std::make_unique<node>(dir_.path() / names_[i], ports_[i],
                                  std::vector<std::string>{"--name", names_[i], "--peers", peers});
  }

  fs::path ledger() const { return dir_.path() / "ledger"; }

  size_t ledger_files() const {
    size_t n = count_files(ledger());
    return fs::exists(ledger() / "undo.log") ? n - 1 : n;
  }

  uint64_t submit(size_t at, const std::string& extra, const std::string& type = "demo.ledger") {
    auto args =
      R"({"ledger_dir":")" + ledger().string() + R"(","spread":true,"undo_log":true)" + extra + "}";
    auto r = nodes_[at]->ctl({"submit", type, "--args-json", args}, 30s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto id = parse_id(r.out);
    EXPECT_TRUE(id) << r.out;
    return id.value_or(0);
  }

  /// The procedure's final state, asked at node `at` (waits at most 90 s).
  std::string final_state(size_t at, uint64_t id) {
    nodes_[at]->ctl({"wait", std::to_string(id), "--timeout-s", "90"}, 120s);
    auto r = nodes_[at]->ctl({"status", std::to_string(id), "--json"}, 30s);
    auto v = parse_json(r.out);
    return v ? state_of(*v) : "unreadable: " + r.out + r.err;
  }

  /// Node `at`'s `nodes --json`, by name (empty if it did not answer).
  std::map<std::string, google::protobuf::Struct> nodes_seen_by(size_t at) {
    std::map<std::string, google::protobuf::Struct> out;
    auto r = nodes_[at]->ctl({"nodes", "--json"}, 10s);
    auto v = parse_json(r.out);
    if (r.exit_code != 0 || !v)
      return out;
    for (const auto& n : v->list_value().values())
      out[n.struct_value().fields().at("name").string_value()] = n.struct_value();
    return out;
  }

  /// Whether node `at` sees peer `name` up (or down, `up` false) within `limit`.
  bool sees(size_t at, const std::string& name, bool up, std::chrono::milliseconds limit = 20s) {
    return eventually(
      [&] {
        auto seen = nodes_seen_by(at);
        auto i = seen.find(name);
        return i != seen.end() && i->second.fields().at("up").bool_value() == up;
      },
      limit, 100ms);
  }

  /// How many of a, b, c run (2 or 3).
  size_t count_ = 3;
  temp_dir dir_;
  std::array<std::string, 3> names_{"a", "b", "c"};
  std::array<uint16_t, 3> ports_{};
  std::array<std::unique_ptr<node>, 3> nodes_;
};

}  // namespace proctor::test
