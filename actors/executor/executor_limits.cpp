// `proctor limits`: each type's limits and load, and an operator's changes of them
// (docs/flow-control.md). A change is journaled (TypeLimits, in the node's own range, with a
// delete of the type's previous record) before the scheduler applies it and before it is
// answered; recovery reads the last record of each type back (actors/node/node.cpp).
// In a cluster group a change is the cluster's: it is proposed to the group first (answered
// once the group holds it, or refused, changing nothing), and every node journals and
// enforces the limits the group holds as it learns them (on_cluster_limits).
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"
#include "actors/base/task_spec.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "persistence/keys.hpp"

namespace proctor {

recovered_limit limit_of(uint64_t lsn, const pb::TypeLimits& rec) {
  recovered_limit out;
  out.lsn = lsn;
  out.at_ms = rec.at_ms();
  out.from_cluster = rec.from_cluster();
  if (!rec.cleared()) {
    type_limits l;
    l.max_running = rec.max_running();
    l.rate = rec.rate();
    l.per = std::chrono::milliseconds{rec.per_ms() > 0 ? static_cast<int64_t>(rec.per_ms()) : 1000};
    out.limits = l;
  }
  return out;
}

namespace exec_detail {

namespace {

// Bounds of what an operator may set: past them a number is a typo, not a limit.
constexpr uint32_t max_running_bound = 1'000'000;
constexpr uint32_t rate_bound = 1'000'000'000;
constexpr uint64_t per_bound_ms = uint64_t{30} * 24 * 3'600'000;  // 30 days

void fill(const type_limit_view& v, pb::TypeLimitInfo* x) {
  x->set_type(v.type);
  x->set_max_running(v.effective.max_running);
  x->set_rate(v.effective.rate);
  x->set_per_ms(static_cast<uint64_t>(v.effective.per.count()));
  x->set_operator_set(v.operator_set.has_value());
  x->set_set_at_ms(v.set_at_ms);
  x->set_code_max_running(v.code.max_running);
  x->set_code_rate(v.code.rate);
  x->set_code_per_ms(static_cast<uint64_t>(v.code.per.count()));
  x->set_running(v.running);
  x->set_waiting(v.waiting);
  x->set_throttled(v.throttled);
}

/// Answers with every type's limits, as the scheduler has them now.
void reply_list(executor_actor* self, promise_t rp) {
  self->request(self->state.env->scheduler, std::chrono::seconds{10}, limits_atom::value)
    .then(
      [self, rp](std::vector<type_limit_view>& views) mutable {
        pb::Response r;
        for (const auto& v : views)
          fill(v, r.add_limits());
        fill_queue_limits(self, r);  // then the task queues' (executor_task_limits.cpp)
        reply(rp, encode(r));
      },
      [self, rp](caf::error& e) mutable {
        reply(rp, error_reply(pb::Response::INTERNAL,
                              "scheduler did not answer: " + error_text(self->system(), e)));
      });
}

/// "" if `req` is a change this node can make, else why not.
std::string refusal(executor_actor* self, const pb::LimitsRequest& req) {
  bool fields = req.has_max_running() || req.has_rate() || req.has_per_ms();
  if (req.type().empty())
    return req.clear() || fields ? "a change of limits names its procedure type" : "";
  if (is_queue_limit_name(req.type())) {
    // A task queue's (docs/workers.md, "Limits"): max_running bounds its leases at once.
    if (auto why = task_queue_refusal(task_queue_of(req.type())); !why.empty())
      return why;
  } else if (self->state.env->types->find(req.type()) == nullptr) {
    return self->state.env->types->unknown_type_error(req.type());
  }
  if (req.clear() && fields)
    return "clear takes the type back to its code's limits: it takes no other value";
  if (!req.clear() && !fields)
    return "limits set " + req.type() + ": give max_running, rate (and per), or clear";
  if (req.has_max_running() && req.max_running() > max_running_bound)
    return "max_running " + std::to_string(req.max_running()) + " is over "
           + std::to_string(max_running_bound) + " (0: no limit)";
  if (req.has_rate() && req.rate() > rate_bound)
    return "rate " + std::to_string(req.rate()) + " is over " + std::to_string(rate_bound)
           + " (0: no limit)";
  if (req.has_per_ms() && (req.per_ms() == 0 || req.per_ms() > per_bound_ms))
    return "per " + std::to_string(req.per_ms()) + " ms: a period from 1 ms to 30 days";
  return "";
}

void next_change(executor_actor* self);

void change_done(executor_actor* self) {
  self->state.limits.change_busy = false;
  next_change(self);
}

/// Journals `now` (nullopt: cleared) for `type`, then hands it to the scheduler and answers
/// with the list (if `rp` waits).
void journal_change(executor_actor* self, const std::string& type, std::optional<type_limits> now,
                    bool from_cluster, promise_t rp) {
  auto& st = self->state;
  auto old = st.limits.records.find(type);
  auto at = wall_ms();
  pb::JournalRecord rec;
  auto* x = rec.mutable_type_limits();
  x->set_type(type);
  x->set_cleared(!now);
  if (now) {
    x->set_max_running(now->max_running);
    x->set_rate(now->rate);
    x->set_per_ms(static_cast<uint64_t>(now->per.count()));
  }
  x->set_at_ms(at);
  x->set_from_cluster(from_cluster);
  journal_batch b;
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  if (old != st.limits.records.end() && old->second.lsn != 0)
    b.deletes.push_back({journal_keys::meta_root, old->second.lsn, old->second.lsn + 1, 0});
  append(self, std::move(b), [self, type, now, at, from_cluster, rp](uint64_t lsn) mutable {
    auto& st = self->state;
    st.limits.records[type] = recovered_limit{lsn, now, at, from_cluster};
    if (is_queue_limit_name(type)) {
      spdlog::info("task queue {}: limits {} by an operator{}: {}", task_queue_of(type),
                   now ? "set" : "cleared", from_cluster ? " for the cluster" : "",
                   type_limiter::describe(now ? *now : type_limits{}));
      set_queue_limit(self, task_queue_of(type), now, at);
      if (rp.pending())
        reply_list(self, rp);
      return change_done(self);
    }
    const auto* t = st.env->types->find(type);
    bool any = now ? now->any() : t->limits.any();
    if (auto f = st.env->limited_types.find(type); f != st.env->limited_types.end())
      f->second.store(any);
    spdlog::info("type {}: limits {} by an operator{}: {}", type, now ? "set" : "cleared",
                 from_cluster ? " for the cluster" : "",
                 type_limiter::describe(now ? *now : t->limits));
    // The scheduler's mailbox orders the change before the list asked for below.
    self->send(st.env->scheduler, limits_set_atom::value, type_limit_change{type, now, at});
    if (rp.pending())
      reply_list(self, rp);
    change_done(self);
  });
}

void apply_change(executor_actor* self, limits_part::change c) {
  auto& st = self->state;
  const auto& req = c.req;
  const auto* t = st.env->types->find(req.type());  // null for a task queue
  auto old = st.limits.records.find(req.type());
  std::optional<type_limits> now;
  if (!req.clear()) {
    type_limits l = old != st.limits.records.end() && old->second.limits ? *old->second.limits
                    : t != nullptr                                       ? t->limits
                                                                         : type_limits{};
    if (req.has_max_running())
      l.max_running = req.max_running();
    if (req.has_rate())
      l.rate = req.rate();
    if (req.has_per_ms())
      l.per = std::chrono::milliseconds{static_cast<int64_t>(req.per_ms())};
    now = l;
  }
  if (c.from_cluster || !in_cluster_group(self))
    return journal_change(self, req.type(), now, c.from_cluster, std::move(c.rp));
  // The cluster's: the group holds it first (every node then applies it, this one at once).
  pb::Request p;
  p.mutable_cluster()->set_op(pb::ClusterRequest::PROPOSE);
  auto* l = p.mutable_cluster()->mutable_command()->mutable_set_limit()->mutable_limit();
  l->set_type(req.type());
  l->set_cleared(!now);
  if (now) {
    l->set_max_running(now->max_running);
    l->set_rate(now->rate);
    l->set_per_ms(static_cast<uint64_t>(now->per.count()));
  }
  auto refuse = [self](promise_t& rp, pb::Response::Code code, const std::string& why) {
    reply(rp, error_reply(code, "the cluster group did not take the change (" + why
                                  + "): nothing changed; retry"));
    change_done(self);
  };
  self
    ->request(st.env->cluster_member, std::chrono::seconds{30}, rpc_atom::value,
              p.SerializeAsString())
    .then(
      [self, type = req.type(), now, rp = c.rp, refuse](std::string& bytes) mutable {
        pb::Response r;
        if (!r.ParseFromString(bytes))
          return refuse(rp, pb::Response::INTERNAL, "an answer that does not parse");
        if (r.code() != pb::Response::OK)
          return refuse(rp,
                        r.code() == pb::Response::REFUSED ? pb::Response::REFUSED
                                                          : pb::Response::UNREACHABLE,
                        r.error());
        journal_change(self, type, now, true, std::move(rp));
      },
      [self, rp = c.rp](caf::error& e) mutable {
        // Asked, and no answer: the group may still take it (then every node applies it).
        reply(rp, error_reply(pb::Response::UNREACHABLE,
                              "the cluster group did not answer within 30 s ("
                                + error_text(self->system(), e)
                                + "): it may still take the change, and then every node "
                                  "applies it; `proctor limits` shows what holds"));
        change_done(self);
      });
}

void next_change(executor_actor* self) {
  auto& st = self->state;
  if (st.limits.change_busy || st.limits.changes.empty())
    return;
  st.limits.change_busy = true;
  auto c = std::move(st.limits.changes.front());
  st.limits.changes.pop_front();
  apply_change(self, std::move(c));
}

}  // namespace

void handle_limits(executor_actor* self, const pb::LimitsRequest& req, promise_t rp) {
  if (auto why = refusal(self, req); !why.empty()) {
    auto code = !req.type().empty() && !is_queue_limit_name(req.type())
                    && self->state.env->types->find(req.type()) == nullptr
                  ? pb::Response::NOT_FOUND
                  : pb::Response::BAD_REQUEST;
    return reply(rp, error_reply(code, why));
  }
  if (req.type().empty())
    return reply_list(self, rp);
  self->state.limits.changes.push_back({req, std::move(rp), false});
  next_change(self);
}

void on_cluster_limits(executor_actor* self, const std::vector<cluster_limit>& limits) {
  auto& st = self->state;
  std::set<std::string> held;
  for (const auto& l : limits) {
    held.insert(l.type);
    if (!is_queue_limit_name(l.type) && st.env->types->find(l.type) == nullptr) {
      spdlog::warn("type {}: the cluster holds limits for it, but no such type is registered in "
                   "this binary",
                   l.type);
      continue;
    }
    type_limits want;
    want.max_running = l.max_running;
    want.rate = l.rate;
    want.per = std::chrono::milliseconds{l.per_ms > 0 ? static_cast<int64_t>(l.per_ms) : 1000};
    auto r = st.limits.records.find(l.type);
    if (r != st.limits.records.end() && r->second.from_cluster && r->second.limits == want)
      continue;
    pb::LimitsRequest req;
    req.set_type(l.type);
    req.set_max_running(want.max_running);
    req.set_rate(want.rate);
    req.set_per_ms(static_cast<uint64_t>(want.per.count()));
    st.limits.changes.push_back({req, promise_t{}, true});
  }
  // Limits the group held and dropped (cleared on another node): back to the code's.
  for (const auto& [type, r] : st.limits.records) {
    if (!r.from_cluster || !r.limits || held.count(type) != 0)
      continue;
    pb::LimitsRequest req;
    req.set_type(type);
    req.set_clear(true);
    st.limits.changes.push_back({req, promise_t{}, true});
  }
  next_change(self);
}

}  // namespace exec_detail
}  // namespace proctor
