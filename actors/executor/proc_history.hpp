// A procedure's journaled life (`proctor history`), read from its tree's records: each step with
// its state name, attempt, commit time and handler duration, the waits, events, failures, undos,
// its end, a bypass and an operator's retry. Pure: the executor reads the records, this names them.
#pragma once

#include <cstdint>

#include <proctor/registry.hpp>
#include <proctor/wire.pb.h>

#include "persistence/journal.hpp"

namespace proctor {

/// The entries of procedure `id` among `records` (one tree's, ascending LSN), state names
/// from `types` (numbers alone for a type not registered here). A tree held as its summary
/// only yields one "summary" entry and a note saying the step detail is gone.
pb::History history_of(uint64_t id, const journal_records& records, const registry& types);

}  // namespace proctor
