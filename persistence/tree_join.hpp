// What a tree image says of a parent's join policy (docs/flow-control.md, "Join policies"),
// for the checks that decide whether a tree read back only waits: a parent whose join is met
// with children left to cancel, whose join can no longer be met, or which has cancelled
// children still to undo, acts as soon as its actor runs (actors/procedure/proc_cancel.cpp).
#pragma once

#include "persistence/tree_image.hpp"

namespace proctor {

/// True when `p`, a parent waiting for the children of its last spawn, has its join to act
/// on: a cancellation journaled and not finished, a join met while some of those children
/// have not ended, or (child_failure::cancel_siblings) a join that can no longer be met.
bool join_acts(const tree_image& t, const proc_image& p);

}  // namespace proctor
