// Torture: a seeded mixed workload on one node — demo.ledger roots and trees, some failing on
// purpose, demo.wait_event waiters woken by events sent at random points (some before their
// waiter exists, some before a kill, some after), waiters that time out, demo.flaky procedures
// that crash — with ten SIGKILLs at random moments and a restart after each. Submits and
// events run in a traffic thread while the kill timer runs, so kills also cut CLI calls off;
// those are retried after the restart (submits with their nonce), and between them the
// thread polls `status` of random roots (a root once seen SUCCESS or ROLLEDBACK must stay so).
// At the end every root must have ended as its args demand, every ledger must be exact (its
// tree's procedures × steps files, <root>.<proc>.<step>, or none after a rollback), the roots
// listed must be exactly those submitted, and nothing may be stuck or quarantined.
//
// The seed comes from PROCTOR_TORTURE_SEED (else the clock) and is printed, and named in every
// failure; PROCTOR_TORTURE_SEED=<seed> replays the same workload and kill delays (the node's
// own timing differs from run to run, so a replay is likely, not certain, to hit the same
// interleaving).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"
#include "tests/process/torture_workload.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace proctor::test::torture;

// -- the test -----------------------------------------------------------------------------------

TEST(torture, seeded_mixed_workload_survives_ten_sigkills) {
  auto seed_opt = torture_seed();
  ASSERT_TRUE(seed_opt) << "PROCTOR_TORTURE_SEED is not a number: "
                        << std::getenv("PROCTOR_TORTURE_SEED");
  const uint64_t seed = *seed_opt;
  const std::string replay = "PROCTOR_TORTURE_SEED=" + std::to_string(seed);
  std::cout << "  torture seed " << seed << " (replay with " << replay << ")" << std::endl;
  SCOPED_TRACE(replay);
  auto t0 = clock_type::now();

  temp_dir dir;
  auto ledgers = dir.path() / "ledgers";
  std::mt19937_64 rng{seed};
  workload w{rng, seed, ledgers};
  auto& roots = w.roots;
  for (auto& r : roots)
    if (!r.dir.empty())
      fs::create_directories(r.dir);

  // Two run slots keep work pending across several kills. Waiting roots passivate at once,
  // soon, or rarely, by seed (not drawn from `rng`: the workload of a seed stays the same).
  const int passivate_ms = std::array{0, 50, 1000}[seed % 3];
  node n{dir.path() / "data",
         0,
         {"--workers", "2", "--passivate-after-ms", std::to_string(passivate_ms)}};
  ASSERT_TRUE(n.start()) << replay << "\n" << n.log_tail();

  std::vector<std::string> problems;
  auto report_problems = [&] {
    for (size_t i = 0; i < problems.size() && i < 10; ++i)
      ADD_FAILURE() << replay << ": " << problems[i];
    if (problems.size() > 10)
      ADD_FAILURE() << replay << ": and " << problems.size() - 10 << " more like these";
    problems.clear();
  };

  // Up front: every submit must be acknowledged (no kill is coming yet).
  for (auto& a : w.up_front)
    if (!perform(n, a, roots, problems))
      problems.push_back("submit of " + roots[a.root].what() + " got no answer\n" + n.log_tail());
  report_problems();

  // Ten rounds of traffic cut off by a SIGKILL at a random moment, a restart after each.
  std::vector<action> carried;  // cut off by a kill or not reached: next round, first thing
  size_t cut_off_submits = 0, cut_off_events = 0;
  long max_restart_ms = 0;
  std::string kill_log;
  size_t polls = 0;
  std::map<uint64_t, std::string> ended;  // roots seen SUCCESS or ROLLEDBACK: final states
  for (int round = 0; round < kills; ++round) {
    std::vector<action> todo = carried;
    for (auto& a : todo)
      a.at_ms = 0;
    todo.insert(todo.end(), w.rounds[static_cast<size_t>(round)].begin(),
                w.rounds[static_cast<size_t>(round)].end());
    carried.clear();
    std::atomic<bool> stop{false};
    size_t cut = 0;
    // The traffic: the round's submits and events at their moments, and between them `status`
    // polls of random roots, so that the kill nearly always cuts a call off. One CLI call at a
    // time, which keeps the order of submits and events as the seed says.
    std::thread traffic([&] {
      std::mt19937_64 poll_rng{seed + static_cast<uint64_t>(round)};
      auto began = clock_type::now();
      size_t next = 0;
      while (!stop.load()) {
        if (next < todo.size()
            && clock_type::now() >= began + std::chrono::milliseconds{todo[next].at_ms}) {
          auto& a = todo[next];
          if (perform(n, a, roots, problems)) {
            ++next;
            continue;
          }
          if (!stop.load())
            problems.push_back("a live node did not answer (exit 3) a call for "
                               + roots[a.root].what());
          ++cut;
          (a.what == action::submit ? cut_off_submits : cut_off_events)++;
          break;
        }
        std::vector<const root_spec*> known;
        for (auto& r : roots)
          if (r.id)
            known.push_back(&r);
        if (known.empty()) {
          std::this_thread::sleep_for(5ms);
          continue;
        }
        auto& r = *known[std::uniform_int_distribution<size_t>(0, known.size() - 1)(poll_rng)];
        auto res = n.ctl({"status", std::to_string(*r.id), "--json"}, 30s);
        ++polls;
        if (res.exit_code == 3 && stop.load())
          break;
        auto v = parse_json(res.out);
        auto state = v && v->has_struct_value() ? field(*v, "state").string_value() : "";
        static const std::set<std::string> states{"INITIALIZING",    "RUNNABLE",   "WAITING",
                                                  "WAITING_TIMEOUT", "ROLLEDBACK", "SUCCESS",
                                                  "FAILED"};
        if (res.exit_code != 0 || !states.count(state)) {
          problems.push_back("status of " + r.what() + ": " + describe_run(res));
          std::this_thread::sleep_for(10ms);  // no busy loop when the CLI itself fails
          continue;
        }
        auto [it, first] = ended.emplace(*r.id, state);
        if (first && !terminal(state))
          ended.erase(it);
        else if (!first && it->second != state)
          problems.push_back(r.what() + " ended " + it->second + ", later status says "
                             + trim(res.out));
      }
      for (; next < todo.size(); ++next)
        carried.push_back(todo[next]);
    });
    // The one sleep that is the point: a random moment to kill at.
    int delay = w.kill_delays_ms[static_cast<size_t>(round)];
    std::this_thread::sleep_for(std::chrono::milliseconds{delay});
    stop = true;
    n.kill();
    traffic.join();
    size_t files = 0;
    for (auto& r : roots)
      if (!r.dir.empty())
        files += file_names(r.dir).size();
    kill_log +=
      " " + std::to_string(delay) + "ms(" + std::to_string(files) + "f" + (cut ? ",cut" : "") + ")";
    report_problems();

    auto restart = clock_type::now();
    ASSERT_TRUE(n.start(30s)) << replay << ": restart " << round + 1 << " failed\n"
                              << n.log_tail(40);
    max_restart_ms = std::max<long>(
      max_restart_ms,
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - restart).count());
  }

  // After the last restart: what is left, and the final round; every call must be answered.
  std::vector<action> todo = carried;
  todo.insert(todo.end(), w.rounds[final_round].begin(), w.rounds[final_round].end());
  for (auto& a : todo)
    if (!perform(n, a, roots, problems))
      problems.push_back(std::string(a.what == action::submit ? "submit" : "event") + " for "
                         + roots[a.root].what() + " got no answer after the last restart\n"
                         + n.log_tail());
  report_problems();
  for (auto& r : roots)
    ASSERT_TRUE(r.id) << replay << ": never got an id: " << r.what();

  // Wait for every root, within one overall budget.
  auto wait_deadline = clock_type::now() + final_wait_budget;
  for (auto& r : roots) {
    auto left = std::chrono::duration_cast<std::chrono::seconds>(wait_deadline - clock_type::now());
    auto t = std::clamp<long>(left.count(), 1, 30);
    r.wait = n.ctl({"wait", std::to_string(*r.id), "--timeout-s", std::to_string(t)},
                   std::chrono::seconds{t + 30});
  }

  std::string raw_all;
  auto all = list_procedures(n, true, &raw_all);
  ASSERT_TRUE(all) << replay << ": list --all --json: " << raw_all;
  std::map<uint64_t, const proc_status*> by_id;
  std::map<uint64_t, size_t> per_root;
  for (auto& p : *all) {
    EXPECT_TRUE(by_id.emplace(p.id, &p).second) << replay << ": id " << p.id << " listed twice";
    ++per_root[p.root_id];
  }

  // Every root ended as its args demand, and its ledger is exact.
  size_t bad = 0, ledger_files = 0, tree_roots = 0, failing = 0;
  for (auto& r : roots) {
    auto id = *r.id;
    std::vector<std::string> why;
    auto v = parse_json(r.wait.out);
    std::string state = v && v->has_struct_value() ? field(*v, "state").string_value() : "";
    std::string want_state = r.must_succeed() ? "SUCCESS" : "ROLLEDBACK";
    if (r.wait.exit_code != 0 && r.wait.exit_code != 1)
      why.push_back("did not end (stuck?): wait " + describe_run(r.wait));
    else if (state != want_state || r.wait.exit_code != (r.must_succeed() ? 0 : 1))
      why.push_back("ended " + state + " (wait exit " + std::to_string(r.wait.exit_code)
                    + "), expected " + want_state + ": " + trim(r.wait.out));

    if (r.children > 0)
      ++tree_roots;
    if (r.fail_at >= 0)
      ++failing;
    auto have = file_names(r.dir);
    ledger_files += have.size();
    switch (r.k) {
      case kind::ledger: {
        // The tree, as listed: breadth first from the root, `children` per inner procedure,
        // none below `depth`, none spawned at all if the root failed at its first step.
        bool spawns = r.children > 0 && r.fail_at != 0;
        std::vector<std::pair<uint64_t, int>> tree{{id, 0}};
        for (size_t i = 0; i < tree.size(); ++i) {
          auto [pid, level] = tree[i];
          auto it = by_id.find(pid);
          if (it == by_id.end()) {
            why.push_back("procedure " + std::to_string(pid) + " of the tree is not listed");
            continue;
          }
          auto& p = *it->second;
          if (p.root_id != id || (pid != id && p.state != state))
            why.push_back("procedure " + std::to_string(pid) + " has root_id "
                          + std::to_string(p.root_id) + ", state " + p.state);
          size_t want_children = spawns && level < r.depth ? static_cast<size_t>(r.children) : 0;
          if (p.children.size() != want_children)
            why.push_back("procedure " + std::to_string(pid) + " at level " + std::to_string(level)
                          + " has " + std::to_string(p.children.size()) + " children, expected "
                          + std::to_string(want_children));
          for (auto c : p.children) {
            auto ci = by_id.find(c);
            if (ci != by_id.end() && ci->second->parent_id != pid)
              why.push_back("child " + std::to_string(c) + " names parent "
                            + std::to_string(ci->second->parent_id));
            tree.push_back({c, level + 1});
          }
        }
        size_t want_size = spawns ? r.tree_size() : 1;
        if (tree.size() != want_size || per_root[id] != want_size)
          why.push_back("tree of " + std::to_string(tree.size()) + " procedures reached, "
                        + std::to_string(per_root[id]) + " listed with its root_id, expected "
                        + std::to_string(want_size));
        std::set<std::string> want;
        if (r.must_succeed())
          for (auto& [pid, level] : tree)
            for (int s = 0; s < r.steps; ++s)
              want.insert(std::to_string(id) + "." + std::to_string(pid) + "." + std::to_string(s));
        if (have != want)
          why.push_back("ledger has " + std::to_string(have.size()) + " files, expected "
                        + std::to_string(want.size()) + "; missing " + join(minus(want, have))
                        + ", unexpected " + join(minus(have, want)));
        if (r.fail_at >= 0 && v
            && field(*v, "error").string_value().find("fail_at") == std::string::npos)
          why.push_back("error does not name fail_at: " + field(*v, "error").string_value());
        break;
      }
      case kind::waiter: {
        auto want = parse_json(r.payload);
        if (state == "SUCCESS"
            && !(want
                 && google::protobuf::util::MessageDifferencer::Equals(field(*v, "result"), *want)))
          why.push_back("result is not the event's payload " + r.payload + ": " + trim(r.wait.out));
        break;
      }
      case kind::timeout:
        if (state == "ROLLEDBACK"
            && field(*v, "error").string_value().find("timed out") == std::string::npos)
          why.push_back("error does not say it timed out: " + trim(r.wait.out));
        break;
      case kind::flaky: {
        auto id_s = std::to_string(id);
        std::set<std::string> want{id_s + "." + id_s + ".prepared", id_s + ".attempts"};
        if (have != want)
          why.push_back("ledger " + join(have) + ", expected " + join(want));
        int attempts = -1;
        std::ifstream{r.dir / (id_s + ".attempts")} >> attempts;
        if (attempts <= r.crash_times)
          why.push_back("risky step ran " + std::to_string(attempts) + " times, crash_times "
                        + std::to_string(r.crash_times));
        break;
      }
    }
    if (per_root[id] == 0)
      why.push_back("not in list --all");
    if (auto e = ended.find(id); e != ended.end() && e->second != state)
      why.push_back("a status poll saw it " + e->second + " before the end");
    if (!why.empty()) {
      std::string all_why;
      for (auto& x : why)
        all_why += "\n  - " + x;
      if (bad++ < 8)
        ADD_FAILURE() << replay << ": " << r.what() << all_why
                      << "\n  its ledger: " << join(have, 30) << "\n  node log lines:\n"
                      << log_lines_of(n, id);
    }
  }
  EXPECT_EQ(bad, 0u) << replay << ": " << bad << " of " << roots.size() << " roots ended wrong\n"
                     << n.log_tail(30);

  // Nothing stuck, nothing extra: the roots listed are exactly ours, every procedure ended,
  // and nothing is quarantined.
  std::string raw_roots;
  auto listed = list_procedures(n, false, &raw_roots);
  ASSERT_TRUE(listed) << replay << ": list --json: " << raw_roots;
  std::set<std::string> want_ids, listed_ids;
  for (auto& r : roots)
    want_ids.insert(std::to_string(*r.id));
  for (auto& p : *listed) {
    listed_ids.insert(std::to_string(p.id));
    EXPECT_TRUE(terminal(p.state)) << replay << ": root " << p.id << " is " << p.state;
  }
  EXPECT_EQ(listed_ids, want_ids) << replay << ": missing from list "
                                  << join(minus(want_ids, listed_ids)) << ", unexpected "
                                  << join(minus(listed_ids, want_ids));
  size_t unended = 0;
  for (auto& p : *all)
    if (!terminal(p.state) && unended++ < 10)
      ADD_FAILURE() << replay << ": procedure " << p.id << " (root " << p.root_id << ") is "
                    << p.state;
  for (auto& [root, count] : per_root)
    EXPECT_TRUE(want_ids.count(std::to_string(root)))
      << replay << ": " << count << " procedure(s) listed under unknown root " << root;
  auto q = n.ctl({"quarantine"}, 30s);
  EXPECT_EQ(q.exit_code, 0) << replay << ": quarantine: " << describe_run(q);
  auto qv = parse_json(q.out);
  EXPECT_TRUE(qv && qv->has_list_value() && qv->list_value().values_size() == 0)
    << replay << ": quarantined trees: " << trim(q.out);
  EXPECT_TRUE(n.running()) << replay << "\n" << n.log_tail();

  auto secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  size_t ledgers_n = 0, waiters = 0, timeouts = 0, flakies = 0;
  for (auto& r : roots)
    (r.k == kind::ledger    ? ledgers_n
     : r.k == kind::waiter  ? waiters
     : r.k == kind::timeout ? timeouts
                            : flakies)++;
  std::ostringstream line;
  line.precision(1);
  line << std::fixed << "  torture seed " << seed << ": " << roots.size() << " roots (" << ledgers_n
       << " ledger [" << tree_roots << " trees, " << failing << " failing], " << waiters
       << " waiters, " << timeouts << " timeouts, " << flakies << " flaky), " << all->size()
       << " procedures, passivation after " << passivate_ms << " ms, " << kills << " SIGKILLs at"
       << kill_log << "; " << cut_off_submits << " submits and " << cut_off_events
       << " events cut off and retried, " << polls
       << " status polls; restarts <= " << max_restart_ms << " ms; " << ledger_files
       << " ledger files; " << (bad == 0 ? "all as expected" : "FAILURES") << " in " << secs
       << " s";
  std::cout << line.str() << std::endl;
  n.kill();
}

}  // namespace
