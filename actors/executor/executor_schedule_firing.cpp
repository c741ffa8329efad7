// Recurring schedules firing (docs/flow-control.md, "Recurring schedules"): one tick, armed
// in the timeout actor for the earliest due fire time of all schedules, decides each due fire
// time in order: it submits a root (nonce "schedule:<name>:<fire_ms>"), or skips it or holds
// it (overlap policy). A submit is journaled in one batch with the schedule's record (which
// says the fire time is decided), so a crash leaves both or neither: a fire time never
// starts twice and is never lost. After downtime the catch-up policy decides the fire times
// that came while the node was down (schedules_recovered).
// A cluster schedule (executor_schedules_cluster.cpp) fires only on the node that owns its
// key's slot and holds every nonce of it; the new owner after a move goes on from what the
// group was told and what it took over, so that a fire time is still submitted once.
#include <algorithm>
#include <deque>

#include <spdlog/spdlog.h>

#include "actors/executor/internal/executor_state.hpp"
#include "actors/scheduling/timeout_actor.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

namespace {

constexpr size_t recent_runs = 10;          ///< runs kept per schedule
constexpr size_t catch_up_all_bound = 100;  ///< catch-up `all` submits at most these
/// Fire times before the catch-up window counted as missed, at most (the rest are skipped
/// over uncounted).
constexpr uint64_t enumerate_bound = 100'000;
constexpr int64_t default_window_ms = 3'600'000;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

/// The jitter of fire time `fire_ms`: the same on every node and after every restart.
int64_t jitter_of(const pb::Schedule& r, int64_t fire_ms) {
  if (r.jitter_ms() == 0)
    return 0;
  return static_cast<int64_t>(fnv1a(r.name() + ":" + std::to_string(fire_ms))
                              % (r.jitter_ms() + 1));
}

std::string nonce_of(const std::string& name, int64_t fire_ms, bool manual) {
  return "schedule:" + name + (manual ? ":manual:" : ":") + std::to_string(fire_ms);
}

/// True if a run of the schedule has not ended (its root known here and not ended).
bool previous_running(executor_state& st, const pb::Schedule& r) {
  for (const auto& run : r.runs()) {
    auto i = st.procs.find(run.proc_id());
    if (i != st.procs.end() && !i->second.ended)
      return true;
  }
  return false;
}

/// Every fire time up to this was decided, here or (a cluster schedule) by its owners.
int64_t decided_until(const schedules_part::schedule_entry& e) {
  return std::max(e.rec.decided_until_ms(), e.cluster_until);
}

/// The next undecided fire time of `e` (before jitter), if any.
std::optional<int64_t> next_undecided(const schedules_part::schedule_entry& e) {
  if (e.rec.paused() || e.rec.deleted())
    return std::nullopt;
  return calendar::cron_next(e.cron, e.zone, decided_until(e));
}

void write_record(executor_actor* self, const std::string& name, pb::Schedule rec,
                  std::function<void()> then) {
  write_schedule_record(self, name, std::move(rec), std::move(then));
}

/// Decides fire time `fire_ms` of schedule `name` (its next undecided one, due): submits a
/// run, or skips or holds it by the overlap policy.
void decide(executor_actor* self, const std::string& name) {
  auto& st = self->state;
  auto it = st.schedules.by_name.find(name);
  if (it == st.schedules.by_name.end())
    return schedule_op_done(self);
  auto& e = it->second;
  auto t = next_undecided(e);
  if (!t || *t + jitter_of(e.rec, *t) > wall_ms() || !schedule_fires_here(self, e))
    return schedule_op_done(self);  // not due (any more): paused, deleted, decided, moved
  int64_t fire = *t;
  bool running = e.rec.overlap() != pb::Schedule::ALLOW && previous_running(st, e.rec);
  if (!running && e.rec.buffered_ms() != 0) {
    // The run it was held behind ended and its own op has not come yet: the held fire time
    // goes first; this one is decided at the next tick (behind the held one's run).
    return fire_schedule(self, name, e.rec.buffered_ms(), false, true,
                         [self](uint64_t, const std::string&) { schedule_op_done(self); });
  }
  if (running) {
    auto rec = e.rec;
    rec.set_decided_until_ms(fire);
    bool hold = e.rec.overlap() == pb::Schedule::BUFFER_ONE && rec.buffered_ms() == 0;
    if (hold)
      rec.set_buffered_ms(fire);
    else
      rec.set_skipped(rec.skipped() + 1);
    spdlog::info("schedule {}: fire time {} {}: its previous run has not ended", name,
                 utc_text(fire), hold ? "held (buffer-one)" : "skipped");
    return write_record(self, name, std::move(rec), [self] { schedule_op_done(self); });
  }
  fire_schedule(self, name, fire, false, false,
                [self](uint64_t, const std::string&) { schedule_op_done(self); });
}

}  // namespace

void write_schedule_record(executor_actor* self, const std::string& name, pb::Schedule rec,
                           std::function<void()> then) {
  auto& st = self->state;
  rec.set_at_ms(wall_ms());
  pb::JournalRecord jr;
  *jr.mutable_schedule() = rec;
  journal_batch b;
  b.entries.push_back(make_entry(journal_keys::meta_root, jr));
  auto& e = st.schedules.by_name[name];
  if (e.lsn != 0)
    b.deletes.push_back({journal_keys::meta_root, e.lsn, e.lsn + 1, 0});
  append(self, std::move(b), [self, name, rec, then = std::move(then)](uint64_t lsn) mutable {
    auto& e = self->state.schedules.by_name[name];
    e.lsn = lsn;
    e.rec = std::move(rec);
    report_schedule_progress(self, name);
    if (then)
      then();
  });
}

std::string read_schedule_spec(schedules_part::schedule_entry& e) {
  auto p = calendar::parse_cron(e.rec.cron());
  if (!p.spec)
    return p.error;
  auto z = calendar::find_zone(e.rec.zone());
  if (!z.zone)
    return z.error;
  e.cron = *p.spec;
  e.zone = *z.zone;
  return "";
}

int64_t next_fire_ms(const schedules_part::schedule_entry& e) {
  auto t = next_undecided(e);
  return t ? *t + jitter_of(e.rec, *t) : 0;
}

void schedule_op(executor_actor* self, std::function<void()> op) {
  auto& st = self->state;
  st.schedules.ops.push_back(std::move(op));
  if (st.schedules.busy)
    return;
  st.schedules.busy = true;
  auto next = std::move(st.schedules.ops.front());
  st.schedules.ops.pop_front();
  next();
}

void schedule_op_done(executor_actor* self) {
  auto& st = self->state;
  if (st.schedules.ops.empty()) {
    st.schedules.busy = false;
    arm_schedule_tick(self);
    return;
  }
  auto next = std::move(st.schedules.ops.front());
  st.schedules.ops.pop_front();
  next();
}

void arm_schedule_tick(executor_actor* self) {
  auto& st = self->state;
  if (!st.schedules.live)
    return;
  int64_t earliest = 0;
  for (const auto& [name, e] : st.schedules.by_name)
    if (auto at = next_fire_ms(e);
        at != 0 && (earliest == 0 || at < earliest) && schedule_fires_here(self, e))
      earliest = at;
  if (earliest == st.schedules.timer_ms)
    return;
  st.schedules.timer_ms = earliest;
  if (earliest == 0)
    return cancel_timeout(self, st.env->timeout, 0, timeout_kind::schedule);
  arm_timeout(self, st.env->timeout, 0, timeout_kind::schedule, earliest,
              schedule_tick_atom::value);
}

void on_schedule_tick(executor_actor* self) {
  auto& st = self->state;
  st.schedules.timer_ms = 0;
  if (!st.schedules.live)
    return;
  auto now = wall_ms();
  bool any = false;
  for (const auto& [name, e] : st.schedules.by_name)
    if (auto at = next_fire_ms(e); at != 0 && at <= now && schedule_fires_here(self, e)) {
      any = true;
      schedule_op(self, [self, name = name] { decide(self, name); });
    }
  if (!any)
    arm_schedule_tick(self);
}

void fire_schedule(executor_actor* self, const std::string& name, int64_t fire_ms, bool manual,
                   bool buffered, std::function<void(uint64_t id, std::string why)> done) {
  auto& st = self->state;
  auto& e = st.schedules.by_name[name];
  auto rec = std::make_shared<pb::Schedule>(e.rec);
  if (!manual)
    rec->set_decided_until_ms(std::max(rec->decided_until_ms(), fire_ms));
  if (buffered)
    rec->set_buffered_ms(0);
  auto nonce = nonce_of(name, fire_ms, manual);
  auto refuse = [&](std::string why) {
    // Not submittable (its type is gone from this binary, the node is full): decided as
    // skipped, so that it is not tried for ever.
    spdlog::warn("schedule {}: fire time {} skipped: {}", name, utc_text(fire_ms), why);
    if (manual)
      return done(0, why);
    rec->set_skipped(rec->skipped() + 1);
    write_record(self, name, *rec, [done, why] { done(0, why); });
  };
  // A root with this nonce exists: its submit and this record were one batch, so it cannot
  // be undecided here; should it be, the fire time is recorded with that root, not run again.
  // (A cluster schedule's fire time another owner submitted: its nonce was taken over with
  // the slot, executor_handoff.cpp.)
  std::optional<uint64_t> ran;
  if (auto n = st.nonces.find(nonce); n != st.nonces.end())
    ran = n->second;
  else
    ran = nonce_taken_id(self, nonce);
  if (ran) {
    spdlog::warn("schedule {}: fire time {} ran already as procedure {}", name, utc_text(fire_ms),
                 *ran);
    return write_record(self, name, *rec, [done, id = *ran] { done(id, ""); });
  }
  if (st.procs.size() >= st.cfg.max_procedures)
    return refuse("node is at capacity (" + std::to_string(st.procs.size()) + " procedures)");
  std::string err;
  auto inst = st.env->types->make_from_json(rec->type(), rec->args_json(), &err);
  if (!inst)
    return refuse(err);
  submit_root(
    self, rec->type(), std::move(inst), nonce, rec->priority(), 0, promise_t{},
    [self, name, rec, done, fire_ms, manual](uint64_t id, uint64_t lsn) {
      auto& st = self->state;
      auto& e = st.schedules.by_name[name];
      for (const auto& old : e.rec.runs())
        st.schedules.runs.erase(old.proc_id());
      e.lsn = lsn;
      e.rec = *rec;
      for (const auto& r : e.rec.runs())
        st.schedules.runs[r.proc_id()] = name;
      spdlog::info("schedule {}: fire time {} submitted procedure {}{}", name, utc_text(fire_ms),
                   id, manual ? " (triggered by an operator)" : "");
      report_schedule_progress(self, name);
      done(id, "");
    },
    [self, name, rec, fire_ms, manual](journal_batch& b, uint64_t id) {
      auto* run = rec->add_runs();
      run->set_fire_ms(fire_ms);
      run->set_proc_id(id);
      run->set_manual(manual);
      while (static_cast<size_t>(rec->runs_size()) > recent_runs)
        rec->mutable_runs()->erase(rec->mutable_runs()->begin());
      if (manual)
        rec->set_triggered(rec->triggered() + 1);  // not a fire time: counted apart
      else
        rec->set_fired(rec->fired() + 1);
      rec->set_at_ms(wall_ms());
      pb::JournalRecord jr;
      *jr.mutable_schedule() = *rec;
      b.entries.push_back(make_entry(journal_keys::meta_root, jr));
      auto old = self->state.schedules.by_name[name].lsn;
      if (old != 0)
        b.deletes.push_back({journal_keys::meta_root, old, old + 1, 0});
    },
    // A cluster schedule's fire times go with its slot (an operator's trigger is this node's).
    rec->from_cluster() && !manual ? schedule_key(name) : std::string{});
}

namespace {

/// Submits the fire time schedule `name` holds (buffer-one) if its previous run has ended.
void fire_held(executor_actor* self, const std::string& name) {
  schedule_op(self, [self, name] {
    auto& st = self->state;
    auto it = st.schedules.by_name.find(name);
    if (it == st.schedules.by_name.end() || it->second.rec.buffered_ms() == 0
        || it->second.rec.paused() || it->second.rec.deleted()
        || previous_running(st, it->second.rec) || !schedule_fires_here(self, it->second))
      return schedule_op_done(self);
    fire_schedule(self, name, it->second.rec.buffered_ms(), false, true,
                  [self](uint64_t, const std::string&) { schedule_op_done(self); });
  });
}

}  // namespace

void schedule_run_ended(executor_actor* self, uint64_t id) {
  auto& st = self->state;
  auto r = st.schedules.runs.find(id);
  if (r != st.schedules.runs.end())
    fire_held(self, r->second);
}

void recover_schedule(executor_actor* self, const recovered_schedule& s) {
  auto& st = self->state;
  auto& e = st.schedules.by_name[s.rec.name()];
  e.lsn = s.lsn;
  e.rec = s.rec;
  // A cluster schedule waits for the group (and its slot's nonces) before it fires here.
  e.fires_here = !s.rec.from_cluster();
  if (!s.rec.deleted()) {
    if (auto why = read_schedule_spec(e); !why.empty()) {
      spdlog::error("schedule {}: its journaled {}; it is paused", s.rec.name(), why);
      e.rec.set_paused(true);
    }
    for (const auto& r : s.rec.runs())
      st.schedules.runs[r.proc_id()] = s.rec.name();
  }
}

void catch_up_schedule(executor_actor* self, const std::string& name, const char* since,
                       std::function<void()> then) {
  auto& st = self->state;
  auto it = st.schedules.by_name.find(name);
  if (it == st.schedules.by_name.end() || it->second.rec.paused() || it->second.rec.deleted())
    return then();
  auto& e = it->second;
  auto now = wall_ms();
  auto window = e.rec.catch_up_window_ms() != 0 ? static_cast<int64_t>(e.rec.catch_up_window_ms())
                                                : default_window_ms;
  // The fire times nobody decided: those before the window are missed whatever the policy
  // (counted up to enumerate_bound); of those within it, the last catch_up_all_bound are
  // kept, oldest first.
  int64_t cursor = decided_until(e);
  uint64_t before = 0;
  bool uncounted = false;
  while (true) {
    auto t = calendar::cron_next(e.cron, e.zone, cursor);
    if (!t || *t >= now - window || *t > now)
      break;
    if (before == enumerate_bound) {
      uncounted = true;
      break;
    }
    ++before;
    cursor = *t;
  }
  cursor = std::max(cursor, std::min(now, now - window - 1));
  std::deque<int64_t> last;
  uint64_t in_window = 0;
  while (true) {
    auto t = calendar::cron_next(e.cron, e.zone, cursor);
    if (!t || *t + jitter_of(e.rec, *t) > now)
      break;
    ++in_window;
    last.push_back(*t);
    if (last.size() > catch_up_all_bound)
      last.pop_front();
    cursor = *t;
  }
  if (before + in_window == 0)
    return then();
  size_t run = 0;
  switch (e.rec.catch_up()) {
    case pb::Schedule::CATCH_UP_NONE:
      break;
    case pb::Schedule::CATCH_UP_ALL:
      run = last.size();
      break;
    default:
      run = std::min<size_t>(last.size(), 1);
      break;
  }
  uint64_t missed = before + in_window - run;
  auto rec = e.rec;
  rec.set_missed(rec.missed() + missed);
  // The fire times to run stay undecided (the ticks run them as due, by the overlap policy);
  // every one before them is decided.
  rec.set_decided_until_ms(run > 0 ? last[last.size() - run] - 1 : cursor);
  spdlog::warn("schedule {}: {}{} fire time(s) came {}; catch-up {}: {} run now, {} missed", name,
               uncounted ? "more than " : "", before + in_window, since,
               e.rec.catch_up() == pb::Schedule::CATCH_UP_ALL    ? "all"
               : e.rec.catch_up() == pb::Schedule::CATCH_UP_NONE ? "none"
                                                                 : "one",
               run, missed);
  if (missed == 0 && rec.decided_until_ms() <= e.rec.decided_until_ms())
    return then();
  rec.set_decided_until_ms(std::max(rec.decided_until_ms(), e.rec.decided_until_ms()));
  write_record(self, name, std::move(rec), std::move(then));
}

void schedules_recovered(executor_actor* self) {
  auto& st = self->state;
  // A cluster schedule catches up once this node holds its slot (schedules_placement_changed).
  for (const auto& [name, e] : st.schedules.by_name)
    if (!e.rec.paused() && !e.rec.deleted() && !e.rec.from_cluster())
      schedule_op(self, [self, name = name] {
        catch_up_schedule(self, name, "while the node was down",
                          [self] { schedule_op_done(self); });
      });
  // A fire time held behind a run that ended while the node was down goes now.
  for (const auto& [name, e] : st.schedules.by_name)
    if (e.rec.buffered_ms() != 0 && !e.rec.deleted())
      fire_held(self, name);
  st.schedules.live = true;
  schedules_placement_changed(self);
  on_schedule_tick(self);
}

}  // namespace proctor::exec_detail
