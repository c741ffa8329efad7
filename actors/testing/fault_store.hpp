// A journal_store wrapper that injects faults, for tests and the crash harness: I/O errors
// (a full or failing disk) and "crash points" where the store freezes as if the process had
// died — the write at the crash point and every later one is refused, so the data directory
// holds exactly what a crash at that moment would have left.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "persistence/journal_store.hpp"

namespace proctor {

class fault_store : public forwarding_store {
public:
  explicit fault_store(std::shared_ptr<journal_store> inner) : forwarding_store(std::move(inner)) {}

  // -- fault configuration ----------------------------------------------------------------

  /// Freezes the store at write number `n` (1-based, counted from now on): with `after`
  /// false the write is refused ("crash before the write"), with `after` true it is applied
  /// and then the store freezes ("crash right after it").
  void crash_at(uint64_t n, bool after) {
    std::lock_guard<std::mutex> g(mtx_);
    crash_at_ = writes_ + n;
    crash_after_ = after;
  }

  /// Every write fails with an I/O error (e.g. "No space left on device") while set.
  void fail_writes(bool on, std::string message = "injected I/O error") {
    std::lock_guard<std::mutex> g(mtx_);
    fail_ = on;
    fail_message_ = std::move(message);
  }

  /// While held, writes wait (the journal's writer blocks in them) until released, or until
  /// the store freezes, which refuses them: a write in flight when the process dies.
  void hold_writes(bool on) {
    std::lock_guard<std::mutex> g(mtx_);
    hold_ = on;
    cv_.notify_all();
  }

  /// Freezes the store now, as a kill at this moment would leave it.
  void crash_now() {
    std::unique_lock<std::mutex> g(mtx_);
    freeze(g);
  }

  /// Waits until the store froze or `timeout` passed; true if frozen.
  template <class Duration>
  bool wait_frozen(Duration timeout) {
    std::unique_lock<std::mutex> g(mtx_);
    return cv_.wait_for(g, timeout, [this] { return frozen_; });
  }

  bool frozen() const {
    std::lock_guard<std::mutex> g(mtx_);
    return frozen_;
  }

  /// Writes applied so far.
  uint64_t writes() const {
    std::lock_guard<std::mutex> g(mtx_);
    return writes_;
  }

  // -- journal_store ------------------------------------------------------------------------

  rocksdb::Status write(const std::vector<store_op>& ops) override {
    std::unique_lock<std::mutex> g(mtx_);
    cv_.wait(g, [this] { return !hold_ || frozen_; });
    if (frozen_)
      return rocksdb::Status::IOError("store frozen (simulated crash)");
    if (fail_)
      return rocksdb::Status::IOError(fail_message_);
    bool crash_here = crash_at_ != 0 && writes_ + 1 == crash_at_;
    if (crash_here && !crash_after_)
      return freeze(g);
    auto st = forwarding_store::write(ops);
    if (st.ok())
      ++writes_;
    if (crash_here) {
      freeze(g);
      return st;
    }
    return st;
  }

private:
  rocksdb::Status freeze(std::unique_lock<std::mutex>& g) {
    frozen_ = true;
    g.unlock();
    cv_.notify_all();
    return rocksdb::Status::IOError("store frozen (simulated crash)");
  }

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  uint64_t writes_ = 0;
  uint64_t crash_at_ = 0;
  bool crash_after_ = false;
  bool frozen_ = false;
  bool hold_ = false;
  bool fail_ = false;
  std::string fail_message_;
};

}  // namespace proctor
