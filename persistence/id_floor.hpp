// The node's high-water marks (journal.proto IdFloor), kept at (meta_root, id_floor_lsn): ids
// below next_id were handed out, LSNs below next_lsn were written. The journal writes it with
// every batch that deletes; a new journal's executor writes it once its peers told it where its
// ids begin (actors/executor/executor_progress.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace proctor {

/// The serialized IdFloor record.
std::string id_floor_record(uint64_t next_id, uint64_t next_lsn);

}  // namespace proctor
