// Events racing (docs/concepts.md, "Events"): with deadlines of a few milliseconds, no event is
// lost or consumed twice; and random interleavings of events, suspends and restarts (clean or a
// crash) follow a model of the contract. Seeds printed on failure; PROCTOR_EVENTS_SEED replays.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/engine/engine_events_fixture.hpp"

namespace proctor::testing {
namespace {

// -- races -----------------------------------------------------------------------------------

// Waiters with deadlines of a few milliseconds race with events: a delivery that meets a
// waiter whose deadline passed first is declined, and the event goes to the next waiter or is
// kept. No event is lost (each is consumed in the end: by one waiter if it was kept, by at
// most the waiters it woke otherwise), and none is consumed twice.
TEST_F(events_test, events_racing_with_deadlines_are_neither_lost_nor_consumed_twice) {
  const uint64_t seed = seed_from_env("PROCTOR_EVENTS_SEED");
  SCOPED_TRACE("seed " + std::to_string(seed) + " (PROCTOR_EVENTS_SEED=" + std::to_string(seed)
               + " replays it)");
  std::mt19937_64 rng(seed);
  // Counts the declined deliveries (info lines) without printing the info lines; the sinks'
  // levels are put back at the end (a scope guard: also when the test fails early).
  auto declined = std::make_shared<counting_sink>("did not take event");
  auto logger = spdlog::default_logger();
  struct restore_sinks {
    std::shared_ptr<spdlog::logger> logger;
    std::vector<spdlog::level::level_enum> levels;
    ~restore_sinks() {
      logger->sinks().pop_back();
      for (size_t i = 0; i < levels.size(); ++i)
        logger->sinks()[i]->set_level(levels[i]);
    }
  } restore{logger, {}};
  for (auto& sink : logger->sinks()) {
    restore.levels.push_back(sink->level());
    sink->set_level(spdlog::level::warn);
  }
  logger->sinks().push_back(declined);
  spdlog::set_level(spdlog::level::info);
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  start();
  std::map<std::string, int> woke;  // payload -> waiters it woke (0: kept)
  std::vector<uint64_t> ids;
  // Rounds of one or two waiters with a deadline, then an event sent to land about then (a
  // kept event, or one whose waiters all declined, goes to a waiter of a later round).
  for (int round = 0; round < 40; ++round) {
    auto timeout = 5 + static_cast<int>(rng() % 20);
    for (auto n = 1 + rng() % 2; n > 0; --n)
      ids.push_back(
        submit("demo.wait_event", R"({"key":"dl","timeout_ms":)" + std::to_string(timeout) + "}"));
    std::this_thread::sleep_for(
      std::chrono::milliseconds{timeout - 4 + static_cast<int>(rng() % 9)});
    auto payload = "\"p" + std::to_string(round) + "\"";
    auto text = event("dl", payload).text();
    woke[payload] = text == kept("dl") ? 0 : std::stoi(text.substr(text.find(" to ") + 4));
  }
  std::map<std::string, int> got;
  for (auto id : ids) {
    auto s = wait(id);
    if (s.state() == pb::SUCCESS)
      ++got[s.result_json()];
    else
      EXPECT_EQ(s.state(), pb::ROLLEDBACK) << "procedure " << id << ": " << s.error();
  }
  // What is still kept goes to waiters without a deadline, one each, oldest first.
  for (size_t drained = 0; drained <= woke.size(); ++drained) {
    auto id = submit("demo.wait_event", R"({"key":"dl"})");
    if (!eventually([&] { return status(id).state() == pb::SUCCESS; }, std::chrono::seconds{1}))
      break;
    ++got[wait(id).result_json()];
  }
  for (const auto& [payload, n] : woke) {
    EXPECT_GE(got[payload], 1) << "event " << payload << " was lost (it woke " << n << ")";
    EXPECT_LE(got[payload], std::max(1, n)) << "event " << payload << " was consumed twice";
  }
  stop();
  int delivered = 0;
  for (const auto& [payload, n] : woke)
    delivered += n > 0 ? 1 : 0;
  std::printf("  %zu events (%d woke waiters), %zu waiters with deadlines, %d deliveries "
              "declined (their waiter's deadline came first)\n",
              woke.size(), delivered, ids.size(), declined->count.load());
}

// -- random interleavings ---------------------------------------------------------------------

// Events and suspends on a few keys in a random order, with restarts (clean or a crash) in
// between; a model of the contract says which event each waiter gets, if any. The seed is
// printed on failure; PROCTOR_EVENTS_SEED replays one.
TEST_F(events_test, random_interleavings_follow_the_contract) {
  const uint64_t seed = seed_from_env("PROCTOR_EVENTS_SEED");
  SCOPED_TRACE("seed " + std::to_string(seed) + " (PROCTOR_EVENTS_SEED=" + std::to_string(seed)
               + " replays it)");
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  auto passivate = [&] {
    // Waiting roots passivate at once, after a second, or never (then they are read back with
    // their actors at a restart).
    static const std::chrono::milliseconds choices[] = {
      std::chrono::milliseconds{0}, std::chrono::seconds{1}, std::chrono::milliseconds{-1}};
    return choices[rng() % 3];
  };
  start_crashable(passivate());

  struct key_model {
    std::deque<std::string> kept;  ///< payloads, oldest first
    std::vector<size_t> waiting;   ///< waiters (indexes), in suspend order
  };
  std::map<std::string, key_model> model;
  struct waiter_rec {
    uint64_t id = 0;
    std::string key;
    std::optional<std::string> payload;  ///< the event it must get
  };
  std::vector<waiter_rec> waiters;
  const std::vector<std::string> keys{"r0", "r1", "r2"};
  int events = 0;
  for (int op = 0; op < 60; ++op) {
    auto roll = rng() % 100;
    const auto& key = keys[rng() % keys.size()];
    auto& m = model[key];
    if (roll < 45) {
      auto payload = "\"e" + std::to_string(++events) + "\"";
      auto r = event(key, payload);
      ASSERT_EQ(r.code(), pb::Response::OK) << r.error();
      if (m.waiting.empty()) {
        EXPECT_EQ(r.text(), kept(key)) << "op " << op;
        m.kept.push_back(payload);
      } else {
        EXPECT_EQ(r.text(), delivered(key, static_cast<int>(m.waiting.size()))) << "op " << op;
        for (auto w : m.waiting)
          waiters[w].payload = payload;
        m.waiting.clear();
      }
    } else if (roll < 93) {
      waiters.push_back({waiter(key), key, std::nullopt});
      if (!m.kept.empty()) {
        waiters.back().payload = m.kept.front();
        m.kept.pop_front();
      } else {
        m.waiting.push_back(waiters.size() - 1);
      }
    } else if (roll < 97) {
      start_crashable(passivate());  // after a clean stop
    } else {
      store_->faults().crash_now();
      start_crashable(passivate());
    }
    if (::testing::Test::HasFailure())
      return;
  }
  for (const auto& w : waiters) {
    if (w.payload) {
      expect_woken_by(w.id, *w.payload);
    } else {
      auto s = status(w.id);
      EXPECT_EQ(s.state(), pb::WAITING) << "procedure " << w.id << " on " << w.key
                                        << " was woken (result " << s.result_json() << ")";
    }
  }
}

}  // namespace
}  // namespace proctor::testing
