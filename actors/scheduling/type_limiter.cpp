#include "actors/scheduling/type_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace proctor {

std::string period_text(std::chrono::milliseconds per) {
  auto ms = per.count();
  if (ms % 3'600'000 == 0)
    return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0)
    return std::to_string(ms / 60'000) + "m";
  if (ms % 1'000 == 0)
    return std::to_string(ms / 1'000) + "s";
  return std::to_string(ms) + "ms";
}

std::string type_limiter::describe(const type_limits& l) {
  std::string out;
  if (l.max_running > 0)
    out = "at most " + std::to_string(l.max_running) + " running";
  if (l.rate > 0)
    out += (out.empty() ? "" : ", ") + std::to_string(l.rate) + " starts per " + period_text(l.per);
  return out.empty() ? "no limits" : out;
}

std::string type_limiter::describe_of(const std::string& type) const {
  auto i = types_.find(type);
  return describe(i == types_.end() ? type_limits{} : i->second.effective());
}

void type_limiter::declare(const std::string& type, type_limits code) {
  auto& e = types_[type];
  e.code = code;
  e.tokens = code.rate;
}

void type_limiter::override_limits(const std::string& type, std::optional<type_limits> limits,
                                   int64_t at_ms, clock::time_point now) {
  auto& e = types_[type];
  refill(e, now);
  auto before = e.effective();
  e.op = limits;
  e.set_at_ms = limits ? at_ms : 0;
  const auto& after = e.effective();
  // A rate that was not there starts with a full bucket; a changed one keeps the tokens
  // left, up to its new burst.
  if (before.rate == 0)
    e.tokens = after.rate;
  e.tokens = std::min(e.tokens, static_cast<double>(after.rate));
  e.refilled = now;
}

bool type_limiter::limited(const std::string& type) const {
  auto i = types_.find(type);
  return i != types_.end() && i->second.effective().any();
}

void type_limiter::refill(entry& e, clock::time_point now) {
  const auto& l = e.effective();
  if (l.rate == 0 || l.per.count() <= 0) {
    e.refilled = now;
    return;
  }
  if (e.refilled == clock::time_point{}) {
    e.refilled = now;
    return;
  }
  auto elapsed = std::chrono::duration<double, std::milli>(now - e.refilled).count();
  if (elapsed <= 0)
    return;
  e.tokens = std::min(static_cast<double>(l.rate),
                      e.tokens + elapsed * l.rate / static_cast<double>(l.per.count()));
  e.refilled = now;
}

type_limiter::clock::time_point type_limiter::token_due(const entry& e, clock::time_point now) {
  const auto& l = e.effective();
  auto wait_ms = (1 - e.tokens) * static_cast<double>(l.per.count()) / l.rate;
  return now + std::chrono::microseconds(static_cast<int64_t>(std::ceil(wait_ms * 1000)));
}

type_limiter::verdict type_limiter::admit(const std::string& type, bool start,
                                          clock::time_point now) {
  auto i = types_.find(type);
  if (i == types_.end())
    return {true, {}, {}};
  auto& e = i->second;
  const auto& l = e.effective();
  if (l.max_running > 0 && e.running >= l.max_running)
    return {false,
            "type limit " + type + ": " + std::to_string(e.running) + " of "
              + std::to_string(l.max_running) + " running",
            {}};
  if (start && l.rate > 0) {
    refill(e, now);
    if (e.tokens < 1)
      return {false,
              "type rate " + type + ": " + std::to_string(l.rate) + " starts per "
                + period_text(l.per),
              token_due(e, now)};
    e.tokens -= 1;
  }
  ++e.running;
  return {true, {}, {}};
}

void type_limiter::ended(const std::string& type) {
  auto i = types_.find(type);
  if (i != types_.end() && i->second.running > 0)
    --i->second.running;
}

void type_limiter::refund(const std::string& type, bool start) {
  auto i = types_.find(type);
  if (i == types_.end())
    return;
  auto& e = i->second;
  if (e.running > 0)
    --e.running;
  if (start && e.effective().rate > 0)
    e.tokens = std::min(static_cast<double>(e.effective().rate), e.tokens + 1);
}

std::pair<size_t, size_t> type_limiter::room(const std::string& type, size_t steps, size_t starts,
                                             clock::time_point now) {
  auto i = types_.find(type);
  if (i == types_.end())
    return {steps, starts};
  auto& e = i->second;
  const auto& l = e.effective();
  size_t slots = std::numeric_limits<size_t>::max();
  if (l.max_running > 0)
    slots = l.max_running > e.running ? l.max_running - e.running : 0;
  size_t s = std::min(steps, slots);
  size_t left = slots - s;
  size_t t = std::min(starts, left);
  if (l.rate > 0) {
    refill(e, now);
    t = std::min(t, static_cast<size_t>(std::max(0.0, std::floor(e.tokens))));
  }
  return {s, t};
}

std::optional<type_limiter::clock::time_point> type_limiter::next_token(const std::string& type,
                                                                        clock::time_point now) {
  auto i = types_.find(type);
  if (i == types_.end() || i->second.effective().rate == 0)
    return std::nullopt;
  auto& e = i->second;
  refill(e, now);
  if (e.tokens >= 1)
    return std::nullopt;
  return token_due(e, now);
}

void type_limiter::throttled(const std::string& type) {
  ++types_[type].throttled;
}

std::vector<type_limit_view> type_limiter::views() const {
  std::vector<type_limit_view> out;
  for (const auto& [name, e] : types_) {
    type_limit_view v;
    v.type = name;
    v.code = e.code;
    v.operator_set = e.op;
    v.set_at_ms = e.set_at_ms;
    v.effective = e.effective();
    v.running = e.running;
    v.throttled = e.throttled;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace proctor
