// Per-type limits (type_limits, docs/flow-control.md): how many steps of a type run at once
// and how fast its procedures start. The scheduler asks it before it gives a step of a
// limited type a run slot, and tells it when that step ended. It knows counts and tokens
// only; the steps it holds back are the scheduler's.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <proctor/policy.hpp>

namespace proctor {

/// One type's limits and load, as `proctor limits` shows them.
struct type_limit_view {
  std::string type;
  type_limits code;                         ///< as the type declares them (registry)
  std::optional<type_limits> operator_set;  ///< an operator's override (proctor limits set)
  int64_t set_at_ms = 0;                    ///< when the override was journaled
  type_limits effective;                    ///< the override, else the code's
  uint32_t running = 0;                     ///< steps of the type running now (forward steps)
  uint32_t waiting = 0;                     ///< steps held back by its limits now
  uint64_t throttled = 0;                   ///< steps held back at least once, since start
};

/// An operator's change of one type's limits (journaled first, then applied).
struct type_limit_change {
  std::string type;
  std::optional<type_limits> limits;  ///< nullopt: back to the code's
  int64_t at_ms = 0;
};

class type_limiter {
public:
  using clock = std::chrono::steady_clock;

  /// The limits `type` declares in code (registry); a type never declared has none.
  void declare(const std::string& type, type_limits code);

  /// An operator's override of `type`'s limits (nullopt: back to the code's).
  void override_limits(const std::string& type, std::optional<type_limits> limits, int64_t at_ms,
                       clock::time_point now);

  /// True if `type` has a limit in force (its steps must ask admit()).
  bool limited(const std::string& type) const;

  struct verdict {
    bool ok = false;
    std::string why;  ///< not ok: the procedure's waiting_for
    /// Not ok for want of a token: when the next one comes (the scheduler looks again).
    std::optional<clock::time_point> retry_at;
  };

  /// May a step of `type` (the procedure's first if `start`) run now? If so it is counted
  /// as running (and a start takes a token) until ended() or refund(). Steps of every
  /// declared type are counted, limited or not, so that a limit set on a live node starts
  /// from the true count.
  verdict admit(const std::string& type, bool start, clock::time_point now);

  /// A step admitted ended.
  void ended(const std::string& type);

  /// A step admitted did not run after all (it waits for a lock): its count and token back.
  void refund(const std::string& type, bool start);

  /// How many held-back steps of `type` could be admitted now: `steps` of procedures under
  /// way first (they need a slot only), then `starts` (a slot and a token each).
  std::pair<size_t, size_t> room(const std::string& type, size_t steps, size_t starts,
                                 clock::time_point now);

  /// When the next token of `type` comes (nullopt: it has no rate, or a token is there).
  std::optional<clock::time_point> next_token(const std::string& type, clock::time_point now);

  /// Counts a step held back (the throttled counter).
  void throttled(const std::string& type);

  /// Every type declared or seen, sorted by name; `waiting` is left 0 for the caller.
  std::vector<type_limit_view> views() const;

  /// "at most 10 running, 100 starts per 1m": a limit as text, for logs and waiting_for.
  static std::string describe(const type_limits& l);

  /// describe() of `type`'s limits in force.
  std::string describe_of(const std::string& type) const;

private:
  struct entry {
    type_limits code;
    std::optional<type_limits> op;
    int64_t set_at_ms = 0;
    uint32_t running = 0;
    uint64_t throttled = 0;
    double tokens = 0;
    clock::time_point refilled{};
    const type_limits& effective() const { return op ? *op : code; }
  };
  void refill(entry& e, clock::time_point now);
  /// When the next token of `e` (refilled, with less than one token, a rate) comes.
  static clock::time_point token_due(const entry& e, clock::time_point now);

  std::map<std::string, entry, std::less<>> types_;
};

/// "1s", "250ms", "5m", "2h" for a period.
std::string period_text(std::chrono::milliseconds per);

}  // namespace proctor
