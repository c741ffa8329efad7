// Internal: waiting, and procedures giving up their actors — their own timer and event waits
// (proc_waiting.cpp), passivated children and subtrees (proc_passivated_children.cpp), waiters
// going while their tree runs (proc_passivate_waiter.cpp), and whole trees passivating
// (proc_passivate_tree.cpp). It sees the actor's type only (proc_actor_fwd.hpp);
// procedure_actor_state.hpp includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/base/messages.hpp"
#include "actors/procedure/internal/proc_actor_fwd.hpp"
#include "actors/procedure/internal/proc_children.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

// -- waiting (proc_waiting.cpp) ---------------------------------------------------------------

/// Arms the procedure's timer: an event deadline (wake_atom) or a wake-up (retry_atom).
void arm_timer(proc_actor* self, int64_t at_ms, bool event_deadline);

/// WAITING for the event in `state.event_key` (and its deadline, 0 = none).
void wait_for_event(proc_actor* self, int64_t deadline_ms);

/// WAITING for the reply of the pending call (and its deadline); the executor has the call
/// made unless it is under way.
void wait_for_call(proc_actor* self, int64_t deadline_ms);

/// The key a new call (or task) of procedure `id` waits under: unique on this node across
/// restarts. `undo`: a rollback's task (undo_tasks.cpp), which is_undo_task_key() tells.
std::string new_call_key(uint64_t id, bool undo = false);

/// Registers with the executor that procedure `id` waits under `key`: for an event, or for
/// the reply of its call to `call_service` (which the executor then makes, unless it is
/// under way). `via`: `id` is a passivated child of this actor, which the answer reaches
/// through it (proc_passivated_children.cpp); otherwise `id` is this actor's own procedure.
void register_wait(proc_actor* self, uint64_t id, bool via, const std::string& key,
                   const std::string& call_service, const std::string& call_request);
/// register_wait for this actor's own procedure, waiting under `state.event_key`.
void register_wait(proc_actor* self);

/// Disarms the wait timer (its token and the timeout actor's entry).
void disarm_timer(proc_actor* self);

// -- passivated children (proc_passivated_children.cpp) -------------------------------------------

/// Child `cid` of `image` may stay unspawned (passivated) until its wake-up: passivation is on,
/// and it waits for a timer, an event or a call's reply with nothing of its subtree running,
/// or it waits for its children and each of them that has not ended may so stay (a passivated
/// subtree, woken by the earliest wake-up in it).
bool may_passivate_unspawned(proc_actor* self, const tree_image& image, uint64_t cid);

/// Makes child `c` of `image` passivated until its timer, its event or the event's deadline
/// (of a passivated subtree: until the earliest of those in it); `own`: the image is the
/// child's alone (it gave up its actor while live), not the tree's.
void put_to_sleep(proc_actor* self, child_slot& c, const std::shared_ptr<const tree_image>& image,
                  bool own = false);

/// Spawns passivated child `c` now (its wake-up came — `by_wake_up` — or a bypass is on its way
/// to it).
void wake_passivated(proc_actor* self, child_slot& c, bool by_wake_up = false);

/// The wake-up of child `cid` came (on_wake_children, or wake_child_atom from the
/// executor): spawned if it is still passivated (held while the tree is being passivated;
/// queued while max_live_children of its siblings have actors).
void on_wake_child(proc_actor* self, uint64_t cid);

/// The earliest wake-up of the passivated children came (wake_children_atom, from the
/// timeout actor): each child due by now is woken (on_wake_child), and the next is armed.
void on_wake_children(proc_actor* self);

/// How many of a procedure's children may have actors at once for wake-ups of passivated
/// children to spawn more at once. A million timers due within a second are sent faster
/// than their procedures can run: spawned as they came, 96,000 actors were live at once
/// in a firing of 200,000 (900 MB, every new actor on fresh pages, its memory cold).
/// Queued beyond this, each spawns as one of its siblings goes down, in the order they came.
/// 64 did better for proctor-bench (j)'s 100 trees due together (81,934 against 72,823
/// resumed/s, one run each) but worse for one tree of 20,000 timers due at once (all ended
/// 239-298 ms after their deadline against 172-185 ms): a parent's children in flight are
/// what its journal group commits can take together.
inline constexpr size_t max_live_children = 256;

/// Spawns the children whose wake-ups were queued, while fewer than max_live_children have
/// actors (after a child's actor went down).
void wake_queued(proc_actor* self);

/// Passivated child `c` is stopped with its parent's subtree: it never started its state.
void stop_passivated(proc_actor* self, child_slot& c);

/// Cancels the wake-ups of the passivated children (the parent's actor is going away).
void release_passivated(proc_actor* self);

/// The ids of `q` and of what of its subtree in `image` has not ended.
void unended_subtree(const tree_image& image, const proc_image& q, std::vector<uint64_t>* out);

/// The image passivated child `c` sleeps in (its own, or the tree's).
const std::shared_ptr<const tree_image>& passivated_image_of(const proc_actor_state& st,
                                                             const child_slot& c);

// -- a waiting procedure's actor given up while its tree runs (proc_passivate_waiter.cpp) ---------

/// Thawed after its tree could not passivate: a procedure that only waits for its timer or
/// its event offers its parent to give up its actor until then.
void offer_parent_passivation(proc_actor* self);

/// The parent's answer to the offer.
void on_passivate_reply(proc_actor* self, bool accepted);

/// Parent: child `cid` offers to give up its actor (`image`: its own, as journaled).
void on_passivate_offer(proc_actor* self, uint64_t cid, std::shared_ptr<const tree_image> image);

/// Parent: child `cid` takes its accepted offer back.
void on_passivate_undo(proc_actor* self, uint64_t cid);

/// Parent: the actor of child `c`, which had offered, went down (`reason`): true if it gave
/// way (it is passivated now, or counted stopped), false if it crashed (supervised as usual).
bool on_passivating_child_down(proc_actor* self, child_slot& c, const caf::error& reason);

// -- passivation (proc_passivate_tree.cpp) -------------------------------------------------------

/// This procedure began to wait: a root arms its passivate_after deadline, another tells
/// its root (which does the same).
void offer_passivation(proc_actor* self);

/// This procedure's own part of a passivation answer, its children's not counted: `idle`
/// false when it does not only wait, or when its deadline is due within
/// passivation_min_sleep_ms.
passivation_answer own_answer(proc_actor* self);

/// Root: its passivate_after deadline (`token`) passed: tries to passivate its tree.
void try_passivate(proc_actor* self, uint64_t token);

/// Root: attempt `attempt` got no answer in time: given up, the tree resumes.
void on_passivate_late(proc_actor* self, uint64_t attempt);

/// Parent `parent` asks (query `tag`) whether this subtree only waits (and freezes it if
/// so); the answer goes back as (passivate_answer_atom, tag, this procedure's id, answer).
void on_passivate_query(proc_actor* self, const caf::actor& parent, uint64_t tag);

/// Child `child_id` answered query `tag` (stale answers are ignored).
void on_passivate_answer(proc_actor* self, uint64_t tag, uint64_t child_id,
                         const passivation_answer& a);

/// Child `child_id` went down: if it was asked and had not answered, its subtree does not
/// only wait.
void on_passivate_child_down(proc_actor* self, uint64_t child_id);

/// The passivation was refused: run what was held, and resume the children.
void passivation_refused(proc_actor* self);

/// Holds `f` (a wake-up) until resume.
void hold(proc_actor* self, std::function<void()> f);

/// Cancels this procedure's deadlines with the timeout actor (its actor is going away).
void release_timers(proc_actor* self);

/// Woken by an event, a reply or a deadline: journal it, then run the resume state (or fail
/// with `why`, or a default reason, when it timed out). `event_lsn`: the event's record
/// (delivered_atom), named in the EventDelivered and deleted in its batch when `consume`; the
/// executor is told whether it was taken (event_taken_atom) or not (event_declined_atom).
void on_wake(proc_actor* self, const std::string& payload, bool timed_out, std::string why = {},
             uint64_t event_lsn = 0, bool consume = false);

/// The event of LSN `event_lsn` (0: none, a call's reply) was delivered to this procedure,
/// which drops it without journaling it: the executor hands it to another waiter or keeps it.
void decline_event(proc_actor* self, uint64_t event_lsn);

}  // namespace proctor
