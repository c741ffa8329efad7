// Internal: the executor's part that keeps what each peer says of its own progress and what
// the peers say of this node (docs/cluster.md, "Procedure ids" and "A journal restored from a
// copy"). Only executor_progress.cpp touches it.
//
// Every heartbeat answer carries the answering node's next procedure id and its journal's
// last durable LSN (wire.proto NodeInfo). Each node keeps the highest of each per peer
// (journaled as PeerProgress, at most every few seconds or 2^16 ids, so that they survive its
// restarts) and tells the peer in return what it heard of it. So:
//   - a node whose journal is new (its first start, or a restart with an empty data directory
//     after `node forget`) holds the requests that need an id until every peer said where
//     this name's earlier incarnations' ids ended (its ids then begin above the highest, plus
//     a margin for ids handed out after the last report: fresh_gap) and one peer echoed where
//     this incarnation's begin (so that the next incarnation learns it), for at most
//     answer_bound: a peer that does not answer by then is not waited for (said in the log;
//     its word, should it come later, still raises the next ids);
//   - a node whose journal is older than what a peer heard of its own incarnation (a copy
//     restored after it ran on) refuses to serve: the work acknowledged after the copy is
//     lost, and its ids would be handed out again.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include <proctor/journal.pb.h>

namespace proctor::exec_detail {

struct peer_progress_entry {
  uint64_t next_id = 0;      ///< the highest heard, under any of its incarnations
  uint64_t incarnation = 0;  ///< the incarnation journal_lsn was heard from
  uint64_t journal_lsn = 0;  ///< the highest heard from that incarnation
  // Its PeerProgress record: where (0: none), and what it holds.
  uint64_t record_lsn = 0;
  pb::PeerProgress journaled;
  bool writing = false;  ///< a record is being written
};

struct peer_progress_part {
  /// Ids a new incarnation begins above the highest an earlier one reported: those it may
  /// have handed out after its last report reached the peers, and after the peers journaled
  /// it (they journal every 2^16 ids or 5 s), with room to spare: 2^26 (67 million; the id
  /// space of a node, 2^40, holds 16,384 such starts).
  static constexpr uint64_t fresh_gap = uint64_t{1} << 26;
  static constexpr uint64_t journal_ids = uint64_t{1} << 16;
  static constexpr int64_t journal_ms = 5000;
  /// How long a new journal waits for its peers' answers before it hands out ids without
  /// them: a few heartbeat rounds (a peer that is up answers within one, half a second).
  static constexpr std::chrono::seconds answer_bound{3};

  std::map<std::string, peer_progress_entry> peers;
  /// A new journal holds id-needing requests (until released, at most answer_bound), and
  /// journals where its ids begin before it lets them go (releasing).
  bool holding = false;
  bool releasing = false;
  /// ... the peers that have not answered yet, those whose floor was taken (once each:
  /// their echo of this node's own next id must not raise it again), and what each echoed.
  std::set<std::string> awaited;
  std::set<std::string> floor_taken;
  std::map<std::string, uint64_t> echoed;
  int64_t awaiting_since_ms = 0;
  /// Requests that need a new id (submit, resubmit, a delivery from a peer), held meanwhile.
  struct held_request {
    std::string bytes;
    caf::typed_response_promise<std::string> rp;
  };
  std::vector<held_request> held;
  uint64_t refused_restores = 0;  ///< answers that showed a journal older than a peer saw
  bool forgotten_noted = false;   ///< a peer forgot this journal: being recorded, then stop
};

}  // namespace proctor::exec_detail
