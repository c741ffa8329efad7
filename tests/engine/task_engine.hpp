// The engine fixture with a worker's requests (docs/workers.md): poll, heartbeat, complete,
// fail, and the queues' figures, as the HTTP API and the wire send them.
#pragma once

#include <string>

#include "tests/engine/engine_fixture.hpp"

namespace proctor::testing {

class task_engine : public engine {
protected:
  pb::Response poll(const std::string& queue, const std::string& worker = "w1", uint32_t max = 1,
                    uint32_t wait_ms = 5000) {
    pb::Request r;
    auto* t = r.mutable_task();
    t->set_op(pb::TaskRequest::POLL);
    t->add_queues(queue);
    t->set_worker(worker);
    t->set_max(max);
    t->set_wait_ms(wait_ms);
    return call(r, std::chrono::milliseconds{wait_ms} + std::chrono::seconds{10});
  }

  /// The one task a poll of `queue` gets (a failure if none).
  pb::TaskInfo poll_one(const std::string& queue, const std::string& worker = "w1") {
    auto r = poll(queue, worker);
    EXPECT_EQ(r.code(), pb::Response::OK) << r.error();
    EXPECT_EQ(r.task().tasks_size(), 1) << "no task on " << queue;
    return r.task().tasks_size() > 0 ? r.task().tasks(0) : pb::TaskInfo{};
  }

  pb::Response report(pb::TaskRequest::Op op, const std::string& token,
                      const std::string& json = {}, const std::string& error = {},
                      bool retryable = true) {
    pb::Request r;
    auto* t = r.mutable_task();
    t->set_op(op);
    t->set_token(token);
    t->set_json(json);
    t->set_error(error);
    t->set_retryable(retryable);
    return call(r);
  }

  pb::Response complete(const std::string& token, const std::string& result) {
    return report(pb::TaskRequest::COMPLETE, token, result);
  }

  pb::Response queues() {
    pb::Request r;
    r.mutable_task()->set_op(pb::TaskRequest::QUEUES);
    return call(r);
  }
};

}  // namespace proctor::testing
