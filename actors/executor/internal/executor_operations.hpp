// Internal: the executor's side of the cluster and of operators: the peers' progress
// (executor_progress.cpp), the cluster and forgotten nodes (executor_cluster.cpp,
// executor_forget.cpp), operators' views, bypasses and retries, and recurring schedules
// (executor_schedules.cpp, executor_schedule_firing.cpp).
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
#include "actors/scheduling/step_scheduler.hpp"
#include "persistence/journal.hpp"
#include "persistence/tree_image.hpp"

namespace proctor::exec_detail {

// -- the peers' progress (executor_progress.cpp; peer_progress.hpp) ---------------------------
/// The PeerProgress records read back.
void progress_recovered(executor_actor* self,
                        std::map<std::string, recovered_peer_progress>& records);
/// At the end of the recovery: a new journal with peers waits for each of them before it
/// hands out an id.
void progress_start(executor_actor* self);
/// A heartbeat answer's NodeInfo, from this node's side: its next id and last durable LSN,
/// and what it heard of the asking node `from`.
void fill_progress(executor_actor* self, const std::string& from, pb::NodeInfo& info);
/// Adds to a heartbeat answer that the asking node's incarnation `from` was forgotten here.
void fill_forgotten(executor_actor* self, const std::string& from, pb::NodeInfo& info);

/// A peer answered a heartbeat (s.heard): its progress is kept (and journaled now and then);
/// what it heard of this node raises where this node's ids begin (a new journal), or shows
/// that this journal is older than what the peer saw (a restored copy: the node stops).
void progress_heard(executor_actor* self, const peer_status& s);
/// True, holding the request, when `req` needs a new id and this node (a new journal) still
/// waits for its peers' answers; it is handled once they answered, or at
/// peer_progress_part::answer_bound.
bool hold_for_ids(executor_actor* self, const pb::Request& req, const std::string& bytes,
                  promise_t& rp);
/// A new journal's wait for its peers' answers ran out: ids are handed out without them.
void progress_bound(executor_actor* self);
using progress_hold_atom = caf::atom_constant<caf::atom("idshold")>;
// -- the cluster (executor_cluster.cpp) --------------------------------------------------------
/// Answers a peer's heartbeat with this node's NodeInfo.
void handle_ping(executor_actor* self, const pb::PingRequest& req, promise_t rp);
/// A peer's status as its link sees it: kept for procedure actors; the procedures that wait
/// for that peer are told when it goes down or comes back, its outbox kicked when it is up.
void on_peer_status(executor_actor* self, const peer_status& s);
/// The cluster group's members that take part: those not known yet become peers, linked.
void on_cluster_peers(executor_actor* self, const std::vector<cluster_peer>& members);
/// Answers `nodes`: this node and each peer as seen from here.
void handle_nodes(executor_actor* self, promise_t rp);
/// Answers `metrics` with the scheduler's and the journal's stats, the executor's gauges
/// and, with peers, each one's link and outbox (actors/executor/metrics.hpp).
void reply_metrics(executor_actor* self, promise_t rp, const step_scheduler_stats& s,
                   const journal_stats& j);
/// A list not limited to this node (`local` unset) on a node with peers: asks each peer for
/// its part and answers the merge (with the peers that did not answer). False: answer
/// `local` (this node's part) as it is.
bool list_across_nodes(executor_actor* self, const pb::ListRequest& req, pb::Response local,
                       promise_t rp);

// -- operators (executor_views.cpp, executor_bypass.cpp) --------------------------------------
/// The whole tree of a procedure, root first, depth first, with its fragments on other
/// nodes, gathered at the root's node (from a node holding a fragment of it, too); or,
/// asked by another node (TreeRequest.fragments), the parts held here.
void handle_tree(executor_actor* self, const pb::TreeRequest& req, promise_t rp);
/// A procedure's history, read from its tree's journal records.
void handle_history(executor_actor* self, const pb::HistoryRequest& req, promise_t rp);
/// The node's held and awaited resource locks.
void handle_locks(executor_actor* self, promise_t rp);
/// An operator's bypass: refused unless stuck or forced; answered once it is durable.
void handle_bypass(executor_actor* self, const pb::BypassRequest& req, promise_t rp);
/// The ids from the root of `p`'s tree (fragment) down to `p`, the way an operator's order
/// (bypass, retry) travels; empty if a link is missing.
std::vector<uint64_t> path_to(executor_actor* self, const proc_record& p);
/// An operator's retry of a failed (or backing-off) step: answered once the Retried record
/// is durable (executor_retry.cpp).
void handle_retry(executor_actor* self, const pb::RetryRequest& req, promise_t rp);
/// An operator's resubmit of a ROLLEDBACK tree under a new id: answered once the new root's
/// Submitted record is durable (executor_resubmit.cpp).
void handle_resubmit(executor_actor* self, const pb::ResubmitRequest& req, promise_t rp);
/// Root `new_root` runs again the ROLLEDBACK tree of `old_root` (a resubmit, or read back).
void note_resubmit(executor_actor* self, uint64_t old_root, uint64_t new_root, uint64_t lsn);
/// A request its door limited to type prefixes (Request.only_types) that names a procedure or
/// schedule of another type: answered PERMISSION_DENIED, true (executor_type_prefixes.cpp).
bool refuse_other_types(executor_actor* self, const pb::Request& req, promise_t& rp);

// -- recurring schedules (executor_schedules.cpp, executor_schedule_firing.cpp,
// -- executor_schedules_cluster.cpp) ------------------------------------------------------------
void handle_schedule(executor_actor* self, const pb::ScheduleRequest& req, promise_t rp);
/// Reads `e.rec`'s cron and zone into `e.cron` and `e.zone`: "", or why this binary cannot
/// (a journaled cron it does not parse, a zone its time zone database lacks).
std::string read_schedule_spec(schedules_part::schedule_entry& e);
/// Recovery: a schedule's last record read back.
void recover_schedule(executor_actor* self, const recovered_schedule& s);
/// Recovery ended: each schedule's missed fire times go by its catch-up policy, then the tick
/// is armed.
void schedules_recovered(executor_actor* self);
/// The schedule tick (schedule_tick_atom): fires what is due, arms the next.
void on_schedule_tick(executor_actor* self);
/// Root `id` ended: a schedule buffering a firing behind it submits it.
void schedule_run_ended(executor_actor* self, uint64_t id);
/// Runs `op` once the schedule operations before it are done (it calls schedule_op_done).
void schedule_op(executor_actor* self, std::function<void()> op);
void schedule_op_done(executor_actor* self);
/// (Re)arms the tick for the earliest due firing of all schedules.
void arm_schedule_tick(executor_actor* self);
/// The next fire time of `e` (jitter included), or 0 (paused, deleted, none).
int64_t next_fire_ms(const schedules_part::schedule_entry& e);
/// Submits a run of schedule `name` for fire time `fire_ms` (manual: `schedule trigger`),
/// journaled with the schedule's record in one batch; `done(id)` once durable (0: refused,
/// with `why`).
void fire_schedule(executor_actor* self, const std::string& name, int64_t fire_ms, bool manual,
                   bool buffered, std::function<void(uint64_t id, std::string why)> done);
/// Journals `rec` as schedule `name`'s record (with a delete of its last), then `then`.
void write_schedule_record(executor_actor* self, const std::string& name, pb::Schedule rec,
                           std::function<void()> then);
/// Decides, by its catch-up policy, the due fire times of schedule `name` that nobody decided
/// (`since`: "while the node was down", ...), then `then`.
void catch_up_schedule(executor_actor* self, const std::string& name, const char* since,
                       std::function<void()> then);
/// The key a cluster schedule is placed by: its fire times' roots and nonces go with its slot.
std::string schedule_key(const std::string& name);
/// Whether schedule `e` fires on this node now: one of this node's own, or a cluster schedule
/// whose slot this node owns and holds every nonce of.
bool schedule_fires_here(executor_actor* self, const schedules_part::schedule_entry& e);
/// The cluster group's schedules (cluster_schedules_atom): this node's records follow them.
void on_cluster_schedules(executor_actor* self, std::string bytes);
/// Slots moved, or their nonces arrived: the cluster schedules this node now fires catch up.
void schedules_placement_changed(executor_actor* self);
/// A cluster schedule's fire times were decided further here: the group is told.
void report_schedule_progress(executor_actor* self, const std::string& name);
/// Proposes a cluster schedule's change to the group: `done("")` once the group holds it,
/// else `done(why)` with the answer's code (nothing changed, or unknown after a timeout).
void propose_schedule(executor_actor* self, const pb::Schedule& rec,
                      std::function<void(pb::Response::Code, std::string)> done);

/// Journals a new root of `type` made of `inst` and starts it; answers its id once its
/// Submitted record is durable (with a nonce: every submit of that nonce waiting for it),
/// after `on_durable` ran (executor_requests.cpp). `key`: the key it was placed by.
void submit_root(executor_actor* self, const std::string& type, std::unique_ptr<procedure> inst,
                 const std::string& nonce, int32_t priority, uint64_t resubmitted_from,
                 promise_t rp, std::function<void(uint64_t id, uint64_t last_lsn)> on_durable = {},
                 std::function<void(journal_batch&, uint64_t id)> extend = {},
                 const std::string& key = {});
/// Lists each type's limits and load, or changes a type's (answered once journaled):
/// executor_limits.cpp.
void handle_limits(executor_actor* self, const pb::LimitsRequest& req, promise_t rp);
/// The limits the cluster group holds (every type), whenever they change: journaled and
/// enforced here as the group holds them (executor_limits.cpp).
void on_cluster_limits(executor_actor* self, const std::vector<cluster_limit>& limits);
/// `proctor node forget` (executor_forget.cpp).
void handle_forget(executor_actor* self, const pb::NodeForgetRequest& req, promise_t rp);
/// Forgets the peers that peer `s` says it forgot, once they are down here: an operator's
/// `node forget` on one node reaches every node within a heartbeat (executor_forget.cpp).
void adopt_forgotten(executor_actor* self, const peer_status& s);
/// Forgets `name` (its `incarnation`, 0: the one known here) as `by` ("node b", "the cluster
/// group") did at `at_ms`: journaled, unless it is forgotten here already, another
/// incarnation is known here, or it is up here (then once it is down).
void adopt_forgotten(executor_actor* self, const std::string& by, const std::string& name,
                     uint64_t incarnation, int64_t at_ms);
void handle_backup(executor_actor* self, const pb::BackupRequest& req, promise_t rp);
/// Tells whatever waits for node `s.name` (placeholders, roots rolling back, passivated
/// trees) that its status changed (executor_cluster.cpp).
void tell_waiting_for(executor_actor* self, const peer_status& s);
/// Child `id` was placed on a node an operator forgot: its end is journaled as lost and told
/// as any end (executor_remote.cpp).
void declare_lost(executor_actor* self, uint64_t id);
/// Fragment `id` here had its parent on node `from`, which an operator forgot: it rolls back
/// as if `from` had ordered it, and nothing is sent back there; `done(taken, why)`.
void roll_back_orphan(executor_actor* self, const std::string& from, uint64_t id,
                      std::function<void(bool, std::string)> done);
/// Rolls back remote_part::orphans one after the other (executor_forget.cpp).
void roll_back_orphans(executor_actor* self);

/// Keeps an event for procedures that suspend on its key later, until its TTL.
void keep_event(executor_actor* self, const std::string& key, pending_event ev);
/// Arms the expiry of kept event `ev` (keep_event does; recovery does it for the events it
/// read back once its take-over ends).
void arm_event_ttl(executor_actor* self, const std::string& key, const pending_event& ev);

}  // namespace proctor::exec_detail
