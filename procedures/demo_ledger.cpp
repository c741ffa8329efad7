// demo.ledger (a tree of procedures that each append a line per step to a ledger file, and
// undo it) and demo.race (ledger racers under join::any): the demos the crash tests check
// exactly. Their arguments: demo.proto.
#include <proctor/demo.pb.h>
#include <proctor/state_machine.hpp>

#include "procedures/internal/demo_files.hpp"

namespace proctor::demo_detail {

namespace {

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

}  // namespace

void register_demo_ledgers(registry& r) {
  r.add<ledger>("demo.ledger");
  // demo.ledger whose tree fails (and rolls back) once a node holding one of its children
  // has been unreachable for 5 s, instead of waiting for it (docs/cluster.md).
  r.add<ledger>("demo.ledger.impatient")
    .on_node_loss(node_loss_policy::fail_after(std::chrono::seconds{5}));
  r.add<race>("demo.race");
}

}  // namespace proctor::demo_detail
