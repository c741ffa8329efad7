// A procedure's status (proc_update, as the executor shows it and a child reports its end)
// from its entry in a tree's image, and back. Used by the procedure actor (a parent's image of
// its children's ends, a tree's summary) and by the executor (recovery, views).
#pragma once

#include <cstdint>
#include <vector>

#include "actors/base/messages.hpp"
#include "persistence/tree_image.hpp"

namespace proctor {

/// Builds the final status of a procedure from its image.
proc_update update_from_image(const tree_image& t, const proc_image& p);

/// The inverse for an ended procedure: the image entry its reported status stands for, from
/// which update_from_image gives that status back (a parent's image of the ends its children
/// reported, proc_sleep.cpp).
proc_image image_from_update(const proc_update& u);

/// The final statuses of `id` and its descendants, as an ended child would have reported.
void collect_subtree(const tree_image& t, uint64_t id, std::vector<proc_update>* out);

}  // namespace proctor
