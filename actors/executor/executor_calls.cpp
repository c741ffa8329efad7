// The calls procedures wait for (outcome::call). The executor has each one made by a caller
// (caller.hpp) and routes its answer as it routes an event: to the procedure's actor, through
// its parent if it is passivated, or held for it while its tree is passivated. So a procedure
// waiting for a reply needs no actor, and its call outlives the actor that made it
// (a supervision restart, a passivation); only a node's restart sends it again.
#include <spdlog/spdlog.h>

#include "actors/base/task_spec.hpp"
#include "actors/executor/caller.hpp"
#include "actors/executor/internal/executor_state.hpp"

namespace proctor::exec_detail {

void await_call(executor_actor* self, const std::string& key, uint64_t id, caf::actor h, bool via,
                std::string service, std::string request) {
  auto& st = self->state;
  await_event(self, key, id, std::move(h), via);
  if (service.empty())
    return;  // an event, not a call
  auto k = st.events.waiting_key.find(id);
  if (k == st.events.waiting_key.end() || k->second != key)
    return;  // its answer was held for it, and is on its way
  if (is_task_service(service))
    return task_awaited(self, key, id, service, request);  // for a worker (executor_tasks.cpp)
  if (st.events.calls.find(key) != st.events.calls.end())
    return;  // under way (made before its actor went, or came back)
  call_spec spec{id, root_of(self, id), key, std::move(service), std::move(request)};
  auto caller =
    spawn_caller(self->system(), st.env, caf::actor_cast<caf::actor>(self), std::move(spec));
  st.events.calls.emplace(key, call_entry{std::move(caller), id});
}

void on_call_done(executor_actor* self, const std::string& key, bool ok, std::string text) {
  auto& st = self->state;
  auto c = st.events.calls.find(key);
  if (c == st.events.calls.end())
    return;  // stopped: its procedure no longer waits for it
  auto id = c->second.proc_id;
  st.events.calls.erase(c);
  size_t woke = 0;
  event_delivery d;
  if (ok)
    d.payload = std::move(text);
  else
    d.failure = std::move(text);
  wake_waiters(self, key, d, &woke);
  if (woke == 0)
    spdlog::debug("[proc {} root {}] the answer to call {} is dropped: nothing waits for it", id,
                  root_of(self, id), key);
}

void stop_call(executor_actor* self, uint64_t id) {
  auto& st = self->state;
  if (!st.tasks.by_proc.empty())
    task_stopped(self, id);
  if (st.events.calls.empty())
    return;
  auto k = st.events.waiting_key.find(id);
  if (k == st.events.waiting_key.end())
    return;
  auto c = st.events.calls.find(k->second);
  if (c == st.events.calls.end() || c->second.proc_id != id)
    return;
  self->send_exit(c->second.caller, caf::exit_reason::user_shutdown);
  st.events.calls.erase(c);
}

void stop_calls(executor_actor* self) {
  for (auto& [key, c] : self->state.events.calls)
    self->send_exit(c.caller, caf::exit_reason::user_shutdown);
  self->state.events.calls.clear();
}

}  // namespace proctor::exec_detail
