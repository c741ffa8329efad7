// Internal: whole trees in the executor: taken over from the journal at start
// (executor_recovery.cpp) and passivated or woken (executor_passivation.cpp).
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

// -- recovery (executor_recovery.cpp) ---------------------------------------------------------
/// A tree whose records cannot be read is neither run nor deleted: it is listed for an
/// operator, and what could be read of it stays visible in status.
void quarantine(executor_actor* self, const tree_image& t, const std::string& reason);
/// Takes over the trees and events read back from the journal at start-up, at once.
void recover(executor_actor* self, recovered_state& rec);
/// The same in parts, as the scan folds them: begin, then any number of parts (the events
/// come in the first: they precede every tree in the journal), then end (once the journal
/// and the id floor are there), which starts, arms and wakes what the trees need.
void recover_begin(executor_actor* self);
void recover_part(executor_actor* self, recovered_state& part);
void recover_end(executor_actor* self);

// -- passivation (executor_passivation.cpp) ---------------------------------------------------
/// The tree of `root_id` asks to give up its actors until woken (proc_passivate_tree.cpp);
/// false if anything was routed into it since `epoch` or is on its way to it.
bool passivate_root(executor_actor* self, uint64_t root_id, uint64_t epoch,
                    const passivation_answer& a);
/// The root's entry leaves the passivated trees' wake volume (it woke, or went).
void forget_wake_volume(executor_state& st, root_entry& re);
/// The tree's current wake epoch (what a passivation must still see when it is agreed).
uint64_t passivation_epoch(executor_actor* self, uint64_t root_id);
/// A wake-up was routed into the live tree of `root_id`.
void note_wake(executor_actor* self, uint64_t root_id);
/// Node `node` went down or came back: passivated trees with children there wake (their
/// placeholders watch the node).
void wake_passivated_on(executor_actor* self, const std::string& node);
/// The root is not passivated any more (it runs again, or it cannot be read).
void end_sleep(executor_actor* self, uint64_t root_id);
/// True if every procedure of the tree only waits (it starts passivated at recovery).
bool only_waits(const tree_image& t, const cluster_view& cluster);
/// What a procedure of a passivated tree shows as waiting_for.
std::string waiting_reason(const proc_image& p);
/// Recovery of a tree that only waits: passivated from the start.
void recover_passivated(executor_actor* self, const tree_image& t);
/// Wakes procedure `id` (actor `h`, or a passivated root when `h` is invalid) with an event;
/// `via`: `h` is the parent of passivated child `id` (also when it registered so).
void deliver_event(executor_actor* self, uint64_t id, const caf::actor& h, const std::string& key,
                   event_delivery d, bool via = false);
/// A passivated root gets its actor back (from the journal); `then` runs once it exists
/// (at once if it is live). Nothing happens for a tree that is not known.
void wake_root(executor_actor* self, uint64_t root_id, std::function<void()> then = {});

}  // namespace proctor::exec_detail
