// What a folded tree says its rollback must undo, newest first, and how far an undo got
// (declared in tree_image.hpp).
#include <algorithm>
#include <cstdint>
#include <iterator>

#include "persistence/tree_image.hpp"

namespace proctor {

std::vector<undo_item> rollback_plan(const tree_image& tree) {
  std::vector<undo_item> plan;
  // States that may have run partly: every procedure that had not ended. Newest first.
  for (auto i = tree.procs.rbegin(); i != tree.procs.rend(); ++i) {
    const auto& p = i->second;
    if (p.remote()) {
      if (!p.remote_undone && p.remote_end_lsn == 0)
        plan.push_back(undo_item{p.id, 0, UINT64_MAX, {}, 0, true});
      continue;
    }
    if (is_final(p.status) || p.partial_undone || p.steps_ended)
      continue;
    // A failure outside a step (failed_state 0: escalation, abort) leaves the current state.
    auto state = p.failed && p.failed_state != 0 ? p.failed_state : p.state;
    plan.push_back(undo_item{p.id, state, 0, p.data, p.data_version});
  }
  std::vector<undo_item> steps;
  for (const auto& [id, p] : tree.procs) {
    if (p.remote() && !p.remote_undone && p.remote_end_lsn != 0)
      steps.push_back(undo_item{id, 0, p.remote_end_lsn, {}, 0, true});
    for (const auto& s : p.steps)
      if (!s.undone && !s.no_return)
        steps.push_back(undo_item{id, s.executed_state, s.lsn, s.data, s.data_version});
  }
  std::sort(steps.begin(), steps.end(),
            [](const undo_item& a, const undo_item& b) { return a.lsn > b.lsn; });
  plan.insert(plan.end(), std::make_move_iterator(steps.begin()),
              std::make_move_iterator(steps.end()));
  return plan;
}

const undo_task_image* undo_task_of(const tree_image& tree, const undo_item& item) {
  if (item.remote || tree.undo_tasks.empty())
    return nullptr;
  auto i = tree.undo_tasks.find({item.proc_id, item.lsn});
  return i == tree.undo_tasks.end() || i->second.state != item.state ? nullptr : &i->second;
}

size_t undos_done(const tree_image& tree) {
  size_t n = tree.undos_dropped;
  for (const auto& [id, p] : tree.procs) {
    n += p.partial_undone || p.remote_undone ? 1 : 0;
    for (const auto& s : p.steps)
      n += s.undone && !s.no_return ? 1 : 0;
  }
  return n;
}

}  // namespace proctor
