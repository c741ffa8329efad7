// Internal: the procedure actor's type, declared for the headers of its functions
// (proc_lifecycle.hpp, proc_rollback.hpp, proc_waits.hpp), which need no more of its state.
#pragma once

#include <caf/fwd.hpp>

#include "persistence/actor_messages.hpp"

namespace proctor {

struct proc_actor_state;
using proc_actor = caf::stateful_actor<proc_actor_state, counted_actor<actor_kind::procedure>>;

}  // namespace proctor
