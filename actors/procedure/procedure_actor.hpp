// One actor per procedure. It runs the procedure's steps (on the scheduler's workers),
// journals every outcome and acts on it only once the journal acknowledged it. A parent's
// actor supervises its children's actors (links, trapped exits, restart policy); the root's
// actor supervises the whole tree and owns its rollback.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/base/node_env.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

/// The executor hands a procedure that suspended on an event its wake-up:
/// (wait_event_atom, key, id, actor) registers the actor as waiting for `key`.
using wait_event_atom = caf::atom_constant<caf::atom("waitevent")>;

/// What a procedure waiting for event `key` shows as waiting_for.
inline std::string event_wait_reason(const std::string& key) {
  return "event " + key;
}

/// The records its tree holds in the journal, shared by every actor of the tree (they run
/// on one node). Each append adds its records; past `threshold` the root compacts the tree
/// into one record (tree_compaction.cpp).
struct tree_journal_count {
  std::atomic<uint64_t> records{0};
  std::atomic<bool> compacting{false};  ///< asked of the root, or under way
  uint64_t threshold = 0;               ///< 0: never compacted
  /// The count at which the root is asked: `threshold`, or further out after a compaction
  /// found its snapshot too large to write.
  std::atomic<uint64_t> next_at{0};
};

/// Procedure actors started in this process so far (a metric and proctor-bench's count of
/// spawns per procedure: docs/benchmarks.md). One relaxed increment per spawn.
uint64_t procedure_actors_started();

/// How a procedure actor starts.
struct proc_start {
  env_ptr env;
  /// The tree as journaled; the actor takes its own procedure's entry (and those of its
  /// live descendants, whose actors it spawns).
  std::shared_ptr<const tree_image> image;
  uint64_t id = 0;
  /// Its own entry in `image` when the spawner has it at hand (a parent waking a passivated
  /// child), else null and looked up: a wide tree's image is a map of many thousands.
  const proc_image* entry = nullptr;
  caf::actor parent;                ///< invalid for a root
  caf::actor root;                  ///< invalid for a root
  bool rollback = false;            ///< root only: the tree failed; run its rollback
  std::vector<uint64_t> ancestors;  ///< parent, grandparent, ... (their locks are usable)
  /// A procedure just submitted: its instance as the submit built it (else it is rebuilt
  /// from the image's data), and the executor shows it RUNNABLE already.
  std::shared_ptr<procedure> submitted;
  /// Just spawned by its parent's committed step: none of its states has started yet.
  bool fresh = false;
  /// The parent's registered type (nullptr for a root): a child placed on another node
  /// waits for its node as the parent's type says (node_loss_policy).
  const procedure_type* parent_type = nullptr;
  /// The whole tree's root as its steps see it (ctx.root_id()), from the parent; 0 for a
  /// root, which takes it from its own journal entry (a fragment's names the tree's root).
  uint64_t tree_root_id = 0;
  /// A passivated child woken by its parent because its timer came due (the timeout actor sent
  /// that wake-up in deadline order): it runs at once instead of arming the timer again.
  bool timer_due = false;
  /// Its parent's join policy handles its failure (a spawn's join other than join::all
  /// with cancel_siblings): it reports the failure to its parent, not to the root.
  bool failure_contained = false;
  /// Its tree's record count, from its parent (null for a root, which makes it).
  std::shared_ptr<tree_journal_count> tree_records;
};

/// Spawns a root procedure's actor, supervised by `supervisor` (the executor): an exit other
/// than its normal end (after tree_done or fragment_done) is reported to it as
/// (root_down_atom, root id, address, reason), so a crashed root is restarted by it; a
/// stopping executor takes the trees along.
caf::actor spawn_root(caf::event_based_actor* supervisor, proc_start start);

}  // namespace proctor
