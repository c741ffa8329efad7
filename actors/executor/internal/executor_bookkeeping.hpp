// Internal: the executor's replies and its bookkeeping of every procedure's status and of its
// roots (executor.cpp, executor_views.cpp), shared by its files.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include <proctor/wire.pb.h>

#include "actors/base/messages.hpp"
#include "actors/executor/executor.hpp"
#include "actors/executor/internal/events_part.hpp"
#include "actors/executor/internal/executor_fwd.hpp"
#include "actors/executor/internal/executor_types.hpp"
#include "actors/executor/internal/proc_record.hpp"
#include "actors/executor/internal/schedules_part.hpp"
#include "persistence/journal.hpp"
#include "persistence/tree_image.hpp"

namespace proctor::exec_detail {

// -- text ---------------------------------------------------------------------------------------
/// "a, b, c": names (or anything printable as a string) in their container's order, for
/// answers and logs.
template <class Container>
std::string comma_list(const Container& xs) {
  std::string out;
  for (const auto& x : xs) {
    if (!out.empty())
      out += ", ";
    out += x;
  }
  return out;
}

// -- replies ----------------------------------------------------------------------------------
std::string encode(const pb::Response& r);
std::string error_reply(pb::Response::Code code, std::string msg);
void fill_status(const proc_record& r, pb::ProcStatus* s);
std::string status_reply(const proc_record& r, pb::Response::Code code = pb::Response::OK);
/// The status of `r` with its resubmit links (ProcStatus.resubmitted_from / _as).
std::string status_reply(executor_actor* self, const proc_record& r);
/// fill_status, and what a root FAILED waits for when its record says nothing: its rollback,
/// or (past its point of no return, its tree not ended) an operator's retry or bypass.
void fill_status(executor_actor* self, const proc_record& r, pb::ProcStatus* s);
/// Past its point of no return and out of retries: FAILED, ended, its tree not finished (it
/// waits for an operator's retry or bypass).
bool failed_for_good(executor_actor* self, const proc_record& p);
/// "procedure N is FAILED past its point of no return: …": why an abort, a release and the
/// like do not apply to a root whose tree waits for an operator ("" for any other).
std::string waits_for_operator(executor_actor* self, const proc_record& r);
void fill_links(executor_actor* self, pb::ProcStatus* s);
void reply(promise_t& rp, std::string bytes);

// -- bookkeeping (executor.cpp) ---------------------------------------------------------------
/// The clocks record_update reads, read once for many updates (recovery).
struct update_clock {
  int64_t wall_ms = 0;    ///< 0: read the clock
  int64_t steady_ns = 0;  ///< 0: read the clock
};

/// The root of procedure `id` (0 when it is not known).
uint64_t root_of(executor_actor* self, uint64_t id);
/// Records a procedure's new status; answers its waiters when it ended.
void record_update(executor_actor* self, proc_update u, update_clock at = {});
/// A procedure that no longer waits for an event is no longer woken by it.
void forget_event_wait(executor_actor* self, uint64_t id);
/// The handle procedure `id` is registered with as an event waiter (its actor, its parent's,
/// or none for a passivated tree); nullptr if it is not registered.
caf::actor* event_waiter(executor_actor* self, uint64_t id);

/// Procedure `id`, registered by its actor `child` for event `key`, is to be woken through `parent`
/// from now on (it gives up its actor: proc_passivate_waiter.cpp). False if that registration is
/// gone (the event is on its way to the actor).
bool wait_through_parent(executor_actor* self, const std::string& key, uint64_t id,
                         const caf::actor& child, caf::actor parent);

/// Procedure `id` (actor `h`; invalid for a passivated root) waits for event `key`: woken at
/// once by the oldest one kept from earlier, which it consumes (or by the one held for it),
/// else when the next one arrives. During recovery kept events are not handed out: recover_end
/// does, in the order of the waits (match_recovered_events). `via`:
/// `h` is the parent of passivated child `id`, which the event reaches through it: the event is
/// held, and the parent told to spawn the child (wake_child_atom), whose actor then gets it.
void await_event(executor_actor* self, const std::string& key, uint64_t id, caf::actor h,
                 bool via = false);
/// Wakes every procedure waiting under `key` with `d`; adds their number to `*woke`.
void wake_waiters(executor_actor* self, const std::string& key, const event_delivery& d,
                  size_t* woke);
/// Event `ev`, durable, wakes every procedure waiting under `key` now; returns their ids
/// (none: the caller keeps it for the first later waiter).
std::vector<uint64_t> wake_event_waiters(executor_actor* self, const std::string& key,
                                         const pending_event& ev);
/// Procedure `id` took the event of LSN `lsn` (its EventDelivered is durable), or declined it
/// (it no longer waited for it). Once each procedure it was handed to said, an event taken by
/// none is kept again for the first later waiter; one taken is gone (its record deleted).
void settle_event(executor_actor* self, uint64_t lsn, uint64_t id, bool took);
/// Procedure `id` ended: an event handed to it and not taken is taken by it no more.
void release_handed_event(executor_actor* self, uint64_t id);
/// Kept event `lsn` of `key` reached its TTL: it is deleted (unless it was consumed, or is
/// being handed to a procedure: then settle_event decides).
void expire_event(executor_actor* self, const std::string& key, uint64_t lsn);
/// Recovery: the events read back go to the procedures read back waiting for them, as they
/// went before the restart (docs/concepts.md, "Events"); the rest are kept.
void match_recovered_events(executor_actor* self);
/// `ms` as an operator reads it: "5 min", "30 s", "1 h", "1500 ms".
std::string human_duration(std::chrono::milliseconds ms);
/// "[proc 12, 13]" for a log line (the first 20 ids, then how many more).
std::string proc_list(const std::vector<uint64_t>& ids);

}  // namespace proctor::exec_detail
