// Placement by key (docs/cluster.md, "Placement by key"): a submit with a key, or with a
// nonce and no key, runs on the node that owns the key's slot (actors/base/placement.hpp),
// whichever node was asked: the node asked forwards it there and answers with the owner's
// answer, so a nonce is answered by one node in the cluster and the same nonce sent to two
// nodes starts the work once. Nothing is accepted on a guess:
//   - the owner is unreachable: refused here (UNREACHABLE), nothing started, to be retried;
//   - the nodes that are up disagree on the members (a --peers mistake, or a node forgotten
//     on some nodes and not yet on the others): refused (REFUSED) until they agree;
//   - a forwarded submit whose sender's table is not this node's, or whose slot this node
//     does not own: refused, never run here and there.
#include <algorithm>
#include <random>

#include <spdlog/spdlog.h>

#include "actors/base/errors.hpp"
#include "actors/base/placement.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/executor/internal/executor_state.hpp"

namespace proctor::exec_detail {

/// The table of this node's members now, rebuilt when they change (a node forgotten).
const placement::table& placement_now(executor_actor* self) {
  auto& st = self->state;
  auto names = st.env->cluster->node_names();
  if (!st.placement.table || st.placement.names != names) {
    auto members = *names;
    std::sort(members.begin(), members.end());
    members.erase(std::unique(members.begin(), members.end()), members.end());
    st.placement.table = std::make_shared<const placement::table>(std::move(members));
    st.placement.names = std::move(names);
  }
  return *st.placement.table;
}

namespace {

/// Why keyed submits are refused now: a peer that is up places on other members ("" when
/// every peer that answered agrees). A peer that says no members, of an earlier version,
/// places nothing by key (during a rolling upgrade its nonces stay its own, as before).
std::string disagreement(executor_actor* self, const placement::table& t) {
  auto other = self->state.env->cluster->first_disagreeing(t.members());
  if (!other)
    return {};
  return "the nodes disagree on the cluster's members: node " + self->state.env->node_name
         + " places on {" + comma_list(t.members()) + "}, node " + other->first + " on {"
         + comma_list(other->second)
         + "} (their --peers differ, or a node forgotten on one is still up on the other: it "
           "follows once that node is down there); nothing was started, retry once they agree";
}

}  // namespace

bool place_submit(executor_actor* self, const pb::Request& req, promise_t& rp) {
  auto& st = self->state;
  const auto& sub = req.submit();
  // The key places; without one, the nonce does, unless it is the CLI's own.
  std::string key = sub.key();
  if (key.empty() && !sub.nonce_local())
    key = sub.nonce();
  const auto& t = placement_now(self);
  // A node that takes no new work (draining: docs/cluster-group.md) places even a submit
  // without a key, by its nonce, on an active member.
  const bool drains =
    !t.members().empty()
    && !std::binary_search(t.members().begin(), t.members().end(), st.env->node_name)
    && st.env->cluster->is_not_placeable(st.env->node_name);
  if (key.empty() && drains && sub.placement() == 0)
    key = !sub.nonce().empty() ? sub.nonce() : std::to_string(std::random_device{}());
  if (key.empty() && sub.placement() == 0)
    return false;  // the node asked runs it
  const auto slot = placement::slot_of(key);
  // A nonce placed in a slot this node owns: answered here only once it holds every nonce
  // the cluster knows in that slot (after a change of members: executor_handoff.cpp).
  auto taking_over = [&] {
    if (sub.nonce().empty() || sub.nonce_local())
      return false;
    auto why = handoff_refusal(self, slot);
    if (why.empty())
      return false;
    reply(rp, error_reply(pb::Response::REFUSED, why));
    return true;
  };
  if (t.members().size() <= 1 && sub.placement() == 0 && !drains)
    return taking_over();  // a node alone owns every slot
  const std::string& owner = t.owner(slot);
  // Built only when an answer names the slot: not for the submits that run here.
  auto where = [&] {
    return "slot " + std::to_string(slot) + " of " + std::to_string(placement::slot_count)
           + ", owned by node " + owner;
  };
  if (sub.placement() != 0) {
    // Forwarded by a peer that took this node for the owner.
    std::string why;
    if (sub.placement() != t.fingerprint())
      why = "node " + st.env->node_name + " places on other members ({" + comma_list(t.members())
            + "}) than the node that sent it";
    else if (owner != st.env->node_name)
      why = "node " + st.env->node_name + " does not own its key's " + where();
    if (why.empty())
      return taking_over();  // the owner: run it here (the nonce is checked here)
    spdlog::warn("node {}: a submit forwarded for key '{}' refused: {}", st.env->node_name, key,
                 why);
    reply(rp, error_reply(pb::Response::REFUSED,
                          "the submit was not accepted: " + why + "; nothing was started, retry"));
    return true;
  }
  if (auto why = disagreement(self, t); !why.empty()) {
    reply(rp, error_reply(pb::Response::REFUSED, why));
    return true;
  }
  if (owner == st.env->node_name)
    return taking_over();
  if (!st.env->transport) {
    reply(rp,
          error_reply(pb::Response::UNREACHABLE, "the submit's key belongs to " + where()
                                                   + ", and this node has no links to its peers"));
    return true;
  }
  if (auto s = st.env->cluster->get(owner); s && !s->up) {
    reply(rp, error_reply(pb::Response::UNREACHABLE,
                          "the submit's key belongs to " + where() + ", which is "
                            + s->down_since_text()
                            + ": nothing was started; retry, it is placed there again"));
    return true;
  }
  pb::Request fwd = req;
  fwd.set_tag(1);  // from a peer: answered there, never sent on (executor_forward.cpp)
  fwd.mutable_submit()->set_placement(t.fingerprint());
  fwd.mutable_submit()->set_key(key);  // the key it was placed by (a draining node's nonce)
  const auto timeout = std::chrono::milliseconds{30'000};
  self
    ->request(st.env->transport, timeout + std::chrono::seconds{1}, peer_request_atom::value, owner,
              fwd.SerializeAsString(), static_cast<uint32_t>(timeout.count()))
    .then([rp](std::string& answer) mutable { reply(rp, std::move(answer)); },
          [self, rp, owned = where()](caf::error& e) mutable {
            // Sent, and no answer: it may have been accepted there. The same nonce sent again
            // (to any node) answers the same id once the owner answers.
            reply(rp, error_reply(pb::Response::UNREACHABLE,
                                  "the submit's key belongs to " + owned
                                    + ", which did not answer (" + error_text(self->system(), e)
                                    + "): it may have been accepted there; send it again with "
                                      "the same nonce to learn its id"));
          });
  return true;
}

}  // namespace proctor::exec_detail
