// Internal: the executor actor's type, declared for the headers of the functions its files
// share (executor_bookkeeping.hpp, executor_deliveries.hpp, executor_trees.hpp,
// executor_operations.hpp), which need no more of its state.
#pragma once

#include <caf/fwd.hpp>

#include "persistence/actor_messages.hpp"

namespace proctor::exec_detail {

struct executor_state;
using executor_actor = caf::stateful_actor<executor_state, counted_actor<actor_kind::executor>>;

}  // namespace proctor::exec_detail
