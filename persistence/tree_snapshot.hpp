// A tree's journal compacted into one record (docs/flow-control.md, "Self-compacting trees").
// A tree that loops for weeks would grow its journal by a record per step; past a threshold
// its root folds the tree as journaled up to the last record, L, and writes that image as one
// TreeSnapshot record at key L, in one batch with the range delete of the tree's records below
// L. The fold then meets the snapshot first and folds every later record on top of it, so it
// reads back exactly what it read from the records the snapshot replaced (the property
// tests/engine/tree_snapshot_test.cpp checks).
//
// The rollback plan is kept: every committed step a rollback could still undo stays in the
// snapshot with its data. Only what no plan can contain is left out: steps already undone,
// and steps past a point of no return (their undo is never run). A loop whose state can be
// undone therefore keeps each iteration's undo data: the tree's records stay bounded, their
// bytes do not; a loop whose state cannot be undone (rollback_supported false, as a
// reconciler's) compacts to the size of its live procedures.
#pragma once

#include <cstdint>

#include <proctor/journal.pb.h>

#include "persistence/tree_image.hpp"

namespace proctor {

/// The snapshot of `unfolded` (a tree_folder's image before finish(), folded up to its
/// last_lsn), written at `at_ms`.
pb::TreeSnapshot snapshot_of(const tree_image& unfinished, int64_t at_ms);

/// Replaces `t` (a fold in progress) with the snapshot `s` found at `lsn`.
void restore_snapshot(tree_image& t, uint64_t lsn, const pb::TreeSnapshot& s);

}  // namespace proctor
