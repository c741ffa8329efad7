// Only a leader acts (docs/replication.md, "Only the leader acts"): every step and every undo
// passes this gate just before it runs. On a node that is a replica group, the gate asks the
// replicated store whether this process is sure it still leads (raft_store::sure_to_lead);
// elsewhere it is always open.
//
// The gate is process-wide because a process runs at most one replicated node (proctord);
// the probe is installed once, before the node's first step, and never removed (a replica
// that stops leading re-executes itself).
#pragma once

#include <chrono>
#include <functional>

namespace proctor::leader_fence {

/// Installs `sure` (thread-safe, cheap: called before every step). Call once per process.
void install(std::function<bool()> sure);

/// True when no probe is installed, or the probe says this process is sure it leads.
bool open();

/// Blocks the calling thread (a worker thread, never a CAF one) until the gate is open, and
/// returns true; or returns false once `stopping()` says the caller shuts down. Ends when the
/// store vouches for this leader again (a majority answered a round of heartbeats) or, by the
/// process's re-execution, when it learned that it no longer leads: libraft settles either
/// within about an election timeout of the Raft loop running again. Logs every `report`.
bool wait_open(const std::function<bool()>& stopping,
               std::chrono::milliseconds report = std::chrono::seconds{2});

}  // namespace proctor::leader_fence
