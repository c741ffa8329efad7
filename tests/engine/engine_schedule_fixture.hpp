// The fixture of the schedule tests (engine_schedule_test.cpp: firing, refusals, zones,
// pause/resume, overlap, catch-up; engine_schedule_crash_test.cpp: crashes at a firing's write
// and a seeded random run): a node whose stores remember every Submitted nonce they wrote.
#pragma once

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "actors/wire/wall_clock.hpp"
#include "calendar/cron.hpp"
#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing::schedule_fixture {

/// What the stores of every incarnation made durable: each Submitted record's nonce, and how
/// many Schedule records.
struct written {
  std::mutex mtx_;
  std::vector<std::pair<std::string, uint64_t>> submitted_;
  int schedule_records_ = 0;
};

/// Records what it writes into a `written` that outlives it.
class nonce_store : public forwarding_store {
public:
  nonce_store(std::shared_ptr<journal_store> inner, std::shared_ptr<written> log)
      : forwarding_store(std::move(inner)), log_(std::move(log)) {}
  rocksdb::Status write(const std::vector<store_op>& ops) override {
    auto st = forwarding_store::write(ops);
    if (!st.ok())
      return st;
    auto& w = *log_;
    std::lock_guard<std::mutex> g(w.mtx_);
    for (const auto& op : ops) {
      if (op.what != store_op::kind::put)
        continue;
      pb::JournalRecord r;
      if (!r.ParseFromString(op.value))
        continue;
      if (r.has_submitted() && !r.submitted().nonce().empty())
        w.submitted_.push_back({r.submitted().nonce(), r.submitted().proc_id()});
      if (r.has_schedule())
        ++w.schedule_records_;
    }
    return st;
  }

private:
  std::shared_ptr<written> log_;
};

class schedule_test : public engine {
protected:
  /// Starts the node over a fault store (crash_now) under the recording store, which lives
  /// on across restarts (what it saw was made durable by one incarnation or another).
  void start_node() {
    start([this](node_options& o) {
      std::string err;
      faults_.reset();  // the previous incarnation's database must be closed first
      auto inner = open_rocksdb_store(o.data_dir, &err);
      ASSERT_TRUE(inner) << err;
      faults_ = std::make_shared<fault_store>(std::move(inner));
      o.store = std::make_shared<nonce_store>(faults_, log_);
      o.on_journal_fatal = [](const std::string&) {};
      o.executor.passivate_after = std::chrono::milliseconds{-1};
    });
  }
  void restart_node() {
    stop();
    start_node();
  }
  /// The store dies now, as a SIGKILL would leave it; then the node is stopped.
  void crash() {
    faults_->crash_now();
    stop();
  }
  int schedule_records() {
    std::lock_guard<std::mutex> g(log_->mtx_);
    return log_->schedule_records_;
  }

  pb::Response sched(pb::ScheduleRequest::Op op, const std::string& name) {
    pb::Request req;
    req.mutable_schedule()->set_op(op);
    req.mutable_schedule()->set_name(name);
    return call(req);
  }
  pb::Response add(const std::string& name, const std::string& cron, const std::string& type,
                   const std::string& args, const std::function<void(pb::Schedule&)>& tweak = {}) {
    pb::Request req;
    req.mutable_schedule()->set_op(pb::ScheduleRequest::ADD);
    auto* s = req.mutable_schedule()->mutable_spec();
    s->set_name(name);
    s->set_cron(cron);
    s->set_type(type);
    s->set_args_json(args);
    if (tweak)
      tweak(*s);
    return call(req);
  }
  /// The schedule as the node shows it (a failure if it is not there).
  pb::ScheduleInfo show(const std::string& name) {
    auto r = sched(pb::ScheduleRequest::SHOW, name);
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    EXPECT_EQ(r.schedules_size(), 1);
    return r.schedules_size() == 1 ? r.schedules(0) : pb::ScheduleInfo{};
  }
  /// Every fire time (not triggers) submitted for `name`, by every incarnation, in order,
  /// and a failure for any submitted twice.
  std::vector<int64_t> fired(const std::string& name) {
    std::map<std::string, int> seen;
    std::vector<int64_t> out;
    auto prefix = "schedule:" + name + ":";
    std::lock_guard<std::mutex> g(log_->mtx_);
    for (const auto& [nonce, id] : log_->submitted_)
      if (nonce.rfind(prefix, 0) == 0 && nonce.find(":manual:") == std::string::npos) {
        if (++seen[nonce] == 2 && reported_.insert(nonce).second)
          ADD_FAILURE() << nonce << " submitted twice";
        out.push_back(std::stoll(nonce.substr(prefix.size())));
      }
    std::sort(out.begin(), out.end());
    return out;
  }
  /// The fire times of `cron` in (from, to].
  static std::vector<int64_t> fire_times(const std::string& cron, int64_t from, int64_t to) {
    auto spec = *calendar::parse_cron(cron).spec;
    std::vector<int64_t> out;
    for (auto t = calendar::cron_next(spec, from); t && *t <= to; t = calendar::cron_next(spec, *t))
      out.push_back(*t);
    return out;
  }
  /// The last fire time decided: the schedule's, or the last submitted if its record is on
  /// its way (the recorder sees a write before the executor hears it is durable).
  static int64_t upto(const pb::Schedule& s, const std::vector<int64_t>& times) {
    return std::max(s.decided_until_ms(), times.empty() ? int64_t{0} : times.back());
  }
  /// A labelled sample of the node's metrics, -1 if absent.
  double metric(const std::string& name, const std::string& schedule) {
    pb::Request req;
    req.mutable_metrics();
    auto text = call(req).text();
    auto key = "\n" + name + "{schedule=\"" + schedule + "\"} ";
    auto at = text.find(key);
    return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
  }

  std::shared_ptr<fault_store> faults_;
  std::shared_ptr<written> log_ = std::make_shared<written>();
  std::set<std::string> reported_;  ///< nonces already reported submitted twice
};

inline const std::string noop = R"({"steps":1})";

}  // namespace proctor::testing::schedule_fixture
