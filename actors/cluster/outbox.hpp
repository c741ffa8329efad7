// The outbox: delivers the messages to other nodes that must not be lost (a remote child's
// spawn, its end, a rollback order, a release; journal.proto PeerMessage). Each is an
// OutboxRecord in the journal (the node's range, root 0) written in the same batch as the
// step that caused it; once that batch is durable the writer hands the records here. The
// outbox sends each peer its messages in journal order, in batches (wire.proto
// PeerDeliver), until the peer acknowledges them — it does so only once it made them
// durable — and only then deletes them; a peer that does not answer is tried again with
// back-off, across restarts of either side (recovery hands back every record left).
// Receivers deduplicate, so a message delivered twice does no harm.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <proctor/journal.pb.h>

#include "persistence/journal.hpp"

namespace proctor {

using outbox_add_atom = caf::atom_constant<caf::atom("obxadd")>;
using outbox_kick_atom = caf::atom_constant<caf::atom("obxkick")>;
using outbox_stats_atom = caf::atom_constant<caf::atom("obxstats")>;
/// (outbox_left_atom, peer): the peer stopped in order (it said so): its messages wait for
/// its return without a warning at each failed try (the next kick clears it).
using outbox_left_atom = caf::atom_constant<caf::atom("obxleft")>;
/// (outbox_forget_atom, peer, uint64_t lsn) -> size_t: an operator forgot the peer (its
/// NodeForgotten record is at `lsn`): the messages for it journaled before are dropped and
/// their records deleted (what they carried is declared lost); answers how many.
using outbox_forget_atom = caf::atom_constant<caf::atom("obxfgt")>;
/// The transport's protocol: (peer_request_atom, peer name, serialized pb::Request,
/// timeout_ms) -> serialized pb::Response (or an error: the peer is unknown or unreachable).
using peer_request_atom = caf::atom_constant<caf::atom("peerreq")>;

/// A durable outbox record.
struct outbox_item {
  uint64_t lsn = 0;  ///< its key in the node's range
  std::string peer;
  std::string message;  ///< a serialized pb::PeerMessage
};

struct outbox_config {
  std::string node_name;
  uint64_t incarnation = 0;  ///< this node's, sent with every delivery
  caf::actor journal;
  /// Carries a request to a peer (the peers actor; tests route between in-process nodes).
  caf::actor transport;
  std::chrono::milliseconds reply_timeout{10'000};
  size_t max_batch = 512;  ///< messages per delivery
  std::chrono::milliseconds backoff_max{2'000};
};

/// What the outbox holds for each peer, for `proctor nodes` and the metrics.
struct outbox_stats {
  std::vector<std::pair<std::string, size_t>> pending;  ///< peer -> messages not acknowledged
  uint64_t delivered = 0;
  uint64_t failed_deliveries = 0;
};

/// Spawns the outbox with the records recovery found (any order).
caf::actor spawn_outbox(caf::actor_system& sys, outbox_config cfg,
                        std::vector<outbox_item> recovered);

/// Outbox records added to a journal batch; hand them to the outbox once it is durable.
class outbox_staging {
public:
  /// Appends an OutboxRecord for `peer` to `batch` (keep the batch's entries in order).
  void add(journal_batch& batch, const std::string& peer, const pb::PeerMessage& msg);
  bool empty() const noexcept { return items_.empty(); }
  /// `batch_last_lsn`: the LSN the journal acknowledged for the batch (its last entry's);
  /// `batch_size`: the number of entries in it.
  void hand_over(const caf::actor& outbox, uint64_t batch_last_lsn, size_t batch_size);

private:
  std::vector<std::pair<size_t, outbox_item>> items_;  ///< (index in the batch, item)
};

}  // namespace proctor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::outbox_item)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<proctor::outbox_item>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(proctor::outbox_stats)
