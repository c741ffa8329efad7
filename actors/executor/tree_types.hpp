// Whether this node can run a recovered tree: every procedure's type registered, and every
// data blob the tree may still load (its current data, the data its undos start from) of
// the registered version or upgradable to it. A journal written by another version of the
// program must not run the wrong code silently: recovery quarantines a tree that fails this.
#pragma once

#include <string>

#include <proctor/registry.hpp>

#include "persistence/tree_image.hpp"

namespace proctor {

/// "" if `types` can run (and roll back) the unfinished tree `t`, otherwise a one-line reason
/// naming the first procedure that cannot be loaded: "procedure 7 of type acme.copy was
/// written by version 3; this node knows version 2 (no downgrade)". Runs the upgrades of
/// data of older versions, so an upgrade that throws is found before anything of the tree
/// runs.
std::string tree_type_problem(const registry& types, const tree_image& t);

}  // namespace proctor
