// One request to the node's executor from a thread outside the actor system (an HTTP
// server's thread): the serialized pb::Request as (rpc_atom, bytes), as the client
// protocol's broker sends it, and its answer, waited for at most `timeout`.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <caf/fwd.hpp>

#include <proctor/wire.pb.h>

namespace proctor {

/// The executor's answer, or why there is none.
struct executor_answer {
  /// Set when the executor answered (with any code, OK or not).
  std::optional<pb::Response> response;
  /// Why there is no answer: a timeout, a dead executor, a malformed reply.
  std::string failure;
};

/// Sends `req` to `executor` through a scoped actor of `sys` and waits for its answer at
/// most `timeout`. Blocks the calling thread: never call it from inside an actor.
executor_answer ask_executor(caf::actor_system& sys, const caf::actor& executor,
                             const pb::Request& req, std::chrono::milliseconds timeout);

}  // namespace proctor
