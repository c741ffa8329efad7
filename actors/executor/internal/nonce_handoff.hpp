// Internal: the executor's part that hands nonces over when placement slots move
// (docs/cluster-group.md, "Nonces when slots move"). Only executor_handoff.cpp touches its
// fields; executor_placement.cpp asks whether a slot may take nonces (handoff_refusal),
// executor_requests.cpp whether a nonce was taken over (nonce_taken_id) and counts the nonce
// submits in flight per slot (nonce_submit_started/ended), executor_recovery.cpp and
// executor_retention.cpp keep the slots of roots placed by a key (root_nonce_slot/dropped).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <proctor/wire.pb.h>

#include "actors/base/peer_status.hpp"
#include "actors/executor/executor.hpp"
#include "actors/executor/internal/executor_fwd.hpp"
#include "actors/executor/internal/executor_types.hpp"

namespace proctor::placement {
class table;
}  // namespace proctor::placement

namespace proctor::exec_detail {

/// A nonce another node accepted, taken over with its slot.
struct taken_nonce {
  uint64_t id = 0;
  uint32_t slot = 0;
  int64_t ended_at_ms = 0;  ///< 0: not ended when taken
  uint64_t lsn = 0;         ///< its NonceTaken record
};

struct nonce_handoff_part {
  uint64_t epoch = 0;  ///< the placement epoch of the table now (0: none heard yet)
  int64_t epoch_since_ms = 0;
  /// The last epoch at which this node held every nonce of every slot it owned (`node
  /// remove` of a draining node asks every active member for it).
  uint64_t ready_epoch = 0;
  /// Per slot: this node owns it at `epoch` and holds every nonce the cluster knows of it
  /// (it accepts nonces placed in it).
  std::vector<bool> complete;
  std::vector<uint32_t> pulling;   ///< the slots it owns at `epoch` and is taking over
  std::set<std::string> awaiting;  ///< the members that have not answered for them at `epoch`
  std::map<std::string, std::string> why;  ///< the last reason an awaited one gave
  std::vector<std::string> others;         ///< the active and draining members but this node
  std::vector<std::string> active;         ///< the active ones
  /// The epoch at which this node began to drain (its member's since_index; 0: not draining).
  uint64_t drain_epoch = 0;
  std::unordered_map<std::string, taken_nonce> taken;
  /// Roots of this node placed by a key other than their nonce: the key's slot.
  std::unordered_map<std::string, uint32_t> root_slots;
  /// Per slot: submits with a nonce whose Submitted record is not durable yet.
  std::vector<uint32_t> pending;
  bool sweep_armed = false;
};

// -- executor_handoff.cpp --------------------------------------------------------------------
/// Whether this node takes part in a founded cluster group whose members it heard since it
/// started (cluster-wide settings go through the group then).
bool in_cluster_group(executor_actor* self);
/// The placement table now (executor_placement.cpp).
const placement::table& placement_now(executor_actor* self);
/// The members the group published (on_cluster_peers): a new epoch starts a handoff.
void handoff_members(executor_actor* self, const std::vector<cluster_peer>& members);
/// "" when this node may accept a submit with a nonce placed in `slot` (it has every nonce
/// the other members know of it), else why not, for the client ("retry").
std::string handoff_refusal(executor_actor* self, uint32_t slot);
/// The root a nonce taken over started, if any.
std::optional<uint64_t> nonce_taken_id(executor_actor* self, const std::string& nonce);
/// A submit with a nonce placed in `slot` is on its way to the journal / is durable.
void nonce_submit_started(executor_actor* self, uint32_t slot);
void nonce_submit_ended(executor_actor* self, uint32_t slot);
/// A root placed by key slot `slot` (one other than its nonce's) holds `nonce`; dropped.
void root_nonce_slot(executor_actor* self, const std::string& nonce, uint32_t slot);
void root_nonce_dropped(executor_actor* self, const std::string& nonce);
/// The NonceTaken records read back.
void nonces_taken_recovered(executor_actor* self, std::vector<recovered_nonce>& taken);
/// A peer's NonceHandoffRequest.
void handle_nonce_handoff(executor_actor* self, const pb::NonceHandoffRequest& req, promise_t rp);
/// "" once every active member holds this draining node's nonces durably, else why not
/// (`node remove` asks; answered through `rp` as a string).
void handoff_check(executor_actor* self, caf::typed_response_promise<std::string> rp);
/// Asks `member` again, if it is still awaited at `epoch`.
void handoff_retry(executor_actor* self, const std::string& member, uint64_t epoch);
void sweep_taken_nonces(executor_actor* self);
using handoff_retry_atom = caf::atom_constant<caf::atom("hoffretry")>;
using handoff_sweep_atom = caf::atom_constant<caf::atom("hoffsweep")>;

}  // namespace proctor::exec_detail
