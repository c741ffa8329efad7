#include "persistence/tree_join.hpp"

namespace proctor {

bool join_acts(const tree_image& t, const proc_image& p) {
  size_t ok = 0, open = 0;
  for (auto c : p.last_spawned) {
    const auto* g = t.find(c);
    if (g == nullptr)
      continue;
    if (g->cancel_pending)
      return true;
    if (g->status == proc_state::success)
      ++ok;
    else if (!is_final(g->status))
      ++open;
  }
  if (!p.joins_tolerantly())
    return false;
  const size_t needed = p.join_at_least != 0 ? p.join_at_least : p.last_spawned.size();
  return (p.join_at_least != 0 && ok >= needed && open > 0)
         || (!p.join_wait && ok + open < needed && open > 0);
}

}  // namespace proctor
