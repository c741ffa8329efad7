// A demo service for procedures' calls (outcome::call): answers {"echo":<request>} and
// answers a repeated call id with the reply it gave the first time, as every service
// called by procedures must (a call is re-sent after a crash).
#pragma once

#include <caf/all.hpp>

namespace proctor {

caf::actor spawn_echo_service(caf::actor_system& sys);

}  // namespace proctor
