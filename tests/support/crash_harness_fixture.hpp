// Test support: the crash harness tests' fixture (a registry with the demo procedures and the
// test procedures below, a ledger directory per test) and their helpers. Used by
// actors/testing/'s crash harness tests.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <proctor/crash_harness.hpp>
#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "procedures/demo.hpp"

namespace proctor::testing::crash_fixture {

namespace fs = std::filesystem;

inline size_t files_in(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
    ++n;
  return n;
}

/// Not idempotent: each of its `steps` steps appends a line, so a re-run after a crash
/// leaves two lines where one was meant.
class appender : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  appender() { on(pb::LEDGER_STEP, &appender::append, &appender::nothing); }

private:
  outcome append(pb::LedgerData& d, context&) {
    std::ofstream(d.ledger_dir() + "/log", std::ios::app) << "step " << d.step() << "\n";
    d.set_step(d.step() + 1);
    return d.step() >= d.steps() ? done() : next(pb::LEDGER_STEP);
  }
  void nothing(pb::LedgerData&, context&) {}
};

/// Not crash-safe in another way: its first step leaves a mark, and a re-run that finds the
/// mark skips LEDGER_JOIN, so a crash before the first commit loses a state's run.
class brancher : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  brancher() {
    on(pb::LEDGER_STEP, &brancher::mark, &brancher::nothing);
    on(pb::LEDGER_JOIN, &brancher::join, &brancher::nothing);
  }

private:
  outcome mark(pb::LedgerData& d, context&) {
    auto mark = d.ledger_dir() + "/mark";
    if (fs::exists(mark))
      return done();
    std::ofstream(mark) << "x";
    return next(pb::LEDGER_JOIN);
  }
  outcome join(pb::LedgerData&, context&) { return done(); }
  void nothing(pb::LedgerData&, context&) {}
};

/// Spawns twice: one demo.ledger child of one step, then two of two steps each; each join
/// checks that ctx.children() holds exactly the children of the spawn just before it, and the
/// step after the second join that it sees none. A mismatch fails the tree.
class spawns_twice : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  spawns_twice() {
    on(pb::LEDGER_STEP, &spawns_twice::step, &spawns_twice::nothing);
    on(pb::LEDGER_JOIN, &spawns_twice::join, &spawns_twice::nothing);
  }

private:
  static std::string seen(const context& ctx) {
    std::string out;
    for (const auto& c : ctx.children())
      out += std::to_string(c.id) + ":" + c.result_json + " ";
    return out;
  }
  std::vector<child_spec> kids(const pb::LedgerData& d, int n, int steps) {
    pb::LedgerData c;
    c.set_ledger_dir(d.ledger_dir());
    c.set_steps(steps);
    std::vector<child_spec> out;
    for (int i = 0; i < n; ++i)
      out.push_back(child("demo.ledger", c));
    return out;
  }
  outcome step(pb::LedgerData& d, context& ctx) {
    if (d.step() == 3)
      return ctx.children().empty() ? done() : fail("after a plain step, children " + seen(ctx));
    d.set_step(1);
    return spawn(kids(d, 1, 1), pb::LEDGER_JOIN);
  }
  outcome join(pb::LedgerData& d, context& ctx) {
    const size_t want = d.step() == 1 ? 1 : 2;
    const std::string result = d.step() == 1 ? R"({"steps":1})" : R"({"steps":2})";
    if (ctx.children().size() != want)
      return fail("join " + std::to_string(d.step()) + " sees children " + seen(ctx));
    for (const auto& c : ctx.children())
      if (c.state != proc_state::success || c.result_json != result)
        return fail("join " + std::to_string(d.step()) + " sees children " + seen(ctx));
    if (d.step() == 1) {
      d.set_step(2);
      return spawn(kids(d, 2, 2), pb::LEDGER_JOIN);
    }
    d.set_step(3);
    return next(pb::LEDGER_STEP);
  }
  void nothing(pb::LedgerData&, context&) {}
};

/// Waits for two events of one key, and ends with their payloads one after the other.
class waits_twice : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  waits_twice() {
    on(pb::WAIT_EVENT_SUSPEND, &waits_twice::wait, &waits_twice::nothing);
    on(pb::WAIT_EVENT_RESUME, &waits_twice::woken, &waits_twice::nothing);
  }

private:
  outcome wait(pb::WaitEventData& d, context&) { return suspend(d.key(), pb::WAIT_EVENT_RESUME); }
  outcome woken(pb::WaitEventData& d, context& ctx) {
    bool first = d.payload_json().empty();
    d.set_payload_json(d.payload_json() + ctx.event_payload());
    return first ? suspend(d.key(), pb::WAIT_EVENT_RESUME) : done(d.payload_json());
  }
  void nothing(pb::WaitEventData&, context&) {}
};

/// Spawns one test.appender child on node b, with its own data.
class remote_parent : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  remote_parent() {
    on(pb::LEDGER_STEP, &remote_parent::spawn_on_b, &remote_parent::nothing);
    on(pb::LEDGER_JOIN, &remote_parent::join, &remote_parent::nothing);
  }

private:
  outcome spawn_on_b(pb::LedgerData& d, context&) {
    std::vector<child_spec> kids;
    kids.push_back(child("test.appender", d).on_node("b"));
    return spawn(std::move(kids), pb::LEDGER_JOIN);
  }
  outcome join(pb::LedgerData&, context&) { return done(); }
  void nothing(pb::LedgerData&, context&) {}
};

/// A loop of `steps` idempotent steps, each making a file its undo removes, failing at
/// `fail_at` (if set); registered with compact_after(6), so its tree is compacted every few
/// steps while it runs, and crashes fall on trees read back from their snapshots.
class compacting_loop : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  compacting_loop() { on(pb::LEDGER_STEP, &compacting_loop::step, &compacting_loop::undo); }

private:
  static std::string file(const pb::LedgerData& d, int s) {
    return d.ledger_dir() + "/step." + std::to_string(s);
  }
  outcome step(pb::LedgerData& d, context&) {
    if (d.has_fail_at() && d.step() == d.fail_at())
      return fail("failing at step " + std::to_string(d.step()) + " as asked");
    std::ofstream(file(d, d.step())) << "x";
    d.set_touched(d.step());
    d.set_step(d.step() + 1);
    return d.step() >= d.steps() ? done() : next(pb::LEDGER_STEP);
  }
  void undo(pb::LedgerData& d, context& ctx) {
    fs::remove(file(d, ctx.undo_of_committed_step() ? d.touched() : d.step()));
  }
};

/// Join policies (docs/flow-control.md): a parent spawning a winner, which waits for the
/// harness's event "race.go" and ends, and a loser, which makes a file its undo removes and
/// waits for an event that never comes; join::any cancels the loser once the winner ended.
/// The join step checks what it sees: the winner SUCCESS, the loser ROLLEDBACK, cancelled.
template <bool LoserChangesData>
class race_parent_of : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  race_parent_of() {
    on(pb::LEDGER_STEP, &race_parent_of::spawn_both, &race_parent_of::nothing);
    on(pb::LEDGER_JOIN, &race_parent_of::join, &race_parent_of::nothing);
  }

private:
  outcome spawn_both(pb::LedgerData& d, context&) {
    const char* loser = LoserChangesData ? "test.race_loser_data" : "test.race_loser";
    return spawn({child("test.race_winner", d), child(loser, d)}, pb::LEDGER_JOIN)
      .join(join::any());
  }
  outcome join(pb::LedgerData&, context& ctx) {
    const auto& c = ctx.children();
    if (c.size() != 2 || c[0].state != proc_state::success || c[1].state != proc_state::rolledback
        || !c[1].cancelled)
      return fail("the join saw the wrong ends");
    return done();
  }
  void nothing(pb::LedgerData&, context&) {}
};

class race_winner : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  race_winner() {
    on(pb::LEDGER_STEP, &race_winner::wait, &race_winner::nothing);
    on(pb::LEDGER_JOIN, &race_winner::end, &race_winner::nothing);
  }

private:
  outcome wait(pb::LedgerData&, context&) { return suspend("race.go", pb::LEDGER_JOIN); }
  outcome end(pb::LedgerData&, context&) { return done(); }
  void nothing(pb::LedgerData&, context&) {}
};

/// The loser; with `ChangesData`, its step changes its data before it suspends, so that its
/// undo's data differs between a committed step (the clean run) and a step cut mid-way (a
/// crash run).
template <bool ChangesData>
class race_loser_of : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  race_loser_of() {
    on(pb::LEDGER_STEP, &race_loser_of::mark, &race_loser_of::unmark);
    on(pb::LEDGER_JOIN, &race_loser_of::end, &race_loser_of::nothing);
  }

private:
  outcome mark(pb::LedgerData& d, context&) {
    if (ChangesData)
      d.set_step(d.step() + 1);
    std::ofstream(d.ledger_dir() + "/loser") << "x";
    return suspend("race.never", pb::LEDGER_JOIN);
  }
  void unmark(pb::LedgerData& d, context&) { fs::remove(d.ledger_dir() + "/loser"); }
  outcome end(pb::LedgerData&, context&) { return done(); }
  void nothing(pb::LedgerData&, context&) {}
};

class crash_harness_test : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/proctor-crash-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    ledger_ = dir_ + "/ledger";
    fs::create_directories(ledger_);
    register_demo_procedures(types_);
    types_.add<appender>("test.appender");
    types_.add<brancher>("test.brancher");
    types_.add<waits_twice>("test.waits_twice");
    types_.add<remote_parent>("test.remote_parent");
    types_.add<compacting_loop>("test.compacting_loop").compact_after(6);
    types_.add<race_parent_of<false>>("test.race_parent");
    types_.add<race_winner>("test.race_winner");
    types_.add<race_loser_of<false>>("test.race_loser");
    types_.add<spawns_twice>("test.spawns_twice");
    types_.add<race_loser_of<true>>("test.race_loser_data");
    types_.add<race_parent_of<true>>("test.race_parent_data");
  }
  void TearDown() override { fs::remove_all(dir_); }

  crash_matrix_options options(const std::string& type, const std::string& args) {
    crash_matrix_options o;
    o.types = &types_;
    o.type = type;
    o.args_json = args;
    o.work_dir = dir_ + "/work";
    o.reset = [this] {
      fs::remove_all(ledger_);
      fs::create_directories(ledger_);
    };
    return o;
  }

  std::string dir_, ledger_;
  registry types_;
};

inline std::string ledger_tree(const std::string& ledger, const std::string& extra = "") {
  return R"({"children":2,"depth":1,"ledger_dir":")" + ledger + "\"" + extra + "}";
}

inline bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

inline std::string labels(const crash_report& rep) {
  std::string out = "boundaries:";
  for (const auto& l : rep.boundary_labels)
    out += "\n  " + l;
  return out;
}

}  // namespace proctor::testing::crash_fixture
