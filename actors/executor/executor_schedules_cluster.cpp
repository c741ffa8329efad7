// The cluster's schedules (docs/cluster-group.md, "Schedules"). In a cluster group a
// schedule is the cluster's: its definition lives in the group (added, paused, resumed and
// deleted through it, on any node), every node journals it (Schedule.from_cluster), and it
// fires only on the node that owns the placement slot of its key ("schedule:<name>") and
// holds every nonce of that slot. Each fire time's root is placed by that key, so its nonce
// moves with the slot (executor_handoff.cpp): the node that takes a slot over knows every fire
// time the last owner submitted and submits none again; the owner tells the group how far it
// decided (ScheduleProgress), so that the next one goes on from there, and decides what came
// between by the schedule's catch-up policy, as after a restart.
#include <set>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/placement.hpp"
#include "actors/base/rpc.hpp"
#include "actors/executor/internal/executor_state.hpp"

namespace proctor::exec_detail {

namespace {

constexpr auto propose_bound = std::chrono::seconds{30};

/// True when `a` and `b` define the same schedule (name, cron, type, args, policies, paused).
bool same_definition(const pb::Schedule& a, const pb::Schedule& b) {
  return a.cron() == b.cron() && a.zone() == b.zone() && a.type() == b.type()
         && a.args_json() == b.args_json() && a.priority() == b.priority()
         && a.overlap() == b.overlap() && a.catch_up() == b.catch_up()
         && a.catch_up_window_ms() == b.catch_up_window_ms() && a.jitter_ms() == b.jitter_ms()
         && a.paused() == b.paused();
}

pb::Request propose(pb::ClusterCommand command) {
  pb::Request p;
  p.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  *p.mutable_cluster()->mutable_command() = std::move(command);
  return p;
}

/// Writes the records in `writes` one after the other (each a schedule's new record), then
/// `then`.
void write_all(executor_actor* self, std::shared_ptr<std::vector<pb::Schedule>> writes, size_t i,
               std::function<void()> then) {
  if (i == writes->size())
    return then();
  auto rec = (*writes)[i];
  auto name = rec.name();
  write_schedule_record(self, name, rec, [self, writes, i, name, then = std::move(then)]() mutable {
    auto& st = self->state;
    auto& e = st.schedules.by_name[name];
    if (e.rec.deleted()) {
      for (auto r = st.schedules.runs.begin(); r != st.schedules.runs.end();)
        r = r->second == name ? st.schedules.runs.erase(r) : std::next(r);
      spdlog::info("schedule {}: deleted in the cluster", name);
    } else if (auto why = read_schedule_spec(e); !why.empty()) {
      spdlog::error("schedule {}: the cluster's {}; it does not fire here", name, why);
    } else {
      spdlog::info("schedule {}: {} as the cluster holds it", name,
                   e.rec.paused() ? "paused" : "running");
    }
    write_all(self, writes, i + 1, std::move(then));
  });
}

/// Brings this node's records in line with the group's schedules last published.
void reconcile(executor_actor* self) {
  auto& st = self->state;
  st.schedules.reconcile_queued = false;
  pb::ClusterState cs;
  if (!cs.ParseFromString(st.schedules.cluster)) {
    spdlog::error("node {}: the cluster's schedules do not parse", st.env->node_name);
    return schedule_op_done(self);
  }
  auto writes = std::make_shared<std::vector<pb::Schedule>>();
  std::set<std::string> held;
  for (const auto& s : cs.schedules()) {
    held.insert(s.name());
    auto it = st.schedules.by_name.find(s.name());
    const bool same = it != st.schedules.by_name.end() && !it->second.rec.deleted()
                      && it->second.rec.from_cluster()
                      && it->second.rec.created_at_ms() == s.created_at_ms();
    if (same) {
      auto& e = it->second;
      e.cluster_until = std::max(e.cluster_until, s.decided_until_ms());
      if (same_definition(e.rec, s))
        continue;
      pb::Schedule rec = e.rec;  // its counters and runs are this node's
      rec.set_cron(s.cron());
      rec.set_zone(s.zone());
      rec.set_type(s.type());
      rec.set_args_json(s.args_json());
      rec.set_priority(s.priority());
      rec.set_overlap(s.overlap());
      rec.set_catch_up(s.catch_up());
      rec.set_catch_up_window_ms(s.catch_up_window_ms());
      rec.set_jitter_ms(s.jitter_ms());
      rec.set_paused(s.paused());
      if (s.paused())
        rec.set_buffered_ms(0);
      rec.set_decided_until_ms(std::max(rec.decided_until_ms(), s.decided_until_ms()));
      writes->push_back(std::move(rec));
      continue;
    }
    if (it != st.schedules.by_name.end() && !it->second.rec.deleted()
        && !it->second.rec.from_cluster())
      spdlog::warn("schedule {}: this node's own schedule of that name gives way to the "
                   "cluster's",
                   s.name());
    pb::Schedule rec = s;
    rec.set_from_cluster(true);
    auto& e = st.schedules.by_name[s.name()];
    e.cluster_until = s.decided_until_ms();
    e.reported_until = 0;
    writes->push_back(std::move(rec));
  }
  for (const auto& [name, e] : st.schedules.by_name) {
    if (!e.rec.from_cluster() || e.rec.deleted() || held.count(name) != 0)
      continue;
    pb::Schedule tomb;
    tomb.set_name(name);
    tomb.set_deleted(true);
    tomb.set_from_cluster(true);
    writes->push_back(std::move(tomb));
  }
  write_all(self, writes, 0, [self] {
    schedules_placement_changed(self);
    schedule_op_done(self);
  });
}

}  // namespace

std::string schedule_key(const std::string& name) {
  return "schedule:" + name;
}

bool schedule_fires_here(executor_actor* self, const schedules_part::schedule_entry& e) {
  if (!e.rec.from_cluster())
    return true;
  if (!in_cluster_group(self))
    return false;  // a cluster schedule fires nowhere the group was not heard
  const auto slot = placement::slot_of(schedule_key(e.rec.name()));
  return placement_now(self).owner(slot) == self->state.env->node_name
         && handoff_refusal(self, slot).empty();
}

void on_cluster_schedules(executor_actor* self, std::string bytes) {
  auto& st = self->state;
  st.schedules.cluster = std::move(bytes);
  if (st.schedules.reconcile_queued)
    return;  // the one queued reads the newest
  st.schedules.reconcile_queued = true;
  schedule_op(self, [self] { reconcile(self); });
}

void schedules_placement_changed(executor_actor* self) {
  auto& st = self->state;
  if (!st.schedules.live)
    return;  // recovery's end looks again
  for (auto& [name, e] : st.schedules.by_name) {
    if (!e.rec.from_cluster() || e.rec.deleted())
      continue;
    const bool now = schedule_fires_here(self, e);
    if (now == e.fires_here)
      continue;
    e.fires_here = now;
    spdlog::info("schedule {}: {}", name,
                 now ? "this node owns its slot now and fires it"
                     : "its slot moved to another node, which fires it from now on");
    if (now)
      schedule_op(self, [self, name = name] {
        catch_up_schedule(self, name, "before this node took it over",
                          [self] { schedule_op_done(self); });
      });
  }
  if (!st.schedules.busy)
    arm_schedule_tick(self);
}

void report_schedule_progress(executor_actor* self, const std::string& name) {
  auto& st = self->state;
  auto it = st.schedules.by_name.find(name);
  if (it == st.schedules.by_name.end() || !it->second.rec.from_cluster() || it->second.rec.deleted()
      || !in_cluster_group(self))
    return;
  auto& e = it->second;
  const auto until = e.rec.decided_until_ms();
  if (until <= std::max(e.reported_until, e.cluster_until))
    return;
  e.reported_until = until;
  pb::ClusterCommand c;
  auto* p = c.mutable_schedule_progress();
  p->set_name(name);
  p->set_created_at_ms(e.rec.created_at_ms());
  p->set_decided_until_ms(until);
  // Not waited for: the fire times are this node's as long as it owns the slot, and the
  // nonces a next owner takes over say what ran; a report lost is made good by the next.
  self
    ->request(st.env->cluster_member, propose_bound, rpc_atom::value,
              propose(std::move(c)).SerializeAsString())
    .then([](std::string&) {},
          [self, name](caf::error& e) {
            auto it = self->state.schedules.by_name.find(name);
            if (it != self->state.schedules.by_name.end())
              it->second.reported_until = 0;
            spdlog::debug("schedule {}: its progress did not reach the cluster group ({})", name,
                          error_text(self->system(), e));
          });
}

void propose_schedule(executor_actor* self, const pb::Schedule& rec,
                      std::function<void(pb::Response::Code, std::string)> done) {
  pb::ClusterCommand c;
  *c.mutable_set_schedule()->mutable_schedule() = rec;
  self
    ->request(self->state.env->cluster_member, propose_bound, rpc_atom::value,
              propose(std::move(c)).SerializeAsString())
    .then(
      [done](std::string& bytes) {
        pb::Response r;
        if (!r.ParseFromString(bytes))
          return done(pb::Response::INTERNAL,
                      "the cluster group answered what does not parse: nothing changed; retry");
        if (r.code() != pb::Response::OK)
          return done(r.code() == pb::Response::REFUSED ? pb::Response::REFUSED
                                                        : pb::Response::UNREACHABLE,
                      r.error());
        done(pb::Response::OK, "");
      },
      [self, done](caf::error& e) {
        done(pb::Response::UNREACHABLE,
             "the cluster group did not answer within 30 s (" + error_text(self->system(), e)
               + "): it may still take the change, and then every node applies it; `proctor "
                 "schedule list` shows what holds");
      });
}

}  // namespace proctor::exec_detail
