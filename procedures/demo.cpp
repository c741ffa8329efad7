// The built-in demo procedures (demo.hpp): demo.forward, demo.flaky, demo.wait_event,
// demo.call, demo.noop, demo.reconcile, demo.fanout and the timers here; demo.ledger and
// demo.race in demo_ledger.cpp. Their arguments: demo.proto.
#include "procedures/demo.hpp"

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "procedures/internal/demo_files.hpp"
#include "procedures/proto_json.hpp"

namespace proctor {

namespace demo_detail {
namespace {

// -- demo.forward ---------------------------------------------------------------------------------

class forward : public state_machine<pb::ForwardData, pb::ForwardState> {
public:
  forward() {
    on(pb::FORWARD_PREPARE, &forward::prepare, &forward::unprepare);
    on_no_rollback(pb::FORWARD_COMMIT, &forward::commit);
    on(pb::FORWARD_FINISH, &forward::finish, &forward::nothing);
  }

  std::string validate() const override {
    const auto& d = typed_data();
    if (d.ledger_dir().empty())
      return "ledger_dir is required";
    return check_dir(d.ledger_dir());
  }

private:
  static fs::path file(const pb::ForwardData& d, const context& ctx, const char* what) {
    return fs::path(d.ledger_dir())
           / (std::to_string(ctx.root_id()) + "." + std::to_string(ctx.id()) + "." + what);
  }

  outcome prepare(pb::ForwardData& d, context& ctx) {
    touch(file(d, ctx, "prepared"));
    return next(pb::FORWARD_COMMIT);
  }
  void unprepare(pb::ForwardData& d, context& ctx) { remove_file(file(d, ctx, "prepared")); }

  outcome commit(pb::ForwardData& d, context& ctx) {
    touch(file(d, ctx, "committed"));
    return next(pb::FORWARD_FINISH);
  }

  outcome finish(pb::ForwardData& d, context& ctx) {
    if (!d.fix_file().empty() && !fs::exists(d.fix_file()))
      return fail("demo.forward: " + d.fix_file() + " is missing (attempt "
                  + std::to_string(ctx.attempt()) + ")");
    touch(file(d, ctx, "finished"));
    return done();
  }
  void nothing(pb::ForwardData&, context&) {}
};

// -- demo.flaky ---------------------------------------------------------------------------------

class flaky : public state_machine<pb::FlakyData, pb::FlakyState> {
public:
  flaky() {
    on(pb::FLAKY_PREPARE, &flaky::prepare, &flaky::unprepare);
    on(pb::FLAKY_RISKY, &flaky::risky, &flaky::nothing);
    on(pb::FLAKY_FINISH, &flaky::finish, &flaky::nothing);
  }

  std::string validate() const override {
    const auto& d = typed_data();
    if (d.ledger_dir().empty())
      return "ledger_dir is required";
    if (d.crash_times() < 0)
      return "crash_times must not be negative";
    return check_dir(d.ledger_dir());
  }

private:
  static fs::path prepared(const pb::FlakyData& d, const context& ctx) {
    return fs::path(d.ledger_dir())
           / (std::to_string(ctx.root_id()) + "." + std::to_string(ctx.id()) + ".prepared");
  }

  outcome prepare(pb::FlakyData& d, context& ctx) {
    touch(prepared(d, ctx));
    return next(pb::FLAKY_RISKY);
  }

  void unprepare(pb::FlakyData& d, context& ctx) { remove_file(prepared(d, ctx)); }

  outcome risky(pb::FlakyData& d, context& ctx) {
    // The attempt count lives in a file, so it survives actor restarts and node crashes.
    auto path = fs::path(d.ledger_dir()) / (std::to_string(ctx.id()) + ".attempts");
    int attempts = 0;
    if (std::ifstream in(path); in)
      in >> attempts;
    ++attempts;
    {
      std::ofstream out(path, std::ios::trunc);
      out << attempts;
    }
    if (attempts <= d.crash_times())
      throw std::runtime_error("demo.flaky: simulated crash " + std::to_string(attempts) + " of "
                               + std::to_string(d.crash_times()));
    return next(pb::FLAKY_FINISH);
  }

  outcome finish(pb::FlakyData&, context&) { return done(); }
  void nothing(pb::FlakyData&, context&) {}
};

// -- demo.wait_event ----------------------------------------------------------------------------

class wait_event : public state_machine<pb::WaitEventData, pb::WaitEventState> {
public:
  wait_event() {
    on(pb::WAIT_EVENT_SUSPEND, &wait_event::suspend_step, &wait_event::nothing);
    on(pb::WAIT_EVENT_RESUME, &wait_event::resume, &wait_event::nothing);
  }

  std::string validate() const override {
    if (typed_data().key().empty())
      return "key is required";
    if (typed_data().timeout_ms() < 0)
      return "timeout_ms must not be negative";
    return {};
  }

private:
  outcome suspend_step(pb::WaitEventData& d, context&) {
    return suspend(d.key(), pb::WAIT_EVENT_RESUME, std::chrono::milliseconds{d.timeout_ms()});
  }

  outcome resume(pb::WaitEventData& d, context& ctx) {
    d.set_payload_json(ctx.event_payload());
    return done(ctx.event_payload());
  }

  void nothing(pb::WaitEventData&, context&) {}
};

// -- demo.call -----------------------------------------------------------------------------------

class call_service : public state_machine<pb::CallData, pb::CallState> {
public:
  call_service() {
    on(pb::CALL_SEND, &call_service::send, &call_service::nothing);
    on(pb::CALL_DONE, &call_service::finish, &call_service::nothing);
  }

  std::string validate() const override {
    if (typed_data().service().empty())
      return "service is required";
    if (typed_data().timeout_ms() < 0)
      return "timeout_ms must not be negative";
    return {};
  }

private:
  outcome send(pb::CallData& d, context&) {
    return call(d.service(), d.request(), pb::CALL_DONE, std::chrono::milliseconds{d.timeout_ms()});
  }
  outcome finish(pb::CallData& d, context& ctx) {
    d.set_reply(ctx.event_payload());
    return done(ctx.event_payload());
  }
  void nothing(pb::CallData&, context&) {}
};

// -- demo.dispatch -------------------------------------------------------------------------------

class dispatch_tasks : public state_machine<pb::DispatchData, pb::DispatchState> {
public:
  dispatch_tasks() {
    on(pb::DISPATCH_SEND, &dispatch_tasks::send, &dispatch_tasks::unsend);
    on(pb::DISPATCH_GOT, &dispatch_tasks::got, &dispatch_tasks::nothing);
  }

  std::string validate() const override {
    const auto& d = typed_data();
    if (d.queue().empty())
      return "queue is required";
    if (d.steps() < 0 || d.steps() > 10'000)
      return "steps must be from 0 to 10000";
    if (d.start_to_close_ms() < 0 || d.heartbeat_ms() < 0 || d.timeout_ms() < 0)
      return "start_to_close_ms, heartbeat_ms and timeout_ms must not be negative";
    return {};
  }

private:
  static std::string task_input(const pb::DispatchData& d, const context& ctx, bool undo) {
    google::protobuf::Struct in;
    auto& f = *in.mutable_fields();
    f["proc"].set_number_value(static_cast<double>(ctx.id()));
    f["step"].set_number_value(d.step());
    f["ledger_dir"].set_string_value(d.ledger_dir());
    if (undo)
      f["undo"].set_bool_value(true);
    return message_to_json(in);
  }
  outcome send(pb::DispatchData& d, context& ctx) {
    return dispatch(d.queue(), task_input(d, ctx, false), pb::DISPATCH_GOT,
                    std::chrono::milliseconds{d.timeout_ms()})
      .start_to_close(std::chrono::milliseconds{d.start_to_close_ms()})
      .heartbeat(std::chrono::milliseconds{d.heartbeat_ms()})
      .max_attempts(d.max_attempts());
  }
  outcome got(pb::DispatchData& d, context& ctx) {
    d.add_results(ctx.task_result());
    d.set_step(d.step() + 1);
    if (d.step() < std::max(1, d.steps()))
      return next(pb::DISPATCH_SEND);
    if (d.fail_at_end())
      return fail("demo.dispatch: fails after its last task, as asked (fail_at_end)");
    std::string out = R"({"results":[)";
    for (int i = 0; i < d.results_size(); ++i)
      out += (i == 0 ? "" : ",") + d.results(i);
    return done(out + "]}");
  }
  /// The undo of a committed dispatch (its task may have run, its result or not): the
  /// task's compensation, for a worker too. A partly run SEND dispatched nothing.
  void unsend(pb::DispatchData& d, context& ctx) {
    if (d.undo_on_queue() && ctx.undo_of_committed_step())
      ctx.dispatch_undo(d.queue(), task_input(d, ctx, true),
                        {std::chrono::milliseconds{d.start_to_close_ms()},
                         std::chrono::milliseconds{d.heartbeat_ms()}, d.max_attempts(),
                         std::chrono::milliseconds{0}});
  }
  void nothing(pb::DispatchData&, context&) {}
};

// -- demo.noop / demo.fanout --------------------------------------------------------------------

class noop : public state_machine<pb::NoopData, pb::NoopState> {
public:
  noop() { on(pb::NOOP_STEP, &noop::step, &noop::nothing); }

private:
  outcome step(pb::NoopData& d, context&) {
    d.set_step(d.step() + 1);
    return d.step() >= d.steps() ? done() : next(pb::NOOP_STEP);
  }
  void nothing(pb::NoopData&, context&) {}
};

/// A reconciler: loops `steps` times through a state with no rollback (each pass is final:
/// a point of no return), then waits for the event `then_wait` if it names one, and ends.
/// What a tree that compacts its journal is for (docs/flow-control.md, "Self-compacting trees").
class reconcile : public state_machine<pb::NoopData, pb::NoopState> {
public:
  reconcile() {
    on_no_rollback(pb::NOOP_STEP, &reconcile::step);
    on_no_rollback(pb::NOOP_WAITED, &reconcile::waited);
  }

private:
  outcome step(pb::NoopData& d, context&) {
    d.set_step(d.step() + 1);
    if (d.step() < d.steps())
      return next(pb::NOOP_STEP);
    if (d.then_wait().empty())
      return done(R"({"loops":)" + std::to_string(d.step()) + "}");
    return suspend(d.then_wait(), pb::NOOP_WAITED);
  }
  outcome waited(pb::NoopData& d, context&) {
    return done(R"({"loops":)" + std::to_string(d.step()) + "}");
  }
};

class fanout : public state_machine<pb::FanoutData, pb::FanoutState> {
public:
  fanout() {
    on(pb::FANOUT_SPAWN, &fanout::spawn_step, &fanout::nothing);
    on(pb::FANOUT_JOIN, &fanout::join, &fanout::nothing);
  }

  std::string validate() const override {
    if (typed_data().children() < 0 || typed_data().children() > 1000000)
      return "children must be within 0..1000000";
    return {};
  }

private:
  outcome spawn_step(pb::FanoutData& d, context& ctx) {
    pb::NoopData c;
    c.set_steps(std::max(1, d.child_steps()));
    std::vector<child_spec> kids(static_cast<size_t>(d.children()), child("demo.noop", c));
    const auto& nodes = ctx.nodes();
    for (size_t i = 0; i < kids.size(); ++i) {
      if (d.place_on() == "*")
        kids[i] = std::move(kids[i]).on_any_node();
      else if (!d.place_on().empty())
        kids[i] = std::move(kids[i]).on_node(d.place_on());
      else if (d.spread() && nodes.size() > 1)
        kids[i] = std::move(kids[i]).on_node(nodes[i % nodes.size()]);
    }
    return spawn(std::move(kids), pb::FANOUT_JOIN);
  }

  outcome join(pb::FanoutData&, context& ctx) {
    for (const auto& c : ctx.children())
      if (c.state != proc_state::success)
        return fail("child " + std::to_string(c.id) + " did not succeed");
    return done(R"({"children":)" + std::to_string(ctx.children().size()) + "}");
  }
  void nothing(pb::FanoutData&, context&) {}
};

// -- demo.timers / demo.timer ----------------------------------------------------------------

class timer : public state_machine<pb::TimerData, pb::TimerState> {
public:
  timer() {
    on(pb::TIMER_WAIT, &timer::wait_step, &timer::nothing);
    on(pb::TIMER_FIRE, &timer::fire, &timer::nothing);
    nonblocking(pb::TIMER_WAIT);  // computes how long to wait
  }

  /// The fire step blocks only to append to its ledger: without one it runs on the actor.
  bool never_blocks(int32_t state, bool undo) const override {
    return state_machine::never_blocks(state, undo) || undo || typed_data().ledger_dir().empty();
  }

  std::string validate() const override {
    if (typed_data().wake_at_ms() <= 0)
      return "wake_at_ms (ms since the epoch) is required";
    return typed_data().ledger_dir().empty() ? std::string{} : check_dir(typed_data().ledger_dir());
  }

private:
  outcome wait_step(pb::TimerData& d, context&) {
    return wait(std::chrono::milliseconds{std::max<int64_t>(0, d.wake_at_ms() - wall_ms())},
                pb::TIMER_FIRE);
  }

  outcome fire(pb::TimerData& d, context& ctx) {
    auto now = wall_ms();
    if (!d.ledger_dir().empty()) {
      // One write with O_APPEND: lines of concurrent steps never interleave.
      auto line = std::to_string(ctx.id()) + " " + std::to_string(ctx.parent_id()) + " "
                  + std::to_string(d.wake_at_ms()) + " " + std::to_string(now) + "\n";
      auto path = fs::path(d.ledger_dir()) / "fired.log";
      int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0)
        throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
      auto n = ::write(fd, line.data(), line.size());
      ::close(fd);
      if (n != static_cast<ssize_t>(line.size()))
        throw std::runtime_error("cannot append to " + path.string());
    }
    return done(R"({"late_ms":)" + std::to_string(now - d.wake_at_ms()) + "}");
  }

  void nothing(pb::TimerData&, context&) {}
};

class timers : public state_machine<pb::TimersData, pb::TimersState> {
public:
  timers() {
    on(pb::TIMERS_SPAWN, &timers::spawn_step, &timers::nothing);
    on(pb::TIMERS_JOIN, &timers::join, &timers::nothing);
  }

  std::string validate() const override {
    const auto& d = typed_data();
    if (d.count() < 0 || d.count() > 1000000)
      return "count must be within 0..1000000";
    if (d.first_at_ms() <= 0 || d.spread_ms() < 0)
      return "first_at_ms (ms since the epoch) is required and spread_ms must not be negative";
    return d.ledger_dir().empty() ? std::string{} : check_dir(d.ledger_dir());
  }

private:
  outcome spawn_step(pb::TimersData& d, context&) {
    std::vector<child_spec> kids;
    auto n = static_cast<int64_t>(d.count());
    kids.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      // Child i gets slot (i * 7919) mod n: deadlines in an order unlike the ids'.
      auto slot = n > 1 && n % 7919 != 0 ? (i * 7919) % n : i;
      pb::TimerData t;
      t.set_wake_at_ms(d.first_at_ms() + (n > 1 ? d.spread_ms() * slot / (n - 1) : 0));
      t.set_ledger_dir(d.ledger_dir());
      kids.push_back(child("demo.timer", t));
    }
    return spawn(std::move(kids), pb::TIMERS_JOIN);
  }

  outcome join(pb::TimersData&, context& ctx) {
    for (const auto& c : ctx.children())
      if (c.state != proc_state::success)
        return fail("timer " + std::to_string(c.id) + " did not succeed");
    return done(R"({"fired":)" + std::to_string(ctx.children().size()) + "}");
  }

  void nothing(pb::TimersData&, context&) {}
};

}  // namespace
}  // namespace demo_detail

void register_demo_procedures(registry& r) {
  demo_detail::register_demo_ledgers(r);
  r.add<demo_detail::flaky>("demo.flaky");
  r.add<demo_detail::forward>("demo.forward")
    .retry({.kind = retry_policy::backoff::fixed,
            .delay = std::chrono::milliseconds{50},
            .max_attempts = 1,
            .max_attempts_past_no_return = 3});
  r.add<demo_detail::wait_event>("demo.wait_event");
  r.add<demo_detail::noop>("demo.noop").nonblocking();
  r.add<demo_detail::reconcile>("demo.reconcile").nonblocking();
  r.add<demo_detail::call_service>("demo.call");
  r.add<demo_detail::dispatch_tasks>("demo.dispatch");
  r.add<demo_detail::timers>("demo.timers");
  r.add<demo_detail::timer>("demo.timer");
  r.add<demo_detail::fanout>("demo.fanout").nonblocking();
}

}  // namespace proctor
