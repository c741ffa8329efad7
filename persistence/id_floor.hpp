// The node's high-water marks (journal.proto IdFloor), kept at (meta_root, id_floor_lsn): ids
// below next_id were handed out, LSNs below next_lsn were written. The journal writes it with
// every batch that deletes; a new journal's executor writes it once its peers told it where its
// ids begin (actors/executor/executor_progress.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace proctor {

/// Ids a new incarnation begins above the highest an earlier one of its name reported (to its
/// peers, or to the cluster group): those it may have handed out after its last report, with
/// room to spare: 2^26 (67 million; the id space of a node, 2^40, holds 16,384 such starts).
inline constexpr uint64_t fresh_id_gap = uint64_t{1} << 26;

/// The serialized IdFloor record.
std::string id_floor_record(uint64_t next_id, uint64_t next_lsn);

}  // namespace proctor
