// The definition of counted_actor (declared in actor_messages.hpp): included where an
// actor's state is defined, since a caf::stateful_actor over it needs its base complete.
#pragma once

#include <caf/event_based_actor.hpp>

#include "persistence/actor_messages.hpp"

namespace proctor {

template <actor_kind K>
class counted_actor : public caf::event_based_actor {
public:
  explicit counted_actor(caf::actor_config& cfg) : caf::event_based_actor(cfg) {
    // nop
  }

  // CAF 0.17 hands every message an actor takes (from its mailbox or a request's answer)
  // to this one virtual function; a count adds a relaxed store to it.
  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    count_actor_message(K);
    return caf::event_based_actor::consume(x);
  }
};

}  // namespace proctor
