#include "actors/http/ask_executor.hpp"

#include <caf/all.hpp>

#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"

namespace proctor {

executor_answer ask_executor(caf::actor_system& sys, const caf::actor& executor,
                             const pb::Request& req, std::chrono::milliseconds timeout) {
  executor_answer out;
  caf::scoped_actor self{sys};
  self->request(executor, timeout, rpc_atom::value, req.SerializeAsString())
    .receive(
      [&](const std::string& bytes) {
        pb::Response r;
        if (r.ParseFromString(bytes))
          out.response = std::move(r);
        else
          out.failure = "the node sent a malformed answer";
      },
      [&](caf::error& e) {
        out.failure =
          e == caf::sec::request_timeout
            ? "the node did not answer within " + std::to_string(timeout.count()) + " ms"
            : "the node did not answer: " + error_text(sys, e);
      });
  return out;
}

}  // namespace proctor
