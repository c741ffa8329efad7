// A standby: a process that waits to become a data directory's active node (proctord
// --standby; docs/standby.md).
//
// It waits for the directory's lock (persistence/active_lock.hpp), which is free exactly when
// the active process has exited, however it died. Meanwhile it keeps warm: a RocksDB
// secondary instance follows the active's journal (TryCatchUpWithPrimary), so the files a
// takeover reads are in the page cache, and the caller has its actor system and registry
// built. With `fence_after`, a standby on the active's host also ends a hung active: one that
// holds the lock but has not answered a ping for that long is killed with SIGKILL (its lock
// is then free; nothing it acknowledged is lost, as after any crash). An active on another
// host is never killed: the standby waits for its lock.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "persistence/active_lock.hpp"
#include "tls/tls_options.hpp"

namespace proctor {

struct standby_options {
  std::string data_dir;
  /// How often the lock is tried (the delay it adds to a takeover).
  std::chrono::milliseconds lock_poll{20};
  /// How often the secondary instance catches up with the active's journal.
  std::chrono::milliseconds catch_up_every{500};
  /// Kill an active on this host that has not answered pings for this long (unset: never).
  std::optional<std::chrono::milliseconds> fence_after;
  /// How often the active is pinged when `fence_after` is set.
  std::chrono::milliseconds probe_every{500};
  /// The node's TLS settings: the ping must be a client the active accepts (a refused
  /// handshake is no answer, and would have a healthy active killed).
  tls_options tls;
  /// Polled with the lock: true when the standby should give up (SIGTERM).
  std::function<bool()> stop_requested;
};

struct standby_outcome {
  /// The lock, once taken; null if stopped or failed.
  std::shared_ptr<active_lock> lock;
  /// When the lock was taken (the start of the takeover).
  std::chrono::steady_clock::time_point taken_at;
  /// Non-empty when the directory cannot be used at all, or (not waiting) is in use.
  std::string error;
  /// True if another process held the lock when this one began: this is a takeover.
  bool waited = false;
};

/// Waits until this process holds `opts.data_dir`'s lock, stop_requested() says to stop, or
/// the directory cannot be used. Every wait in it is bounded by one poll interval.
standby_outcome wait_as_standby(const standby_options& opts);

/// A node's start: the lock taken at once (an error if another process holds it), or, as a
/// standby, waited for with wait_as_standby.
standby_outcome take_directory(const standby_options& opts, bool as_standby);

/// True if one of `sigs` (blocked in this thread) is pending.
bool signal_pending(const sigset_t& sigs);

/// Waits for one of `sigs` and returns it, checking every 250 ms that `lock` is still this
/// process's: a process fenced off (another took the directory's epoch) logs why and exits
/// at once with code 75, writing nothing more.
int wait_for_signal_unless_fenced(const sigset_t& sigs, const active_lock& lock);

}  // namespace proctor
