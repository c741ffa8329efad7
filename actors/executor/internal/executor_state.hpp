// Internal: the executor's state and the helpers its files share (executor.cpp: status
// bookkeeping, root supervision; executor_recovery.cpp: the trees read back at start-up;
// executor_requests.cpp: the wire requests; executor_passivation.cpp: passivated trees;
// proc_record.hpp: the entry kept per procedure).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <caf/all.hpp>

#include "actors/executor/executor.hpp"
#include "actors/base/messages.hpp"
#include "actors/executor/metrics.hpp"
#include "actors/cluster/peer_link.hpp"
#include "actors/executor/internal/event_ids.hpp"
#include "actors/executor/internal/peer_progress.hpp"
#include "actors/executor/internal/proc_record.hpp"
#include "actors/base/incremental_map.hpp"
#include "actors/wire/wall_clock.hpp"
#include "calendar/cron.hpp"
#include "persistence/journal.hpp"
#include "supervision/restart_tracker.hpp"
#include <proctor/procedure.hpp>
#include <proctor/wire.pb.h>

namespace proctor::exec_detail {

using wait_timeout_atom = caf::atom_constant<caf::atom("waittmo")>;
using event_expire_atom = caf::atom_constant<caf::atom("evexpire")>;
using restart_root_atom = caf::atom_constant<caf::atom("rootrst")>;
using wake_root_atom = caf::atom_constant<caf::atom("rootwake")>;
using orphan_retry_atom = caf::atom_constant<caf::atom("orphretry")>;
using schedule_tick_atom = caf::atom_constant<caf::atom("schedtick")>;

struct waiter {
  caf::typed_response_promise<std::string> rp;
  uint64_t token = 0;
};

struct root_entry {
  caf::actor handle;
  restart_tracker restarts;
  bool finished = false;
  /// Passivated: no actor; the root waits for an event and is restarted from the journal
  /// when the event, its deadline or an abort comes (wake_root).
  bool passivated = false;
  bool waking = false;         ///< its tree is being read back
  uint64_t passivation_token = 0;    ///< the deadline message of an older sleep carries another
  int requests_in_flight = 0;  ///< sent to its actor, unanswered: it may not passivate
  /// Wake-ups routed into the live tree (events, ends of children on other nodes): a
  /// passivation asked for at another epoch is refused (proc_passivate_tree.cpp).
  uint64_t wake_epoch = 0;
  std::vector<std::string> remote_nodes;         ///< passivated: where its remote children run
  std::vector<std::function<void()>> when_live;  ///< run once the woken actor exists
  /// Passivated with a deadline: its procedures, counted in executor_state::wake_volume under
  /// the second of wake_deadline_ms (0: not counted).
  uint64_t wake_procs = 0;
  int64_t wake_deadline_ms = 0;  ///< passivated: the earliest deadline it is read back ahead of
  /// Read back ahead of this deadline: it does not passivate again while that deadline is its
  /// earliest (it would be read back at once, and again, until the deadline).
  int64_t woken_for_ms = 0;
  std::string nonce;
};

struct pending_event {
  uint64_t lsn = 0;
  std::string payload;
  int64_t arrived_at_ms = 0;
};

/// What wakes a procedure waiting under a key: an event's payload, or a call's reply, or why
/// the call failed.
struct event_delivery {
  std::string payload;
  std::string failure;  ///< a failed call: why (it resumes as from a passed deadline)
  /// An event: its EventArrived record (journal_keys::meta_root, this LSN); 0 for a call's
  /// reply. The procedure names it in its EventDelivered record and tells the executor whether
  /// it took it (event_taken_atom, event_declined_atom).
  uint64_t event_lsn = 0;
  /// The procedure is the event's only taker: it deletes the event's record in the batch of
  /// its EventDelivered, so that a crash leaves both or neither. Else (an event that woke
  /// several) the executor deletes it once each of them took it or declined it.
  bool consume = false;
};

/// A delivery held for a procedure whose actor is not there (a passivated tree, a passivated
/// child): given to it when it waits under `key` again.
struct held_event {
  std::string key;
  event_delivery d;
};

/// An event handed to procedures that have not all said yet whether they took it
/// (executor_events.cpp): neither kept for later waiters nor deleted meanwhile.
struct event_in_flight {
  std::string key;
  pending_event ev;
  std::vector<uint64_t> takers;  ///< handed to, not answered yet
  std::vector<uint64_t> took;    ///< took it (their EventDelivered is durable)
  bool consume = false;          ///< event_delivery::consume (one taker)
  bool was_kept = false;         ///< a later waiter's, kept until then (not woken by it)
  /// The live actor each taker got it from the executor directly (not held, not through its
  /// parent): should a new actor of that procedure wait under `key`, the old one went down
  /// before it answered (a supervision restart), and the new one gets the event.
  std::unordered_map<uint64_t, caf::actor> handed_to;
};

/// A call under way (executor_calls.cpp): its caller, and the procedure that waits for it.
struct call_entry {
  caf::actor caller;
  uint64_t proc_id = 0;
};

/// A finished tree whose result expires at `at`.
struct expiry {
  std::chrono::steady_clock::time_point at;
  uint64_t root_id = 0;
  bool operator>(const expiry& o) const { return at > o.at; }
};

using promise_t = caf::typed_response_promise<std::string>;

struct executor_state {
  static inline const char* name = "proctor.executor";
  std::shared_ptr<node_env> env;
  executor_config cfg;
  // The tables that grow with the number of procedures (live, waiting, or finished and kept
  // until their result expires) must not stop the executor to rehash: incremental_map.hpp.
  incremental_map<uint64_t, proc_record> procs;
  name_table type_names;  ///< the records' type names
  incremental_map<uint64_t, root_entry> roots;
  incremental_map<caf::actor_addr, uint64_t> root_addrs;  ///< live root actors
  std::unordered_map<uint64_t, std::vector<waiter>> waiters;
  uint64_t wait_token = 0;
  incremental_map<std::string, uint64_t> nonces;
  // -- per-type limits (executor_limits.cpp) ----------------------------------------------
  std::map<std::string, recovered_limit> limit_records;  ///< an operator's, by type
  /// Changes of limits, journaled one at a time in the order they came (a change sets some
  /// fields over what is in force: two at once would each miss the other's).
  std::deque<std::pair<pb::LimitsRequest, promise_t>> limit_changes;
  bool limit_change_busy = false;
  // -- the peers' progress, and this node's as they saw it (executor_progress.cpp) ----------
  peer_progress_part progress;
  // -- the ids of events sent with one (executor_event_ids.cpp) -----------------------------
  event_ids_part event_ids;
  // -- recurring schedules (executor_schedules.cpp, executor_schedule_firing.cpp) ------------
  struct schedule_entry {
    uint64_t lsn = 0;  ///< of its last record (deleted when the next is written)
    pb::Schedule rec;  ///< as last journaled (a tombstone: rec.deleted())
    calendar::cron_spec cron;  ///< rec.cron() parsed
    calendar::time_zone zone;  ///< rec.zone() looked up: the cron's fields are its local time
  };
  std::map<std::string, schedule_entry> schedules;  ///< by name
  /// The roots the schedules submitted that are in their recent runs, to their schedule.
  std::unordered_map<uint64_t, std::string> schedule_runs;
  /// Changes and firings of schedules, journaled one at a time in the order they came (each
  /// reads the schedule as the one before left it).
  std::deque<std::function<void()>> schedule_ops;
  bool schedule_busy = false;
  bool schedules_live = false;    ///< recovery's catch-up is done: ticks fire
  int64_t schedule_timer_ms = 0;  ///< the armed tick's deadline (0: none)
  /// Submits with a nonce whose Submitted record is not durable yet.
  std::unordered_map<std::string, std::vector<caf::typed_response_promise<std::string>>>
    nonce_pending;
  incremental_map<std::string, std::vector<std::pair<uint64_t, caf::actor>>> event_waiters;
  incremental_map<uint64_t, std::string> waiting_key;  ///< procedure -> its event key
  incremental_map<std::string, std::vector<pending_event>> events;
  type_metrics metrics;
  size_t live = 0;     ///< procedures live here (proc_record::live_since_ns set)
  size_t waiting = 0;  ///< procedures WAITING or WAITING_TIMEOUT
  size_t passivated = 0;  ///< passivated roots
  /// Events for procedures of passivated trees, kept until their actors wait again.
  std::unordered_map<uint64_t, held_event> held_events;
  /// Events handed to procedures, until each said whether it took it, by LSN; and the
  /// procedures they were handed to, each to its event's LSN.
  std::unordered_map<uint64_t, event_in_flight> events_in_flight;
  std::unordered_multimap<uint64_t, uint64_t> handed_events;
  /// Calls under way, by call id (the key their procedure waits under).
  std::unordered_map<std::string, call_entry> calls;
  /// Event waiters registered by their parent (passivated children, proc_passivated_children.cpp): their
  /// event is held, and the parent told to spawn them.
  std::unordered_set<uint64_t> via_parent;
  /// Passivated trees by the nodes their remote children run on: woken when one changes.
  std::unordered_map<std::string, std::unordered_set<uint64_t>> passivated_by_node;
  /// Procedures of the passivated trees by the second of their earliest deadline (how early
  /// a tree is read back: wake_lead_ms).
  std::map<int64_t, uint64_t> wake_volume;
  /// Finished trees by expiry, soonest first, under one timer (a delayed message per tree
  /// would cost the actor clock's lock, a wake-up of its thread and an entry each).
  std::priority_queue<expiry, std::vector<expiry>, std::greater<>> expiries;
  uint64_t expiry_token = 0;  ///< of the armed timer; older timers are ignored
  std::chrono::steady_clock::time_point expiry_armed_for =
    std::chrono::steady_clock::time_point::max();
  /// Finished trees whose records (but the summary, kept here as written) are still in the
  /// journal: collect_finished deletes them and writes the summaries again.
  std::unordered_map<uint64_t, std::string> collectable;
  /// Ended trees that keep their whole history (executor_config::history_keep_records), in
  /// the order they ended: each root's summary is collected when the budget is exceeded, the
  /// oldest first. `history_kept` holds the latest end of each (an end after another one,
  /// of a fragment rolled back by order, replaces it); a queue entry of an older end is
  /// passed over.
  struct kept_history {
    std::string summary;
    uint64_t records = 0;
    uint64_t seq = 0;
  };
  std::unordered_map<uint64_t, kept_history> history_kept;
  std::deque<std::pair<uint64_t, uint64_t>> history_order;  ///< (root, seq), oldest first
  uint64_t history_kept_records = 0;
  uint64_t history_seq = 0;
  bool collect_armed = false;
  /// Roots whose Submitted record is on its way to the journal (not in `roots` yet).
  std::unordered_set<uint64_t> submitting;
  uint64_t append_tag = 0;
  std::unordered_map<uint64_t, std::function<void(uint64_t)>> appends;  ///< by tag
  std::vector<pb::Quarantined> quarantined;
  std::unordered_set<uint64_t> rolling_back;  ///< roots running their tree's rollback
  /// Fragments here whose parent's node an operator forgot, to roll back (node, id), one at
  /// a time; one not taken yet goes to the back, tried again after orphan_retry_atom.
  std::deque<std::pair<std::string, uint64_t>> orphans;
  bool orphan_in_flight = false;
  bool orphan_retry_armed = false;
  std::unordered_map<uint64_t, int> orphan_tries;  ///< not taken so far, by id
  /// Children placed on other nodes: who takes the messages about them (their placeholder,
  /// or the root rolling their tree back).
  std::unordered_map<uint64_t, caf::actor> remote_routes;
  /// Of those, the children held passivated by their parent (the route is the parent): told
  /// to spawn the placeholder (wake_child_atom) rather than the messages themselves.
  std::unordered_set<uint64_t> remote_via;
  /// Ends of such children journaled here (a serialized pb::RemoteEnd, and the time of the
  /// Finished record that journaled it), told again to whoever registers for the child
  /// later; forgotten when the tree ends.
  struct remote_end_note {
    std::string bytes;
    int64_t at_ms = 0;
  };
  std::unordered_map<uint64_t, remote_end_note> remote_ends;
  uint64_t undos = 0;  ///< undos done
  /// Heartbeats from nodes not in --peers, or expecting another node at this address.
  uint64_t misdirected_pings = 0;
  /// `tree` views that lack the parts of a node that did not answer.
  uint64_t incomplete_views = 0;
  uint64_t undo_failures = 0;  ///< undos that threw (each is retried)
  uint64_t retries = 0;        ///< operators' retries (since the node started)
  uint64_t resubmits = 0;      ///< operators' resubmits (since the node started)
  /// Operators' resubmits of ROLLEDBACK trees (executor_resubmit.cpp): old root -> new root,
  /// and back, from the new roots' Submitted records (or summaries) this node holds.
  std::unordered_map<uint64_t, uint64_t> resubmitted_as;
  std::unordered_map<uint64_t, uint64_t> resubmitted_from;
  /// The new root's Submitted record's LSN (0: unknown, a summary only), for `history`.
  std::unordered_map<uint64_t, uint64_t> resubmit_lsn;

  // -- recovery (executor_recovery.cpp) ------------------------------------------------------
  /// Taking over the trees read back from the journal, possibly while the scan still runs
  /// (docs/concepts.md, "Recovery"): the journal does not exist yet, nor are the procedure ids
  /// known that the node has handed out. Nothing may run, write or wake until the take-over
  /// ends; what would is kept here and done then (recover_end).
  bool recovering = false;
  struct recovery_tally {
    size_t running = 0, rolling = 0, done = 0, quarantined = 0, passivated = 0, events = 0;
    std::chrono::steady_clock::time_point since;
  } tally;
  std::vector<std::pair<std::shared_ptr<const tree_image>, bool>> to_start;  ///< (image, rollback)
  struct tree_wake_arm {
    uint64_t root_id = 0;
    int64_t deadline_ms = 0;
    uint64_t token = 0;
  };
  std::vector<tree_wake_arm> to_arm;  ///< passivated trees' earliest deadlines
  std::vector<uint64_t> to_wake;      ///< passivated trees woken (an event kept while down)
  /// The procedures read back waiting for the key of an event read back (by key: the
  /// Suspended record of the wait, the procedure), and the events the trees read back say
  /// were consumed: recover_end hands the events out as they were before the restart.
  std::unordered_map<std::string, std::vector<std::pair<uint64_t, uint64_t>>> recovered_waiters;
  std::unordered_set<uint64_t> recovered_consumed;
};

using executor_actor = caf::stateful_actor<executor_state>;


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

/// Procedure `id`, registered by its actor `child` for event `key`, is to be woken through
/// `parent` from now on (it gives up its actor: proc_passivate_waiter.cpp). False if that registration
/// is gone (the event is on its way to the actor).
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
void keep_history(executor_actor* self, uint64_t root_id, std::string summary,
                  uint64_t records);
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

// -- requests and events (executor_requests.cpp) ----------------------------------------------
/// Answers one wire request (rpc.hpp).
void handle_request(executor_actor* self, const std::string& bytes, promise_t rp);
/// A status, wait, abort or release of an id another node handed out (and not held here)
/// goes to that node, its answer back unchanged; UNREACHABLE when it does not answer. False:
/// answer it here (executor_forward.cpp).
bool forward_to_owner(executor_actor* self, const pb::Request& req, const std::string& bytes,
                      promise_t& rp);
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
bool event_seen(executor_actor* self, const std::string& key, const std::string& id,
                promise_t& rp);
/// Event `key` with id `id` is being journaled (its EventIdSeen goes into `b`).
void event_id_staged(executor_actor* self, const std::string& key, const std::string& id,
                     int64_t at_ms, journal_batch& b);
/// ... it is durable (`lsn`: the batch's last, its EventIdSeen), answered `answer`.
void event_id_accepted(executor_actor* self, const std::string& key, const std::string& id,
                       uint64_t lsn, const std::string& answer);
/// Drops the ids older than the events' TTL (and their records).
void sweep_event_ids(executor_actor* self);
using event_id_sweep_atom = caf::atom_constant<caf::atom("evidsweep")>;
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
/// A count of the peers' links, over all peers (peer_status::refusals, ::downs, ...).
uint64_t peer_total(executor_actor* self, uint64_t peer_status::*count);
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
/// Journals a new root of `type` made of `inst` and starts it; answers its id once its
/// Submitted record is durable (with a nonce: every submit of that nonce waiting for it),
/// after `on_durable` ran (executor_requests.cpp).
// -- recurring schedules (executor_schedules.cpp, executor_schedule_firing.cpp) -----------------
void handle_schedule(executor_actor* self, const pb::ScheduleRequest& req, promise_t rp);
/// Reads `e.rec`'s cron and zone into `e.cron` and `e.zone`: "", or why this binary cannot
/// (a journaled cron it does not parse, a zone its time zone database lacks).
std::string read_schedule_spec(executor_state::schedule_entry& e);
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
int64_t next_fire_ms(const executor_state::schedule_entry& e);
/// Submits a run of schedule `name` for fire time `fire_ms` (manual: `schedule trigger`),
/// journaled with the schedule's record in one batch; `done(id)` once durable (0: refused,
/// with `why`).
void fire_schedule(executor_actor* self, const std::string& name, int64_t fire_ms, bool manual,
                   bool buffered, std::function<void(uint64_t id, std::string why)> done);

void submit_root(executor_actor* self, const std::string& type, std::unique_ptr<procedure> inst,
                 const std::string& nonce, int32_t priority, uint64_t resubmitted_from,
                 promise_t rp, std::function<void(uint64_t id, uint64_t last_lsn)> on_durable = {},
                 std::function<void(journal_batch&, uint64_t id)> extend = {});
/// Lists each type's limits and load, or changes a type's (answered once journaled):
/// executor_limits.cpp.
void handle_limits(executor_actor* self, const pb::LimitsRequest& req, promise_t rp);
/// `proctor node forget` (executor_forget.cpp).
void handle_forget(executor_actor* self, const pb::NodeForgetRequest& req, promise_t rp);
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
/// Rolls back executor_state::orphans one after the other (executor_forget.cpp).
void roll_back_orphans(executor_actor* self);

/// Keeps an event for procedures that suspend on its key later, until its TTL.
void keep_event(executor_actor* self, const std::string& key, pending_event ev);
/// Arms the expiry of kept event `ev` (keep_event does; recovery does it for the events it
/// read back once its take-over ends).
void arm_event_ttl(executor_actor* self, const std::string& key, const pending_event& ev);

}  // namespace proctor::exec_detail
