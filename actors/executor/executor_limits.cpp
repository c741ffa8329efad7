// `proctor limits`: each type's limits and load, and an operator's changes of them
// (docs/flow-control.md). A change is journaled (TypeLimits, in the node's own range, with a
// delete of the type's previous record) before the scheduler applies it and before it is
// answered; recovery reads the last record of each type back (actors/node/node.cpp).
#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/executor/internal/executor_state.hpp"
#include "persistence/keys.hpp"

namespace proctor {

recovered_limit limit_of(uint64_t lsn, const pb::TypeLimits& rec) {
  recovered_limit out;
  out.lsn = lsn;
  out.at_ms = rec.at_ms();
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
      [rp](std::vector<type_limit_view>& views) mutable {
        pb::Response r;
        for (const auto& v : views)
          fill(v, r.add_limits());
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
  if (self->state.env->types->find(req.type()) == nullptr)
    return self->state.env->types->unknown_type_error(req.type());
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

void apply_change(executor_actor* self, pb::LimitsRequest req, promise_t rp) {
  auto& st = self->state;
  const auto* t = st.env->types->find(req.type());
  auto old = st.limits.records.find(req.type());
  std::optional<type_limits> now;
  if (!req.clear()) {
    type_limits l =
      old != st.limits.records.end() && old->second.limits ? *old->second.limits : t->limits;
    if (req.has_max_running())
      l.max_running = req.max_running();
    if (req.has_rate())
      l.rate = req.rate();
    if (req.has_per_ms())
      l.per = std::chrono::milliseconds{static_cast<int64_t>(req.per_ms())};
    now = l;
  }
  auto at = wall_ms();
  pb::JournalRecord rec;
  auto* x = rec.mutable_type_limits();
  x->set_type(req.type());
  x->set_cleared(!now);
  if (now) {
    x->set_max_running(now->max_running);
    x->set_rate(now->rate);
    x->set_per_ms(static_cast<uint64_t>(now->per.count()));
  }
  x->set_at_ms(at);
  journal_batch b;
  b.entries.push_back(make_entry(journal_keys::meta_root, rec));
  if (old != st.limits.records.end() && old->second.lsn != 0)
    b.deletes.push_back({journal_keys::meta_root, old->second.lsn, old->second.lsn + 1, 0});
  append(self, std::move(b), [self, type = req.type(), now, at, rp](uint64_t lsn) mutable {
    auto& st = self->state;
    st.limits.records[type] = recovered_limit{lsn, now, at};
    const auto* t = st.env->types->find(type);
    bool any = now ? now->any() : t->limits.any();
    if (auto f = st.env->limited_types.find(type); f != st.env->limited_types.end())
      f->second.store(any);
    spdlog::info("type {}: limits {} by an operator: {}", type, now ? "set" : "cleared",
                 type_limiter::describe(now ? *now : t->limits));
    // The scheduler's mailbox orders the change before the list asked for below.
    self->send(st.env->scheduler, limits_set_atom::value, type_limit_change{type, now, at});
    reply_list(self, rp);
    st.limits.change_busy = false;
    next_change(self);
  });
}

void next_change(executor_actor* self) {
  auto& st = self->state;
  if (st.limits.change_busy || st.limits.changes.empty())
    return;
  st.limits.change_busy = true;
  auto [req, rp] = std::move(st.limits.changes.front());
  st.limits.changes.pop_front();
  apply_change(self, std::move(req), std::move(rp));
}

}  // namespace

void handle_limits(executor_actor* self, const pb::LimitsRequest& req, promise_t rp) {
  if (auto why = refusal(self, req); !why.empty()) {
    auto code = !req.type().empty() && self->state.env->types->find(req.type()) == nullptr
                  ? pb::Response::NOT_FOUND
                  : pb::Response::BAD_REQUEST;
    return reply(rp, error_reply(code, why));
  }
  if (req.type().empty())
    return reply_list(self, rp);
  self->state.limits.changes.emplace_back(req, std::move(rp));
  next_change(self);
}

}  // namespace exec_detail
}  // namespace proctor
