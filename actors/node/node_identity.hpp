// A node's name and number, fixed by its data directory on the first start with --name
// (the file NODE beside the journal). Procedure ids carry the number in their high bits
// (node.hpp: id_node_shift), so they are unique across the cluster and any node can tell
// which node handed one out.
#pragma once

#include <cstdint>
#include <string>

#include <caf/all.hpp>

namespace proctor {

struct node_identity {
  std::string name;     ///< "" for a node never given a name
  uint16_t number = 0;  ///< 1..4095 for a named node
};

/// The number a node of this name gets: 12 bits, never 0 (FNV-1a of the name).
uint16_t node_number_of(const std::string& name);

/// The identity kept in `data_dir`, read only: what is stored (nothing: an empty identity),
/// or a one-line error when `requested` is not a valid name, the file is damaged, or it names
/// another node than `requested` (non-empty). A standby checks this before it waits, so a
/// wrong --name is refused at its start, not when the active process dies.
caf::expected<node_identity> stored_identity(const std::string& data_dir,
                                             const std::string& requested);

/// The identity kept in `data_dir` (which must exist). With `requested` non-empty: stored
/// on the first start; a later start with another name is refused with a one-line error
/// naming both. With `requested` empty: whatever is stored (nothing: unnamed).
caf::expected<node_identity> settle_identity(const std::string& data_dir,
                                             const std::string& requested);

}  // namespace proctor
