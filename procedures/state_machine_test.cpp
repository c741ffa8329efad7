#include <stdexcept>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

namespace proctor {
namespace {

using namespace std::chrono_literals;

/// Two states declared highest first, in both the member-function and the lambda form.
class two_state : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  std::vector<std::string> log;

  two_state() {
    on(pb::LEDGER_JOIN, &two_state::join, &two_state::undo_join);
    on(
      pb::LEDGER_STEP,
      [this](pb::LedgerData& d, context& ctx) {
        log.push_back("step@" + std::to_string(ctx.id()));
        d.set_step(d.step() + 1);
        d.set_ledger_dir("stepped");
        return next(pb::LEDGER_JOIN);
      },
      [this](pb::LedgerData& d, context&) {
        log.push_back("undo_step");
        d.set_step(d.step() - 1);
      });
  }

private:
  outcome join(pb::LedgerData& d, context& ctx) {
    log.push_back("join");
    d.set_children(static_cast<int32_t>(ctx.children().size()));
    return done(R"({"joined":true})");
  }
  void undo_join(pb::LedgerData& d, context&) {
    log.push_back("undo_join");
    d.set_children(-1);
  }
};

/// PREPARE rolls back, FINISH is a point of no return, RISKY is not declared at all.
class with_no_return : public state_machine<pb::FlakyData, pb::FlakyState> {
public:
  int finished = 0;
  with_no_return() {
    on_no_rollback(pb::FLAKY_FINISH, &with_no_return::finish);
    on(
      pb::FLAKY_PREPARE, [](pb::FlakyData&, context&) { return next(pb::FLAKY_FINISH); },
      [](pb::FlakyData& d, context&) { d.set_crash_times(d.crash_times() + 100); });
  }

private:
  outcome finish(pb::FlakyData&, context&) {
    ++finished;
    return done();
  }
};

/// A no-return state in the lambda form, and one declared with an empty undo.
class lambda_no_return : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  lambda_no_return() {
    on_no_rollback(pb::WAIT_EVENT_RESUME,
                   [](pb::WaitEventData&, context&) { return outcome::done(); });
    on(
      pb::WAIT_EVENT_SUSPEND,
      [](pb::WaitEventData& d, context&) { return suspend(d.key(), pb::WAIT_EVENT_RESUME, 5s); },
      nullptr);
  }
};

class empty_machine : public state_machine<pb::NoopData, pb::NoopState> {};

/// Exercises every typed outcome helper.
class helpers : public state_machine<pb::FanoutData, pb::FanoutState> {
public:
  int mode = 0;
  helpers() {
    on(
      pb::FANOUT_SPAWN,
      [this](pb::FanoutData& d, context&) -> outcome {
        switch (mode) {
          case 0:
            return yield(pb::FANOUT_JOIN);
          case 1:
            return wait(250ms, pb::FANOUT_JOIN);
          case 2:
            return suspend("k", pb::FANOUT_JOIN);
          case 3: {
            pb::NoopData c;
            c.set_steps(2);
            return spawn({child("demo.noop", c, 4), child("demo.noop", c)}, pb::FANOUT_JOIN);
          }
          case 4:
            return fail("nope");
          case 6:
            return suspend("k", pb::FANOUT_JOIN, 2s).on_timeout(pb::FANOUT_SPAWN);
          default:
            return done(d);
        }
      },
      [](pb::FanoutData&, context&) {});
  }
};

TEST(state_machine_test, initial_state_is_the_lowest_declared) {
  two_state a;
  EXPECT_EQ(a.initial_state(), pb::LEDGER_STEP);
  with_no_return b;
  EXPECT_EQ(b.initial_state(), pb::FLAKY_PREPARE);
  lambda_no_return c;
  EXPECT_EQ(c.initial_state(), pb::WAIT_EVENT_SUSPEND);
  empty_machine e;
  EXPECT_EQ(e.initial_state(), 0);
}

TEST(state_machine_test, execute_dispatches_and_mutates_data) {
  two_state m;
  context ctx;
  ctx.id_ = 42;
  ctx.root_id_ = 40;
  ctx.parent_id_ = 41;
  auto o = m.execute(pb::LEDGER_STEP, ctx);
  EXPECT_EQ(o.what(), outcome::kind::next);
  EXPECT_EQ(o.state(), pb::LEDGER_JOIN);
  EXPECT_EQ(m.typed_data().step(), 1);
  EXPECT_EQ(m.typed_data().ledger_dir(), "stepped");
  EXPECT_EQ(m.log, (std::vector<std::string>{"step@42"}));

  ctx.children_.resize(3);
  o = m.execute(pb::LEDGER_JOIN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(o.result_json(), R"({"joined":true})");
  EXPECT_EQ(m.typed_data().children(), 3);
  EXPECT_EQ(m.typed_data().step(), 1);
  EXPECT_EQ(m.log, (std::vector<std::string>{"step@42", "join"}));
}

TEST(state_machine_test, data_is_the_typed_data) {
  two_state m;
  auto* typed = dynamic_cast<pb::LedgerData*>(&m.data());
  ASSERT_NE(typed, nullptr);
  EXPECT_EQ(typed, &m.typed_data());
  typed->set_steps(9);
  EXPECT_EQ(m.typed_data().steps(), 9);
  context ctx;
  m.execute(pb::LEDGER_STEP, ctx);
  EXPECT_EQ(dynamic_cast<pb::LedgerData&>(m.data()).step(), 1);
}

TEST(state_machine_test, rollback_dispatches_to_the_state_handler) {
  two_state m;
  m.typed_data().set_step(5);
  m.typed_data().set_children(7);
  context ctx;
  m.rollback(pb::LEDGER_JOIN, ctx);
  EXPECT_EQ(m.typed_data().children(), -1);
  EXPECT_EQ(m.typed_data().step(), 5);
  EXPECT_EQ(m.log, (std::vector<std::string>{"undo_join"}));
  m.rollback(pb::LEDGER_STEP, ctx);
  EXPECT_EQ(m.typed_data().step(), 4);
  EXPECT_EQ(m.log, (std::vector<std::string>{"undo_join", "undo_step"}));
}

TEST(state_machine_test, rollback_of_undeclared_or_no_return_state_does_nothing) {
  with_no_return m;
  m.typed_data().set_crash_times(1);
  context ctx;
  EXPECT_NO_THROW(m.rollback(pb::FLAKY_FINISH, ctx));
  EXPECT_NO_THROW(m.rollback(pb::FLAKY_RISKY, ctx));
  EXPECT_NO_THROW(m.rollback(77, ctx));
  EXPECT_EQ(m.typed_data().crash_times(), 1);
  EXPECT_EQ(m.finished, 0);
  m.rollback(pb::FLAKY_PREPARE, ctx);
  EXPECT_EQ(m.typed_data().crash_times(), 101);
}

TEST(state_machine_test, rollback_supported_is_false_only_for_no_return_states) {
  with_no_return m;
  EXPECT_TRUE(m.rollback_supported(pb::FLAKY_PREPARE));
  EXPECT_FALSE(m.rollback_supported(pb::FLAKY_FINISH));
  EXPECT_TRUE(m.rollback_supported(pb::FLAKY_RISKY));  // undeclared
  lambda_no_return l;
  EXPECT_FALSE(l.rollback_supported(pb::WAIT_EVENT_RESUME));
  EXPECT_FALSE(l.rollback_supported(pb::WAIT_EVENT_SUSPEND));  // declared with no undo
  two_state t;
  EXPECT_TRUE(t.rollback_supported(pb::LEDGER_STEP));
  EXPECT_TRUE(t.rollback_supported(pb::LEDGER_JOIN));
}

/// two_state whose join step is declared nonblocking (twice: once counts).
class quick_join : public two_state {
public:
  quick_join() {
    nonblocking(pb::LEDGER_JOIN);
    nonblocking(pb::LEDGER_JOIN);
  }
};

TEST(state_machine_test, only_states_declared_nonblocking_never_block) {
  quick_join q;
  EXPECT_TRUE(q.never_blocks(pb::LEDGER_JOIN, false));
  EXPECT_TRUE(q.never_blocks(pb::LEDGER_JOIN, true)) << "its undo is declared with it";
  EXPECT_FALSE(q.never_blocks(pb::LEDGER_STEP, false));
  EXPECT_FALSE(q.never_blocks(pb::LEDGER_STEP, true));
  EXPECT_FALSE(q.never_blocks(12345, false)) << "an undeclared state";
  two_state plain;
  EXPECT_FALSE(plain.never_blocks(pb::LEDGER_JOIN, false)) << "blocking is the default";
}

TEST(state_machine_test, no_return_state_executes) {
  with_no_return m;
  context ctx;
  auto o = m.execute(pb::FLAKY_PREPARE, ctx);
  EXPECT_EQ(o.what(), outcome::kind::next);
  EXPECT_EQ(o.state(), pb::FLAKY_FINISH);
  o = m.execute(pb::FLAKY_FINISH, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(m.finished, 1);
  lambda_no_return l;
  l.typed_data().set_key("ev");
  o = l.execute(pb::WAIT_EVENT_SUSPEND, ctx);
  EXPECT_EQ(o.what(), outcome::kind::suspend);
  EXPECT_EQ(o.event_key(), "ev");
  EXPECT_EQ(o.state(), pb::WAIT_EVENT_RESUME);
  EXPECT_EQ(o.duration(), 5000ms);
}

TEST(state_machine_test, execute_on_undeclared_state_throws) {
  with_no_return m;
  context ctx;
  EXPECT_THROW(m.execute(pb::FLAKY_RISKY, ctx), std::logic_error);
  try {
    m.execute(99, ctx);
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "no step handler for state 99");
  }
  empty_machine e;
  EXPECT_THROW(e.execute(e.initial_state(), ctx), std::logic_error);
  // Not a business failure: the runtime must treat it as a crash.
  try {
    m.execute(pb::FLAKY_RISKY, ctx);
  } catch (const std::exception& ex) {
    EXPECT_EQ(dynamic_cast<const procedure_failure*>(&ex), nullptr);
  }
}

TEST(state_machine_test, state_name_uses_the_enum_names) {
  two_state t;
  EXPECT_EQ(t.state_name(pb::LEDGER_STEP), "LEDGER_STEP");
  EXPECT_EQ(t.state_name(pb::LEDGER_JOIN), "LEDGER_JOIN");
  EXPECT_EQ(t.state_name(0), "LEDGER_UNSPECIFIED");
  EXPECT_EQ(t.state_name(42), "42");
  EXPECT_EQ(t.state_name(-3), "-3");
  with_no_return f;
  EXPECT_EQ(f.state_name(pb::FLAKY_RISKY), "FLAKY_RISKY");  // named even though undeclared
  EXPECT_EQ(f.state_name(pb::FLAKY_FINISH), "FLAKY_FINISH");
}

TEST(state_machine_test, redeclaring_a_state_replaces_its_handlers) {
  class redeclared : public state_machine<pb::NoopData, pb::NoopState> {
  public:
    redeclared() {
      on(
        pb::NOOP_STEP, [](pb::NoopData&, context&) { return outcome::fail("first"); },
        [](pb::NoopData&, context&) {});
      on_no_rollback(pb::NOOP_STEP, [](pb::NoopData&, context&) { return outcome::done("2"); });
    }
  };
  redeclared m;
  context ctx;
  auto o = m.execute(pb::NOOP_STEP, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  EXPECT_EQ(o.result_json(), "2");
  EXPECT_FALSE(m.rollback_supported(pb::NOOP_STEP));
}

TEST(state_machine_test, typed_outcome_helpers) {
  helpers h;
  context ctx;
  auto o = h.execute(pb::FANOUT_SPAWN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::yield);
  EXPECT_EQ(o.state(), pb::FANOUT_JOIN);

  h.mode = 1;
  o = h.execute(pb::FANOUT_SPAWN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::wait);
  EXPECT_EQ(o.state(), pb::FANOUT_JOIN);
  EXPECT_EQ(o.duration(), 250ms);

  h.mode = 2;
  o = h.execute(pb::FANOUT_SPAWN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::suspend);
  EXPECT_EQ(o.event_key(), "k");
  EXPECT_EQ(o.state(), pb::FANOUT_JOIN);
  EXPECT_EQ(o.duration(), 0ms);
  EXPECT_FALSE(o.has_timeout_state());

  h.mode = 6;
  o = h.execute(pb::FANOUT_SPAWN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::suspend);
  EXPECT_EQ(o.state(), pb::FANOUT_JOIN);
  EXPECT_EQ(o.duration(), 2000ms);
  ASSERT_TRUE(o.has_timeout_state());
  EXPECT_EQ(o.timeout_state(), pb::FANOUT_SPAWN);

  h.mode = 3;
  o = h.execute(pb::FANOUT_SPAWN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::spawn);
  EXPECT_EQ(o.state(), pb::FANOUT_JOIN);
  ASSERT_EQ(o.children().size(), 2u);
  EXPECT_EQ(o.children()[0].type, "demo.noop");
  EXPECT_EQ(o.children()[0].priority, 4);
  EXPECT_EQ(o.children()[1].priority, 0);
  pb::NoopData c;
  ASSERT_TRUE(c.ParseFromString(o.children()[1].data));
  EXPECT_EQ(c.steps(), 2);

  h.mode = 4;
  o = h.execute(pb::FANOUT_SPAWN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::fail);
  EXPECT_EQ(o.error(), "nope");

  h.mode = 5;
  h.typed_data().set_children(3);
  h.typed_data().set_child_steps(1);
  o = h.execute(pb::FANOUT_SPAWN, ctx);
  EXPECT_EQ(o.what(), outcome::kind::done);
  pb::FanoutData back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.result_json(), &back).ok())
    << o.result_json();
  EXPECT_EQ(back.children(), 3);
  EXPECT_EQ(back.child_steps(), 1);
}

TEST(state_machine_test, handler_exceptions_propagate) {
  class thrower : public state_machine<pb::NoopData, pb::NoopState> {
  public:
    thrower() {
      on(
        pb::NOOP_STEP,
        [](pb::NoopData& d, context&) -> outcome {
          if (d.steps() == 0)
            throw procedure_failure("business");
          throw std::runtime_error("crash");
        },
        [](pb::NoopData&, context&) { throw std::runtime_error("undo crash"); });
    }
  };
  thrower t;
  context ctx;
  EXPECT_THROW(t.execute(pb::NOOP_STEP, ctx), procedure_failure);
  t.typed_data().set_steps(1);
  try {
    t.execute(pb::NOOP_STEP, ctx);
    FAIL() << "expected an exception";
  } catch (const procedure_failure&) {
    FAIL() << "a crash must not be a procedure_failure";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "crash");
  }
  EXPECT_THROW(t.rollback(pb::NOOP_STEP, ctx), std::runtime_error);
}

TEST(state_machine_test, context_observers) {
  context ctx;
  EXPECT_TRUE(ctx.is_root());
  EXPECT_EQ(ctx.attempt(), 1);
  ctx.id_ = 5;
  ctx.root_id_ = 1;
  ctx.parent_id_ = 2;
  ctx.attempt_ = 3;
  ctx.event_payload_ = "{}";
  ctx.event_timed_out_ = true;
  EXPECT_FALSE(ctx.is_root());
  EXPECT_EQ(ctx.id(), 5u);
  EXPECT_EQ(ctx.root_id(), 1u);
  EXPECT_EQ(ctx.parent_id(), 2u);
  EXPECT_EQ(ctx.attempt(), 3);
  EXPECT_EQ(ctx.event_payload(), "{}");
  EXPECT_TRUE(ctx.event_timed_out());
}

TEST(state_machine_test, proc_state_names_and_finality) {
  EXPECT_EQ(to_string(proc_state::initializing), "INITIALIZING");
  EXPECT_EQ(to_string(proc_state::runnable), "RUNNABLE");
  EXPECT_EQ(to_string(proc_state::waiting), "WAITING");
  EXPECT_EQ(to_string(proc_state::waiting_timeout), "WAITING_TIMEOUT");
  EXPECT_EQ(to_string(proc_state::rolledback), "ROLLEDBACK");
  EXPECT_EQ(to_string(proc_state::success), "SUCCESS");
  EXPECT_EQ(to_string(proc_state::failed), "FAILED");
  EXPECT_TRUE(is_final(proc_state::success));
  EXPECT_TRUE(is_final(proc_state::rolledback));
  EXPECT_TRUE(is_final(proc_state::failed));
  EXPECT_FALSE(is_final(proc_state::runnable));
  EXPECT_FALSE(is_final(proc_state::waiting));
  EXPECT_FALSE(is_final(proc_state::waiting_timeout));
  EXPECT_FALSE(is_final(proc_state::initializing));
  EXPECT_EQ(to_pb(proc_state::waiting_timeout), pb::WAITING_TIMEOUT);
  EXPECT_EQ(from_pb(pb::ROLLEDBACK), proc_state::rolledback);
}

}  // namespace
}  // namespace proctor
