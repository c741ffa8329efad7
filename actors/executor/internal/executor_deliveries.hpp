// Internal: what the executor delivers to waiting procedures: calls to services
// (executor_calls.cpp), events and their ids (executor_events.cpp, executor_event_ids.cpp),
// and the wire requests that carry them (executor_requests.cpp).
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

// -- calls (executor_calls.cpp) ------------------------------------------------------------------
/// Procedure `id` waits for the reply of call `key` (registered as await_event does); the
/// call is made unless it is under way already or its answer is held for the procedure.
/// With `service` empty, it waits for an event: await_event alone.
void await_call(executor_actor* self, const std::string& key, uint64_t id, caf::actor h, bool via,
                std::string service, std::string request);
/// A call's caller is done: its reply or failure wakes the procedure waiting for it (none:
/// it stopped waiting, and the answer is dropped).
void on_call_done(executor_actor* self, const std::string& key, bool ok, std::string text);
/// Procedure `id` no longer waits (for anything, or not for its call): its call is stopped.
void stop_call(executor_actor* self, uint64_t id);
/// The node goes down: every call under way is stopped.
void stop_calls(executor_actor* self);
/// Appends `b`; `then` runs once it is durable (never, if the journal fails: fail-stop).
void append(executor_actor* self, journal_batch b, std::function<void(uint64_t)> then = {});
/// The result of finished tree `root_id` expires after `after`: it is released then.
void expire_after(executor_actor* self, uint64_t root_id, std::chrono::milliseconds after);
/// Forgets finished trees `ids` and deletes their records, neighbours with one range delete
/// each run (a range tombstone per tree would make every memtable switch stall RocksDB's
/// writer while it fragments them all).
/// `then` (if any) runs once the deletion is durable.
void release_trees(executor_actor* self, std::vector<uint64_t> ids,
                   std::function<void()> then = {});
/// How late the result-expiry timer may fire, so that trees expire in groups.
std::chrono::milliseconds expiry_slack(const executor_config& cfg);
/// The expiry timer (expire_atom with `token`).
void on_expiry_timer(executor_actor* self, uint64_t token);
/// Forgets a tree and its procedures (not its journal records).
void drop_tree(executor_actor* self, uint64_t root_id);
/// Finished tree `root_id` (its summary record `summary`, as written) has its other records
/// deleted soon, with its neighbours': within executor_config::collect_after, or at once
/// when collect_max trees wait.
void collect_later(executor_actor* self, uint64_t root_id, std::string summary);
/// Ended tree `root_id` of `records` journal records keeps them (its whole history) while
/// the most recently ended trees' records fit in executor_config::history_keep_records;
/// the trees that no longer fit are collected (collect_later), the oldest first.
void keep_history(executor_actor* self, uint64_t root_id, std::string summary, uint64_t records);
void collect_finished(executor_actor* self);
/// Collects what is collectable at once when collect_max trees wait, else within
/// executor_config::collect_after.
void collect_soon(executor_actor* self);
constexpr size_t collect_max = 4096;
/// Starts (or restarts) a tree's root actor from its image; `submitted`: the instance of a
/// root just submitted (see proc_start::submitted).
void start_root(executor_actor* self, std::shared_ptr<const tree_image> image, bool rollback,
                std::shared_ptr<procedure> submitted = {});
/// The executor's entry for the root of `image` (its restart history survives restarts).
root_entry& enter_root(executor_actor* self, const tree_image& image);
/// The tree of `procs` ended: forget what was kept for its children on other nodes.
void forget_remote(executor_actor* self, const std::vector<proc_update>& procs);
/// True when `root_id` is the root of a fragment (its parent runs on another node).
bool is_fragment(executor_actor* self, uint64_t root_id);
/// Reads the tree of `root_id` back from the journal and starts its root.
void reload_root(executor_actor* self, uint64_t root_id);

// -- requests and events (executor_requests.cpp) ----------------------------------------------
/// Answers one wire request (rpc.hpp).
void handle_request(executor_actor* self, const std::string& bytes, promise_t rp);
/// Answers `req` here, past handle_request's checks (its owner, its placement, the ids it
/// waits for) and its audit record (executor_audit.cpp).
void run_request(executor_actor* self, const pb::Request& req, const std::string& bytes,
                 promise_t rp);
/// A status, wait, abort or release of an id another node handed out (and not held here)
/// goes to that node, its answer back unchanged; UNREACHABLE when it does not answer. False:
/// answer it here (executor_forward.cpp).
bool forward_to_owner(executor_actor* self, const pb::Request& req, const std::string& bytes,
                      promise_t& rp);
/// A submit placed by its key (or nonce) on another node goes there, its answer back
/// unchanged; refused when the owner or the members are uncertain. False: run it here
/// (executor_placement.cpp).
bool place_submit(executor_actor* self, const pb::Request& req, promise_t& rp);
/// Why a request that says it comes from node `from` is refused ("" when `from` is a peer
/// of this named node): a delivery or a heartbeat from a stranger.
std::string not_a_peer(executor_actor* self, const std::string& from);
/// Takes another node's messages about trees spanning both (executor_remote.cpp).
void handle_peer_delivery(executor_actor* self, const pb::PeerDeliver& req, promise_t rp);
/// Messages about child `id` on another node go to `h`: its placeholder, the root rolling
/// its tree back, or (`via`) the parent holding it passivated. An end journaled here already is
/// told at once (to a parent: wake the child; so is the loss of the child's node).
void route_remote(executor_actor* self, uint64_t id, caf::actor h, bool via);
/// Placeholder `placeholder` of child `id` gives up its actor: its messages go to `parent`
/// from now on, unless its end is here already (then on its way to the placeholder, which
/// stays). True if switched.
bool remote_passivate_via(executor_actor* self, uint64_t id, const caf::actor& placeholder,
                          caf::actor parent);
// -- event ids (executor_event_ids.cpp; event_ids.hpp) ----------------------------------------
/// The EventIdSeen records read back.
void event_ids_recovered(executor_actor* self, std::vector<recovered_event_id>& ids);
/// True, having answered (or queued the answer), when event `key` with id `id` was accepted
/// already: it delivers nothing more.
bool event_seen(executor_actor* self, const std::string& key, const std::string& id, promise_t& rp);
/// Event `key` with id `id` is being journaled (its EventIdSeen goes into `b`).
void event_id_staged(executor_actor* self, const std::string& key, const std::string& id,
                     int64_t at_ms, journal_batch& b);
/// ... it is durable (`lsn`: the batch's last, its EventIdSeen), answered `answer`.
void event_id_accepted(executor_actor* self, const std::string& key, const std::string& id,
                       uint64_t lsn, const std::string& answer);
/// Drops the ids older than the events' TTL (and their records).
void sweep_event_ids(executor_actor* self);
using event_id_sweep_atom = caf::atom_constant<caf::atom("evidsweep")>;

}  // namespace proctor::exec_detail
