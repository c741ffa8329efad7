// Trees across nodes (docs/cluster.md): the messages between a node's actors about
// children placed on other nodes, and the placeholder actor that stands for such a child in
// its parent's tree.
//
// A child placed on node B is, in its parent's node A, a placeholder procedure (Submitted
// with `node` = B) whose actor (remote_child) waits for the child's end; on B it is the root
// of a *fragment*: a tree of B's journal whose root has a parent on A. The fragment runs
// like any tree and reports its end to A through the outbox (RemoteEnd). A fragment that
// fails rolls itself back (no step outside it can have seen its effects: it had not ended)
// and reports ROLLEDBACK, which fails A's tree. A fragment that succeeded is kept, records
// and all, until A's tree ends (RemoteRelease), because A's rollback may still order it
// undone (RemoteRollback) — in reverse causal order: see rollback_plan.
#pragma once

#include <map>
#include <string>

#include <caf/all.hpp>

#include <proctor/journal.pb.h>
#include <proctor/outcome.hpp>

#include "actors/procedure/procedure_actor.hpp"
#include "persistence/actor_messages.hpp"

namespace proctor {

/// (remote_end_atom, serialized pb::RemoteEnd, int64_t at_ms): a child's end arrived from
/// its node and is durable here, in a Finished record of time `at_ms`. Sent by the executor
/// to whoever routes the child's id.
using remote_end_atom = caf::atom_constant<caf::atom("rmtend")>;
/// (remote_route_atom, uint64_t id, caf::actor): messages about child `id` go to the actor.
using remote_route_atom = caf::atom_constant<caf::atom("rmtroute")>;
/// (remote_route_via_atom, uint64_t id, caf::actor parent): child `id` is passivated (its
/// placeholder gave up its actor, or was never spawned: proc_passivated_children.cpp) and `parent`
/// holds it: the executor tells the parent (wake_child_atom) once the child's end is journaled
/// here, or its node is down, and the parent spawns the placeholder, which registers itself
/// (remote_route_atom) and is told the end.
using remote_route_via_atom = caf::atom_constant<caf::atom("rmtvia")>;
/// (remote_passivate_via_atom, uint64_t id, caf::actor parent) -> bool, placeholder -> executor:
/// route child `id`'s messages to `parent` from now on, unless the child's end is here
/// already (on its way to the placeholder, which then keeps its actor): true if switched.
using remote_passivate_via_atom = caf::atom_constant<caf::atom("rmtsleep")>;
/// (remote_rollback_atom, std::string reason) -> bool, executor -> fragment root: the parent's
/// tree rolls back: roll the fragment back; true once that is durable (false: it is past a
/// point of no return).
using remote_rollback_atom = caf::atom_constant<caf::atom("rmtrb")>;
/// (remote_lost_atom, uint64_t id), placeholder or rolling-back root -> executor: child `id`
/// was placed on a node an operator forgot (cluster_view::lost): the executor journals its end
/// as lost (FAILED, "not undone: node b forgotten ...") in its tree and tells whoever routes
/// it, as for an end that came from its node (docs/cluster.md, "Forgetting a node").
using remote_lost_atom = caf::atom_constant<caf::atom("rmtlost")>;
/// (fragment_done_atom, tree_done), fragment root -> executor: the fragment succeeded; its
/// records stay until released.
using fragment_done_atom = caf::atom_constant<caf::atom("fragdone")>;

struct proc_actor_state;
using proc_actor = caf::stateful_actor<proc_actor_state, counted_actor<actor_kind::procedure>>;

/// The records a spawn step writes for child `c` placed on another node: its placeholder's
/// Submitted and the RemoteSpawn for the outbox. A non-empty result is why it cannot be
/// placed there (the step fails with it).
std::string stage_remote_child(proc_actor* self, const child_spec& c, uint64_t cid,
                               pb::JournalRecord* sub, pb::PeerMessage* msg);

/// A parent's supervision policy as it travels with a spawn to another node, and back. The
/// strategy stays behind: siblings on other nodes are not restarted together.
pb::Supervision to_pb(const supervision_policy& p);
supervision_policy from_pb(const pb::Supervision& p);

/// Resolves `c.on_any_node()`: sets `c.node` to the node the child goes to (this node's
/// name, or "" on a node without a name, for here) and counts it in `placed` (the children
/// this step placed on each node so far, so one step spreads its children). A non-empty
/// result is why no node can take it.
std::string place_on_any_node(proc_actor* self, child_spec& c,
                              std::map<std::string, uint64_t>& placed);

/// Spawns the placeholder of a child that runs on another node (its caller watches it:
/// watch_child).
caf::actor spawn_remote_child(caf::event_based_actor* parent, proc_start start);

}  // namespace proctor
