// `proctor schedule`: recurring schedules' add, pause, resume, delete, trigger (run now),
// list and show (docs/flow-control.md, "Recurring schedules"). Every change is journaled
// (a Schedule record in the node's own range, with a delete of the schedule's last) before it
// is answered, in the order changes and firings came (schedule_op); a refused request changes
// nothing. Firing is executor_schedule_firing.cpp; in a cluster group a change goes through the
// group first (executor_schedules_cluster.cpp).
#include <regex>

#include <spdlog/spdlog.h>

#include "actors/executor/internal/executor_state.hpp"
#include "persistence/keys.hpp"

namespace proctor::exec_detail {

namespace {

constexpr size_t name_bound = 128;
constexpr uint64_t window_bound_ms = uint64_t{30} * 24 * 3'600'000;  // 30 days
constexpr uint64_t jitter_bound_ms = uint64_t{24} * 3'600'000;       // 1 day

void fill_info(executor_actor* self, const schedules_part::schedule_entry& e, pb::ScheduleInfo* x) {
  auto& st = self->state;
  *x->mutable_schedule() = e.rec;
  x->set_next_fire_ms(next_fire_ms(e));
  for (const auto& r : e.rec.runs()) {
    auto* y = x->add_runs();
    y->set_fire_ms(r.fire_ms());
    y->set_proc_id(r.proc_id());
    y->set_manual(r.manual());
    if (auto p = st.procs.find(r.proc_id()); p != st.procs.end()) {
      y->set_state(to_pb(p->second.state));
      y->set_ended(p->second.ended);
    } else {
      y->set_ended(true);  // released: it ended
    }
  }
}

/// The answer: the schedule `name` (or every one, if empty); `id` for a trigger.
std::string answer(executor_actor* self, const std::string& name, uint64_t id = 0,
                   std::string text = {}) {
  pb::Response r;
  r.set_id(id);
  r.set_text(std::move(text));
  for (const auto& [n, e] : self->state.schedules.by_name)
    if (!e.rec.deleted() && (name.empty() || n == name))
      fill_info(self, e, r.add_schedules());
  return encode(r);
}

/// "" if `spec` may be added as a new schedule, else why not (with its code).
std::string refusal(executor_actor* self, const pb::Schedule& spec, pb::Response::Code* code) {
  auto& st = self->state;
  *code = pb::Response::BAD_REQUEST;
  static const std::regex name_re{"[A-Za-z0-9][A-Za-z0-9._-]*"};
  if (spec.name().empty() || spec.name().size() > name_bound
      || !std::regex_match(spec.name(), name_re))
    return "schedule name '" + spec.name()
           + "': 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit";
  if (auto i = st.schedules.by_name.find(spec.name());
      i != st.schedules.by_name.end() && !i->second.rec.deleted()) {
    *code = pb::Response::REFUSED;
    return "schedule '" + spec.name() + "' exists already; delete it first to replace it";
  }
  auto p = calendar::parse_cron(spec.cron());
  if (!p.spec)
    return p.error;
  auto z = calendar::find_zone(spec.zone());
  if (!z.zone)
    return z.error;
  if (!calendar::cron_next(*p.spec, *z.zone, wall_ms()))
    return "cron \"" + spec.cron() + "\" never fires (no such date in the next 8 years)";
  if (!pb::Schedule::Overlap_IsValid(spec.overlap())
      || !pb::Schedule::CatchUp_IsValid(spec.catch_up()))
    return "unknown overlap or catch-up policy";
  if (spec.catch_up_window_ms() > window_bound_ms)
    return "catch-up window over 30 days";
  if (spec.jitter_ms() > jitter_bound_ms)
    return "jitter over 1 day";
  if (spec.args_json().size() > st.cfg.max_args_bytes)
    return "args JSON is " + std::to_string(spec.args_json().size())
           + " bytes, more than the limit of " + std::to_string(st.cfg.max_args_bytes);
  const auto* t = st.env->types->find(spec.type());
  if (t == nullptr) {
    *code = pb::Response::UNKNOWN_TYPE;
    return st.env->types->unknown_type_error(spec.type());
  }
  if (t->child_only)
    return "type '" + t->name + "' is child-only: only a parent procedure can spawn it";
  std::string err;
  if (!st.env->types->make_from_json(spec.type(), spec.args_json(), &err))
    return err;
  return "";
}

/// Writes schedule `rec` (its last record deleted in the same batch), then answers.
void change(executor_actor* self, pb::Schedule rec, promise_t rp, std::string text) {
  auto name = rec.name();
  rec.set_at_ms(wall_ms());
  pb::JournalRecord jr;
  *jr.mutable_schedule() = rec;
  journal_batch b;
  b.entries.push_back(make_entry(journal_keys::meta_root, jr));
  auto& e = self->state.schedules.by_name[name];
  if (e.lsn != 0)
    b.deletes.push_back({journal_keys::meta_root, e.lsn, e.lsn + 1, 0});
  append(self, std::move(b), [self, rec, rp, name, text](uint64_t lsn) mutable {
    auto& st = self->state;
    auto& e = st.schedules.by_name[name];
    if (e.rec.created_at_ms() != rec.created_at_ms())
      e.cluster_until = e.reported_until = 0;  // another schedule of the name
    e.lsn = lsn;
    e.rec = rec;
    if (!rec.deleted()) {
      read_schedule_spec(e);  // read already: by an add's refusal(), a resume's check
    } else {
      for (auto i = st.schedules.runs.begin(); i != st.schedules.runs.end();)
        i = i->second == name ? st.schedules.runs.erase(i) : std::next(i);
    }
    spdlog::info("schedule {}: {}{}", name, text, rec.from_cluster() ? " in the cluster" : "");
    if (rec.from_cluster())
      schedules_placement_changed(self);  // who fires it
    reply(rp, answer(self, name, 0, text));
    schedule_op_done(self);
  });
}

/// Writes schedule `rec` and answers; a cluster schedule's change (`cluster`) is the group's
/// first: refused there, nothing changes here.
void commit(executor_actor* self, pb::Schedule rec, promise_t rp, std::string text, bool cluster) {
  if (!cluster)
    return change(self, std::move(rec), std::move(rp), std::move(text));
  auto name = rec.name();
  propose_schedule(
    self, rec,
    [self, rec, rp, text, name](pb::Response::Code code, const std::string& why) mutable {
      if (code == pb::Response::OK)
        return change(self, std::move(rec), std::move(rp), std::move(text));
      reply(rp, error_reply(code, "schedule '" + name
                                    + "': the cluster group did not take the "
                                      "change ("
                                    + why + "): nothing changed; retry"));
      schedule_op_done(self);
    });
}

}  // namespace

void handle_schedule(executor_actor* self, const pb::ScheduleRequest& req, promise_t rp) {
  auto& st = self->state;
  auto name = req.op() == pb::ScheduleRequest::ADD ? req.spec().name() : req.name();
  if (req.op() == pb::ScheduleRequest::LIST)
    return reply(rp, answer(self, ""));
  if (req.op() == pb::ScheduleRequest::ADD) {
    pb::Response::Code code;
    if (auto why = refusal(self, req.spec(), &code); !why.empty())
      return reply(rp, error_reply(code, why));
  } else {
    auto i = st.schedules.by_name.find(name);
    if (name.empty() || i == st.schedules.by_name.end() || i->second.rec.deleted())
      return reply(rp, error_reply(pb::Response::NOT_FOUND, "no schedule '" + name + "'"));
    if (req.op() == pb::ScheduleRequest::SHOW)
      return reply(rp, answer(self, name));
  }
  // In order with the firings and the other changes: each reads what the one before wrote.
  schedule_op(self, [self, req, rp, name]() mutable {
    auto& st = self->state;
    auto i = st.schedules.by_name.find(name);
    bool exists = i != st.schedules.by_name.end() && !i->second.rec.deleted();
    // In a cluster group a new schedule is the cluster's; one added before the node took part
    // stays its own (docs/cluster-group.md, "Schedules").
    const bool cluster =
      in_cluster_group(self)
      && (req.op() == pb::ScheduleRequest::ADD || (exists && i->second.rec.from_cluster()));
    if (req.op() == pb::ScheduleRequest::ADD) {
      if (exists) {
        reply(rp, error_reply(pb::Response::REFUSED,
                              "schedule '" + name + "' exists already; delete it first"));
        return schedule_op_done(self);
      }
      pb::Schedule rec = req.spec();
      rec.clear_runs();
      rec.set_deleted(false);
      rec.set_created_at_ms(wall_ms());
      rec.set_decided_until_ms(rec.created_at_ms());
      rec.set_buffered_ms(0);
      rec.set_fired(0);
      rec.set_skipped(0);
      rec.set_missed(0);
      if (rec.zone().empty())
        rec.set_zone("UTC");
      rec.set_from_cluster(cluster);
      return commit(self, std::move(rec), rp,
                    std::string("added") + (req.spec().paused() ? " (paused)" : ""), cluster);
    }
    if (!exists) {  // deleted by a change queued before this one
      reply(rp, error_reply(pb::Response::NOT_FOUND, "no schedule '" + name + "'"));
      return schedule_op_done(self);
    }
    auto rec = i->second.rec;
    switch (req.op()) {
      case pb::ScheduleRequest::PAUSE:
        if (rec.paused()) {
          reply(rp, answer(self, name, 0, "paused already"));
          return schedule_op_done(self);
        }
        rec.set_paused(true);
        rec.set_buffered_ms(0);
        return commit(self, std::move(rec), rp, "paused", cluster);
      case pb::ScheduleRequest::RESUME:
        if (!rec.paused()) {
          reply(rp, answer(self, name, 0, "not paused"));
          return schedule_op_done(self);
        }
        if (auto why = read_schedule_spec(i->second); !why.empty()) {
          // A journaled cron or zone this binary cannot read (recovery paused it): keep it
          // paused.
          reply(rp, error_reply(pb::Response::REFUSED, "schedule '" + name + "': " + why
                                                         + "; delete it and add it again"));
          return schedule_op_done(self);
        }
        // The fire times while it was paused are skipped, not caught up.
        rec.set_paused(false);
        rec.set_decided_until_ms(std::max(rec.decided_until_ms(), wall_ms()));
        return commit(self, std::move(rec), rp, "resumed", cluster);
      case pb::ScheduleRequest::DELETE: {
        pb::Schedule tomb;
        tomb.set_name(name);
        tomb.set_deleted(true);
        tomb.set_from_cluster(cluster);
        return commit(self, std::move(tomb), rp, "deleted", cluster);
      }
      case pb::ScheduleRequest::TRIGGER:
        return fire_schedule(
          self, name, wall_ms(), true, false,
          [self, rp, name](uint64_t id, const std::string& why) mutable {
            if (id == 0)
              reply(rp, error_reply(pb::Response::REFUSED, "schedule '" + name + "': " + why));
            else
              reply(rp, answer(self, name, id, "triggered: procedure " + std::to_string(id)));
            schedule_op_done(self);
          });
      default:
        reply(rp, error_reply(pb::Response::BAD_REQUEST, "unknown schedule operation"));
        return schedule_op_done(self);
    }
  });
}

}  // namespace proctor::exec_detail
