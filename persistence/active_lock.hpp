// Which process is a data directory's active node: an exclusive lock and a fencing epoch.
//
// `DIR/ACTIVE.lock` holds an flock(2) for as long as a node runs on the directory (taken
// before RocksDB's own lock, and never replaced, so the lock stays on one inode) and, in its
// first 8 bytes, the directory's epoch: each process that takes the lock adds one. A standby
// (proctord --standby) waits for the lock; it is free only once the holder has exited,
// whatever killed it. `DIR/ACTIVE` says who holds it (pid, host, listen address, since when),
// written whole by rename, for standbys, `proctor nodes` and operators.
//
// The epoch fences a holder that lost its lock without knowing it: an flock on a network
// file system can be broken (an NFSv4 lease that lapsed while its host was cut off), and an
// operator may remove a lock by hand. The journal checks the epoch before every write
// (fenced_store) and the daemon checks it periodically: a process whose epoch is no longer
// the file's exits without writing. On a local file system the kernel's lock alone keeps two
// writers apart; the epoch is the second line of defence.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "persistence/journal_store.hpp"

namespace proctor {

/// Who holds a directory's lock (DIR/ACTIVE).
struct active_info {
  uint64_t epoch = 0;
  int64_t pid = 0;
  std::string host;         ///< gethostname() of the holder
  std::string listen;       ///< the holder's client address, HOST:PORT
  int64_t since_ms = 0;     ///< wall clock: when it took the lock
  int64_t takeover_ms = 0;  ///< how long its takeover took (0: it started without waiting)
};

class active_lock {
public:
  ~active_lock();  // releases the lock
  active_lock(const active_lock&) = delete;
  active_lock& operator=(const active_lock&) = delete;

  /// Takes `dir`'s lock if it is free and raises the epoch. nullptr and a one-line `*error`
  /// if another process holds it (`*held` set) or the directory cannot be used.
  static std::unique_ptr<active_lock> try_take(const std::string& dir, std::string* error,
                                               bool* held = nullptr);

  /// This holder's epoch.
  uint64_t epoch() const noexcept { return epoch_; }

  /// True while the directory's epoch is still this holder's; otherwise false and why.
  bool still_ours(std::string* why) const;

  /// Writes DIR/ACTIVE (pid, host, epoch filled in here).
  bool publish(active_info info, std::string* error) const;

  const std::string& dir() const noexcept { return dir_; }

private:
  active_lock(std::string dir, int fd, uint64_t epoch);

  std::string dir_;
  int fd_;
  uint64_t epoch_;
};

/// DIR/ACTIVE as last written, or nullopt.
std::optional<active_info> read_active_info(const std::string& dir);

/// This host's name.
std::string host_name();

/// A journal_store that checks the lock's epoch before each write and refuses to write
/// (an Aborted status, which fail-stops the journal) once another process took over.
std::shared_ptr<journal_store> fenced_store(std::shared_ptr<journal_store> inner,
                                            std::shared_ptr<const active_lock> lock);

}  // namespace proctor
