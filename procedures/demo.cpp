#include "procedures/demo.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

namespace proctor {

namespace {

namespace fs = std::filesystem;

/// Creates `path` if missing (idempotent); throws on I/O errors (a crash: retried).
void touch(const fs::path& path) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  ::close(fd);
}

/// Appends `line` and a newline to `path`, creating it (one write(2) with O_APPEND: whole
/// lines, also from several processes); throws on I/O errors (a crash: retried).
void append_line(const fs::path& path, std::string line) {
  line += '\n';
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  auto n = ::write(fd, line.data(), line.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    throw std::runtime_error("cannot append to " + path.string() + ": "
                             + (n < 0 ? std::strerror(err) : "a short write"));
}

/// Removes `path` if present (idempotent).
void remove_file(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec)
    throw std::runtime_error("cannot remove " + path.string() + ": " + ec.message());
}

/// Runs `write` under the fencing token `t` of a step or undo of procedure `id`, when
/// `fence_dir` is set: `<fence_dir>/<id>` holds the newest token seen ("epoch seq"); an older
/// `t` is refused (throws: the run is a deposed leader's, and none of its effects may land),
/// else `t` is recorded and `write` runs, both under an exclusive flock, so that a newer
/// leader's run that comes meanwhile waits for the write and then sees its token. The lock is
/// awaited for at most 10 s (its holder may be a frozen process), then the run throws and is
/// retried.
template <class Write>
void fenced(const std::string& fence_dir, uint64_t id, const fencing_token& t, Write&& write) {
  if (fence_dir.empty())
    return write();
  auto path = (fs::path(fence_dir) / std::to_string(id)).string();
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }  // (releases the flock)
  } guard{fd};
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      throw std::runtime_error("cannot lock " + path + ": " + std::strerror(errno));
    if (std::chrono::steady_clock::now() > until)
      throw std::runtime_error("demo.ledger: fence " + path + " held for 10 s by another run");
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  char buf[64] = {};
  auto n = ::pread(fd, buf, sizeof buf - 1, 0);
  fencing_token seen;
  if (n > 0)
    std::sscanf(buf, "%" SCNu64 " %" SCNu64, &seen.epoch, &seen.seq);
  if (t < seen)
    throw std::runtime_error("demo.ledger: fenced: procedure " + std::to_string(id) + "'s token "
                             + t.str() + " is older than " + seen.str()
                             + " (a newer leader ran it): refused");
  auto text = std::to_string(t.epoch) + " " + std::to_string(t.seq) + "\n";
  if (::ftruncate(fd, 0) != 0
      || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  write();
}

/// "" if `dir` is a directory, else why not (never throws: args come from clients).
std::string check_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    return {};
  bool unusual = ec && ec != std::errc::no_such_file_or_directory;
  return "ledger_dir '" + dir + "' is not a directory" + (unusual ? " (" + ec.message() + ")" : "");
}

void nap(int ms) {
  if (ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds{ms});
}

/// Sleeps `ms` in slices of at most 10 ms; false, at once, when the step is no longer wanted
/// (ctx.cancelled(): a cancelled sibling, a stopped subtree).
bool nap_unless_cancelled(int ms, const context& ctx) {
  using namespace std::chrono;
  const auto until = steady_clock::now() + milliseconds{ms};
  while (!ctx.cancelled()) {
    auto left = until - steady_clock::now();
    if (left <= steady_clock::duration::zero())
      return true;
    std::this_thread::sleep_for(std::min<steady_clock::duration>(left, milliseconds{10}));
  }
  return false;
}

/// True when `gate_dir` is "" or holds the file `name`: demo.ledger's gates (see demo.proto).
bool gate_open(const std::string& gate_dir, const std::string& name) {
  return gate_dir.empty() || fs::exists(fs::path(gate_dir) / name);
}

// -- demo.ledger --------------------------------------------------------------------------------

class ledger : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  ledger() { on(pb::LEDGER_STEP, &ledger::step, &ledger::undo); }

  std::string validate() const override {
    const auto& d = typed_data();
    if (d.ledger_dir().empty())
      return "ledger_dir is required";
    if (steps(d) < 0 || d.children() < 0 || d.depth() < 0 || d.step_sleep_ms() < 0)
      return "steps, children, depth and step_sleep_ms must not be negative";
    if (d.depth() > 8 || d.children() > 100000)
      return "depth is limited to 8 and children to 100000";
    if (!d.gate_dir().empty() && !fs::is_directory(d.gate_dir()))
      return "gate_dir '" + d.gate_dir() + "' is not a directory";
    if (!d.fence_dir().empty() && !fs::is_directory(d.fence_dir()))
      return "fence_dir '" + d.fence_dir() + "' is not a directory";
    return check_dir(d.ledger_dir());
  }

private:
  static int steps(const pb::LedgerData& d) { return d.has_steps() ? d.steps() : 3; }
  static int fail_at(const pb::LedgerData& d) { return d.has_fail_at() ? d.fail_at() : -1; }

  static fs::path file(const pb::LedgerData& d, const context& ctx, int s) {
    return fs::path(d.ledger_dir())
           / (std::to_string(ctx.root_id()) + "." + std::to_string(ctx.id()) + "."
              + std::to_string(s));
  }

  outcome step(pb::LedgerData& d, context& ctx) {
    const auto began = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    int s = d.step();
    if (!gate_open(d.gate_dir(), "step." + std::to_string(s))) {
      nap(2);  // a closed gate must not spin a run slot
      return yield(pb::LEDGER_STEP);
    }
    d.clear_touched();
    if (s >= steps(d))
      return done(R"({"steps":)" + std::to_string(s) + "}");
    if (ctx.is_root() && s == fail_at(d))
      return fail("demo.ledger: failing at step " + std::to_string(s) + " as asked (fail_at)");
    if (!nap_unless_cancelled(d.step_sleep_ms(), ctx))
      return yield(pb::LEDGER_STEP);  // not wanted any more: nothing written, nothing committed
    // Which process ran the step, and when it began: a test of a frozen leader tells steps
    // its old leader began after it thawed (none may be) from those it had under way.
    fenced(d.fence_dir(), ctx.id(), ctx.fencing_token(), [&] {
      append_line(file(d, ctx, s), std::to_string(::getpid()) + " " + std::to_string(began));
    });
    d.set_touched(s);
    d.set_step(s + 1);
    if (s == 0 && d.depth() > 0 && d.children() > 0) {
      pb::LedgerData c = d;
      c.set_depth(d.depth() - 1);
      c.set_step(0);
      c.clear_touched();
      c.clear_place_on();
      std::vector<child_spec> kids;
      const auto& nodes = ctx.nodes();
      for (int i = 0; i < d.children(); ++i) {
        auto k = child("demo.ledger", c);
        if (d.place_on() == "*")
          k = std::move(k).on_any_node();
        else if (!d.place_on().empty())
          k = std::move(k).on_node(d.place_on());
        else if (d.spread() && nodes.size() > 1)
          k = std::move(k).on_node(nodes[static_cast<size_t>(i) % nodes.size()]);
        kids.push_back(std::move(k));
      }
      return spawn(std::move(kids), pb::LEDGER_STEP);
    }
    if (s + 1 >= steps(d))
      return done(R"({"steps":)" + std::to_string(s + 1) + "}");
    return next(pb::LEDGER_STEP);
  }

  void undo(pb::LedgerData& d, context& ctx) {
    if (!gate_open(d.gate_dir(), "undo." + std::to_string(d.depth())))
      throw std::runtime_error("demo.ledger: undo gate closed");
    nap(d.step_sleep_ms());
    if (ctx.undo_of_committed_step()) {
      // The data the step committed says which file it created (none: it only ended).
      if (d.has_touched()) {
        fenced(d.fence_dir(), ctx.id(), ctx.fencing_token(),
               [&] { remove_file(file(d, ctx, d.touched())); });
        log_undo(d, ctx, d.touched());
      }
      return;
    }
    // A step that may have run partly started with this data: its file may exist.
    fenced(d.fence_dir(), ctx.id(), ctx.fencing_token(),
           [&] { remove_file(file(d, ctx, d.step())); });
    log_undo(d, ctx, d.step());
  }

  static void log_undo(const pb::LedgerData& d, const context& ctx, int step) {
    if (!d.undo_log())
      return;
    auto line = (ctx.node().empty() ? std::string{"-"} : ctx.node()) + " "
                + std::to_string(ctx.id()) + " " + std::to_string(ctx.parent_id()) + " "
                + std::to_string(step) + "\n";
    auto path = (fs::path(d.ledger_dir()) / "undo.log").string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
      throw std::runtime_error("demo.ledger: cannot open " + path);
    auto n = ::write(fd, line.data(), line.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(line.size()))
      throw std::runtime_error("demo.ledger: cannot append to " + path);
  }
};

// -- demo.flaky ---------------------------------------------------------------------------------

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

// -- demo.race ----------------------------------------------------------------------------------

// Join policies (docs/flow-control.md): `children` demo.ledger racers under join::any. The
// first is quick (one step, no sleep); the others run `steps` steps of `step_sleep_ms` each.
// The first to end wins; the others are cancelled: stopped at a step boundary, every ledger
// file they made removed by their undos. Ends with the winner and the cancelled racers.
// Gates (gate_dir) hold every racer as demo.ledger's do.
class race : public state_machine<pb::LedgerData, pb::LedgerState> {
public:
  race() {
    on(pb::LEDGER_STEP, &race::start, &race::nothing);
    on(pb::LEDGER_JOIN, &race::join, &race::nothing);
  }

  std::string validate() const override {
    const auto& d = typed_data();
    if (d.children() < 1 || d.children() > 1000)
      return "children (the racers) must be within 1..1000";
    if (d.step_sleep_ms() < 0 || (d.has_steps() && d.steps() < 1))
      return "steps must be at least 1 and step_sleep_ms not negative";
    if (d.ledger_dir().empty())
      return "ledger_dir is required";
    if (!d.gate_dir().empty() && !fs::is_directory(d.gate_dir()))
      return "gate_dir '" + d.gate_dir() + "' is not a directory";
    return check_dir(d.ledger_dir());
  }

private:
  outcome start(pb::LedgerData& d, context&) {
    std::vector<child_spec> kids;
    for (int i = 0; i < d.children(); ++i) {
      pb::LedgerData c;
      c.set_ledger_dir(d.ledger_dir());
      c.set_gate_dir(d.gate_dir());
      c.set_undo_log(d.undo_log());
      c.set_steps(i == 0 ? 1 : (d.has_steps() ? d.steps() : 3));
      c.set_step_sleep_ms(i == 0 ? 0 : d.step_sleep_ms());
      kids.push_back(child("demo.ledger", c));
    }
    return spawn(std::move(kids), pb::LEDGER_JOIN).join(join::any());
  }

  outcome join(pb::LedgerData&, context& ctx) {
    uint64_t winner = 0;
    int cancelled = 0;
    for (const auto& c : ctx.children()) {
      if (c.state == proc_state::success && winner == 0)
        winner = c.id;
      cancelled += c.cancelled ? 1 : 0;
    }
    return done(R"({"winner":)" + std::to_string(winner) + R"(,"cancelled":)"
                + std::to_string(cancelled) + "}");
  }
  void nothing(pb::LedgerData&, context&) {}
};

// -- demo.timers / demo.timer ----------------------------------------------------------------

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

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

void register_demo_procedures(registry& r) {
  r.add<ledger>("demo.ledger");
  // demo.ledger whose tree fails (and rolls back) once a node holding one of its children
  // has been unreachable for 5 s, instead of waiting for it (docs/cluster.md).
  r.add<ledger>("demo.ledger.impatient")
    .on_node_loss(node_loss_policy::fail_after(std::chrono::seconds{5}));
  r.add<flaky>("demo.flaky");
  r.add<forward>("demo.forward")
    .retry({.kind = retry_policy::backoff::fixed,
            .delay = std::chrono::milliseconds{50},
            .max_attempts = 1,
            .max_attempts_past_no_return = 3});
  r.add<wait_event>("demo.wait_event");
  r.add<noop>("demo.noop").nonblocking();
  r.add<reconcile>("demo.reconcile").nonblocking();
  r.add<call_service>("demo.call");
  r.add<timers>("demo.timers");
  r.add<timer>("demo.timer");
  r.add<fanout>("demo.fanout").nonblocking();
  r.add<race>("demo.race");
}

}  // namespace proctor
