#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <proctor/crash_harness.hpp>

#include "actors/base/errors.hpp"
#include "actors/testing/crash_boundary.hpp"
#include "actors/testing/harness_nodes.hpp"

namespace proctor::testing {

namespace {

/// Counts how often each step and undo ran (shared by every wrapped procedure).
struct execution_log {
  std::mutex mtx;
  std::map<step_key, int> counts;

  void add(step_key k) {
    std::lock_guard<std::mutex> g(mtx);
    ++counts[std::move(k)];
  }
  std::map<step_key, int> take() {
    std::lock_guard<std::mutex> g(mtx);
    return std::exchange(counts, {});
  }
};

/// Forwards to the author's procedure and records every step and undo it runs.
class counting_procedure : public procedure {
public:
  counting_procedure(std::unique_ptr<procedure> inner, std::string type,
                     std::shared_ptr<execution_log> log)
      : inner_(std::move(inner)), type_(std::move(type)), log_(std::move(log)) {}

  google::protobuf::Message& data() override { return inner_->data(); }
  int32_t initial_state() const override { return inner_->initial_state(); }
  outcome execute(int32_t state, context& ctx) override {
    log_->add(step_key{type_, state, false, inner_->data().SerializeAsString()});
    return inner_->execute(state, ctx);
  }
  void rollback(int32_t state, context& ctx) override {
    log_->add(step_key{type_, state, true, inner_->data().SerializeAsString()});
    inner_->rollback(state, ctx);
  }
  bool rollback_supported(int32_t state) const override {
    return inner_->rollback_supported(state);
  }
  std::string validate() const override { return inner_->validate(); }
  std::string state_name(int32_t state) const override { return inner_->state_name(state); }
  lock_set locks() const override { return inner_->locks(); }
  bool resume_on_timeout() const override { return inner_->resume_on_timeout(); }

private:
  std::unique_ptr<procedure> inner_;
  std::string type_;
  std::shared_ptr<execution_log> log_;
};

registry counting_registry(const registry& types, const std::shared_ptr<execution_log>& log) {
  registry out;
  for (const auto& name : types.names()) {
    auto t = *types.find(name);
    auto make = t.make;
    t.make = [make, name, log] {
      return std::unique_ptr<procedure>(new counting_procedure(make(), name, log));
    };
    out.add(std::move(t));
  }
  return out;
}

constexpr const char* nonce = "crash-harness";

class runner {
public:
  explicit runner(const crash_matrix_options& o)
      : opts_(o), log_(std::make_shared<execution_log>()),
        types_(counting_registry(*o.types, log_)) {}

  /// Marks posted the events of the options that are durable: of each key, as many as
  /// `durable` says, in their order.
  void mark_durable(std::vector<bool>& posted, std::map<std::string, int> durable) const {
    for (size_t e = 0; e < posted.size(); ++e)
      if (durable[opts_.events[e].key]-- > 0)
        posted[e] = true;
  }

  /// Posts the next of the options' events not posted yet in this run (`posted`), if a
  /// procedure of the tree waits for its key now, on the node where it waits.
  void post_events(harness_nodes& nodes, std::vector<bool>& posted, const std::string& label) {
    auto next = std::find(posted.begin(), posted.end(), false);
    if (next == posted.end())
      return;
    const auto& e = opts_.events[static_cast<size_t>(next - posted.begin())];
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes.frozen(i))
        continue;
      pb::Request list;
      list.mutable_list()->set_state(pb::WAITING);
      list.mutable_list()->set_all(true);
      list.mutable_list()->set_local(true);
      auto waiting = nodes.call(i, list, std::chrono::milliseconds{500});
      if (!waiting)
        continue;
      bool waits = false;
      for (const auto& s : waiting->list())
        waits = waits || s.waiting_for() == "event " + e.key;
      if (!waits)
        continue;
      pb::Request req;
      req.mutable_event()->set_key(e.key);
      req.mutable_event()->set_payload_json(e.payload_json);
      auto r = nodes.call(i, req, std::chrono::seconds{1});
      if (r && r->code() != pb::Response::OK)
        throw std::runtime_error(label + ": event '" + e.key + "' refused: " + r->error());
      if (r)
        *next = true;  // answered: durable
      else             // no answer (a crash): durable if its record was written
        mark_durable(posted, nodes.durable_events());
      return;
    }
  }

  /// A task polled and not yet known to be ended: its node and its complete.
  struct held_task {
    size_t node = 0;
    pb::Request complete;
  };

  /// Works the options' queues as a worker: sends again each complete a crash left
  /// unanswered, then polls every node's queues and completes what it got.
  void run_tasks(harness_nodes& nodes, std::vector<held_task>& held, const std::string& label) {
    if (opts_.tasks.empty())
      return;
    auto send = [&](held_task& h) {
      if (nodes.frozen(h.node))
        return false;
      auto r = nodes.call(h.node, h.complete, std::chrono::seconds{1});
      if (!r)
        return false;  // a crash: sent again once the node is back
      if (r->code() != pb::Response::OK && r->code() != pb::Response::REFUSED)
        throw std::runtime_error(label + ": a task's complete answered " + r->error());
      return true;  // durable, or ended already (the node says so, and changes nothing)
    };
    held.erase(std::remove_if(held.begin(), held.end(), send), held.end());
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes.frozen(i))
        continue;
      for (const auto& t : opts_.tasks) {
        pb::Request poll;
        auto* p = poll.mutable_task();
        p->set_op(pb::TaskRequest::POLL);
        p->add_queues(t.queue);
        p->set_worker("crash-harness");
        p->set_max(10);
        auto r = nodes.call(i, poll, std::chrono::seconds{1});
        if (!r || r->code() != pb::Response::OK)
          continue;  // a crash: a lease it journaled runs out
        for (const auto& task : r->task().tasks()) {
          held_task h{i, {}};
          auto* c = h.complete.mutable_task();
          c->set_token(task.token());
          if (t.fail_error.empty()) {
            c->set_op(pb::TaskRequest::COMPLETE);
            c->set_json(t.result_json);
          } else {
            c->set_op(pb::TaskRequest::FAIL);
            c->set_error(t.fail_error);
          }
          if (!send(h))
            held.push_back(std::move(h));
        }
      }
    }
  }

  /// Runs the procedure to its end in a fresh directory, on the options' nodes. `crash(n, i,
  /// store)` arms the store of node n's incarnation i (0 = first) or leaves it alone.
  /// `first_records`, if given, receives the records the nodes wrote up to the end (the
  /// clean run: first incarnations only), node by node, in write order.
  crash_run run(const std::string& label, const harness_nodes::arm_fn& crash,
                std::vector<boundary>* first_records = nullptr) {
    crash_run out;
    out.label = label;
    auto dir = opts_.work_dir + "/run-" + std::to_string(++counter_);
    std::filesystem::remove_all(dir);
    if (opts_.reset)
      opts_.reset();
    log_->take();
    auto deadline = std::chrono::steady_clock::now() + opts_.run_timeout;
    auto names = opts_.nodes.empty() ? std::vector<std::string>{""} : opts_.nodes;
    std::vector<bool> posted(opts_.events.size(), false);
    std::vector<held_task> held;
    {
      harness_nodes nodes(types_, names, dir, opts_.workers, std::make_shared<record_namer>(types_),
                          crash);
      auto restart = [&] {
        // Events posted before a crash came before their answer: durable if written.
        if (int n = nodes.restart_crashed(); n > 0) {
          out.crashes += n;
          mark_durable(posted, nodes.durable_events());
        }
        if (out.crashes > 10000)
          throw std::runtime_error(label + ": crashes without end");
      };
      // Submit (again, after a crash: the nonce makes it idempotent) until it is durable.
      uint64_t id = 0;
      while (id == 0) {
        restart();
        pb::Request req;
        auto* s = req.mutable_submit();
        s->set_type(opts_.type);
        s->set_args_json(opts_.args_json);
        s->set_nonce(nonce);
        auto r = nodes.call(0, req, std::chrono::milliseconds{200});
        if (r && r->code() != pb::Response::OK)
          throw std::runtime_error(label + ": submit refused: " + r->error());
        if (r)
          id = r->id();
        if (std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error(label + ": the submit never became durable");
      }
      for (;;) {
        restart();
        post_events(nodes, posted, label);
        run_tasks(nodes, held, label);
        pb::Request req;
        req.mutable_wait()->set_id(id);
        req.mutable_wait()->set_timeout_ms(20);
        auto r = nodes.call(0, req, std::chrono::seconds{5});
        if (r && r->code() == pb::Response::OK) {
          out.root = r->status();
          if (first_records != nullptr)
            *first_records = nodes.records();
          break;
        }
        if (r && r->code() != pb::Response::TIMEOUT)
          throw std::runtime_error(label + ": the procedure was lost: " + r->error());
        if (std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error(label + ": did not end within the run timeout");
      }
      out.journal_writes = nodes.writes();
    }
    out.executions = log_->take();
    std::filesystem::remove_all(dir);
    return out;
  }

private:
  const crash_matrix_options& opts_;
  std::shared_ptr<execution_log> log_;
  registry types_;
  int counter_ = 0;
};

/// `state`'s name in `type` (procedure::state_name; a state_machine's: its enum value's).
std::string state_name(const registry& types, const std::string& type, int32_t state) {
  if (const auto* t = types.find(type); t != nullptr && t->make)
    if (auto p = t->make())
      return p->state_name(state);
  return std::to_string(state);
}

/// "shop.order state RESERVE (data 12 bytes)".
std::string describe(const registry& types, const step_key& k) {
  std::ostringstream o;
  o << k.type << (k.undo ? " undo of state " : " state ") << state_name(types, k.type, k.state);
  if (!k.undo)
    o << " (data " << k.data.size() << " bytes)";
  return o.str();
}

/// A run's executions as they are compared (docs/crash-testing.md, "What is compared"): a
/// step by its type, state and the data it started with; an undo by its type and state only.
/// An undo's data depends on where the cut fell, not on what it undoes: a crash mid-step has
/// the state undone as one that may have run partly, with the data the step started with,
/// where the clean run undid it as a committed step, with the data the step committed (a
/// cancelled sibling cut mid-step is the common case).
std::map<step_key, int> compared(const std::map<step_key, int>& executions) {
  std::map<step_key, int> out;
  for (const auto& [k, n] : executions) {
    auto key = k;
    if (key.undo)
      key.data.clear();
    out[key] += n;
  }
  return out;
}

void compare(const registry& types, const crash_run& clean, const crash_run& r, bool bounded,
             std::vector<std::string>* failures) {
  auto fail = [&](const std::string& what) { failures->push_back(r.label + ": " + what); };
  if (r.root.state() != clean.root.state())
    fail("ended " + pb::ProcState_Name(r.root.state()) + ", the clean run ended "
         + pb::ProcState_Name(clean.root.state()) + " (" + r.root.error() + ")");
  const auto want = compared(clean.executions);
  const auto got_all = compared(r.executions);
  for (const auto& [k, n] : want) {
    auto i = got_all.find(k);
    int got = i == got_all.end() ? 0 : i->second;
    if (got < n)
      fail(describe(types, k) + " ran " + std::to_string(got) + " time(s), the clean run "
           + std::to_string(n));
    else if (bounded && got > 2 * n)
      fail(describe(types, k) + " ran " + std::to_string(got) + " time(s): more than twice");
  }
}

}  // namespace

namespace {

/// At most `max` characters of `s`: a failure message must not drown the summary.
std::string clip(const std::string& s, size_t max = 400) {
  return s.size() <= max ? s : s.substr(0, max) + " [...]";
}

}  // namespace

std::string crash_report::summary() const {
  constexpr size_t max_listed = 20;
  std::ostringstream o;
  o << runs << " run(s), " << crashes << " crash(es) over " << boundaries << " journal boundaries; "
    << failures.size() << " failure(s)";
  if (!failing_boundaries.empty()) {
    o << "\n  failing boundaries (" << failing_boundaries.size() << "):";
    for (size_t i = 0; i < failing_boundaries.size() && i < 3 * max_listed; ++i)
      o << "\n    " << failing_boundaries[i];
    if (failing_boundaries.size() > 3 * max_listed)
      o << "\n    ... and " << failing_boundaries.size() - 3 * max_listed << " more";
  }
  for (size_t i = 0; i < failures.size() && i < max_listed; ++i)
    o << "\n  " << clip(failures[i]);
  if (failures.size() > max_listed)
    o << "\n  ... and " << failures.size() - max_listed << " more failure(s)";
  if (!unreached.empty())
    o << "\n  " << unreached.size() << " boundary(ies) of the clean run never came in a crash"
      << " run (the tree does not write the same records every run), e.g. " << unreached.front();
  return o.str();
}

crash_report run_crash_matrix(const crash_matrix_options& opts) {
  crash_report rep;
  if (opts.types == nullptr || opts.types->find(opts.type) == nullptr) {
    rep.failures.push_back("type '" + opts.type + "' is not registered");
    return rep;
  }
  auto level = spdlog::get_level();
  // The simulated crashes make the journal log errors by the dozen; PROCTOR_HARNESS_LOG=1
  // keeps the node's log for debugging a failing matrix.
  if (const char* l = std::getenv("PROCTOR_HARNESS_LOG"); l == nullptr)
    spdlog::set_level(spdlog::level::off);
  else if (std::string_view(l) == "debug")
    spdlog::set_level(spdlog::level::debug);
  struct restore {
    spdlog::level::level_enum l;
    ~restore() { spdlog::set_level(l); }
  } restore_level{level};
  std::filesystem::create_directories(opts.work_dir);
  runner r(opts);
  auto names = opts.nodes.empty() ? std::vector<std::string>{""} : opts.nodes;
  // One run, whatever happens in it: a run that throws (a lost procedure, a timeout) is one
  // failing boundary, and the matrix goes on to the next.
  auto attempt = [&](const std::string& label, const std::function<void(crash_run&)>& body) {
    size_t before = rep.failures.size();
    try {
      crash_run run;
      run.label = label;
      body(run);
      ++rep.runs;
      rep.crashes += static_cast<size_t>(run.crashes);
      if (opts.check)
        if (auto why = opts.check(run); !why.empty())
          rep.failures.push_back(run.label + ": " + why);
    } catch (const std::exception& e) {
      ++rep.runs;
      rep.failures.push_back(e.what());
    }
    if (rep.failures.size() > before)
      rep.failing_boundaries.push_back(label);
  };

  crash_run clean;
  std::vector<boundary> records;
  attempt("clean", [&](crash_run& run) {
    run = r.run("clean", {}, &records);
    clean = run;
  });
  if (!rep.failures.empty())
    return rep;
  // Boundaries in a canonical order (tree position, record kind, occurrence), so that the
  // matrix is the same however this clean run's writes were merged and interleaved.
  std::sort(records.begin(), records.end());
  records.erase(std::unique(records.begin(), records.end()), records.end());
  rep.boundaries = records.size();
  for (const auto& b : records)
    rep.boundary_labels.push_back(b.label);

  for (const auto& b : records) {
    for (bool after : {false, true}) {
      if ((after && !opts.crash_after) || (!after && !opts.crash_before))
        continue;
      auto label = std::string("crash ") + (after ? "after " : "before ") + b.label;
      attempt(label, [&](crash_run& run) {
        bool fired = false;
        run = r.run(label, [&](size_t n, int i, boundary_store& s) {
          if (i == 0 && names[n] == b.node)
            s.arm(b, after, &fired);
        });
        if (!fired)
          rep.unreached.push_back(label);
        compare(*opts.types, clean, run, true, &rep.failures);
      });
    }
  }
  if (opts.chained) {
    // HBase's double execution: every incarnation lets one write through (the one the
    // previous incarnation was killed before) and is killed before the next.
    attempt("chained", [&](crash_run& run) {
      run = r.run("chained", [](size_t, int, boundary_store& s) { s.faults().crash_at(2, false); });
      compare(*opts.types, clean, run, false, &rep.failures);
    });
  }
  return rep;
}

}  // namespace proctor::testing
