// Statuses of procedures read back from a tree's image, and the inverse: what the executor
// shows of a tree it read from the journal, and what a parent keeps of its children's ends.
#include "actors/procedure/tree_status.hpp"

namespace proctor {

proc_update update_from_image(const tree_image& t, const proc_image& p) {
  proc_update u;
  u.id = p.id;
  u.root_id = t.root_id;
  u.parent_id = p.parent_id;
  u.type = p.type;
  u.state = p.status;
  u.children = p.children;
  u.error = p.error;
  u.result_json = p.result_json;
  u.nonce = p.nonce;
  u.node = p.node;
  u.ended = is_final(p.status);
  u.started_at_ms = p.submitted_at_ms;
  u.since_ms = p.since_ms;
  u.bypassed = p.bypassed;
  if (u.ended)
    u.ended_at_ms = p.ended_at_ms != 0 ? p.ended_at_ms : t.finished_at_ms;
  return u;
}

proc_image image_from_update(const proc_update& u) {
  proc_image p;
  p.id = u.id;
  p.parent_id = u.parent_id;
  p.type = u.type;
  p.status = u.state;
  p.children = u.children;
  p.error = u.error;
  p.result_json = u.result_json;
  p.nonce = u.nonce;
  p.node = u.node;
  p.submitted_at_ms = u.started_at_ms;
  p.since_ms = u.since_ms;
  p.ended_at_ms = u.ended_at_ms;
  p.bypassed = u.bypassed;
  return p;
}

void collect_subtree(const tree_image& t, uint64_t id, std::vector<proc_update>* out) {
  const auto* p = t.find(id);
  if (p == nullptr)
    return;
  out->push_back(update_from_image(t, *p));
  for (auto c : p->children)
    collect_subtree(t, c, out);
}

}  // namespace proctor
