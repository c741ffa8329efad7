// Messages taken by the engine's actors, counted by kind of actor: the procedure actors, the
// executor, the journal, the step scheduler and the timeout actor each derive from
// counted_actor<kind> (counted_actor.hpp), which counts every message its consume() takes
// (requests, answers, down and exit messages alike). Exposed as
// proctor_actor_messages_total{actor=...}; proctor-bench divides them by (b)'s procedures
// (docs/benchmarks.md, "What a procedure costs").
#pragma once

#include <cstddef>
#include <cstdint>

namespace proctor {

enum class actor_kind : uint8_t { procedure, executor, journal, scheduler, timeout };
constexpr size_t actor_kinds = 5;

/// Its label in the metric: "procedure", "executor", ...
const char* actor_kind_name(actor_kind k);

/// Messages taken so far by this process's actors of kind `k`.
uint64_t actor_messages(actor_kind k);

/// Counts one message taken by an actor of kind `k` (counted_actor's consume).
void count_actor_message(actor_kind k) noexcept;

/// A CAF event-based actor that counts the messages it takes; the base of the stateful
/// actors named above (caf::stateful_actor<State, counted_actor<kind>>).
template <actor_kind K>
class counted_actor;

}  // namespace proctor
