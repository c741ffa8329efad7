// raft_store's loop thread, what it observes of libraft after each iteration: the role, the
// leader and the members it publishes, leadership gained (once a barrier applied everything
// committed before the term) and lost, and whether a leader is sure it still leads (its
// lease). Runs on the loop thread (raft_store_impl.hpp) but where the comments say.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "replication/raft_store_impl.hpp"

namespace proctor {

// -- observing libraft's state ---------------------------------------------------------------

void raft_store_impl::check_cb(uv_check_t* h) {
  static_cast<raft_store_impl*>(h->data)->on_check();
}

void raft_store_impl::on_check() {
  // Runs after every loop iteration: libraft 0.15 has no state-change callback, and every
  // change of its state happens in a callback of some iteration, so this sees each one.
  if (close_started_)
    return;
  term_.store(raft_.current_term);
  commit_.store(raft_.commit_index);
  if (raft_last_applied(&raft_) > applied_.load())
    applied_.store(raft_last_applied(&raft_));
  snapshot_.store(raft_.log.snapshot.last_index);
  raft_id lid = 0;
  const char* laddr = nullptr;
  raft_leader(&raft_, &lid, &laddr);
  {
    std::lock_guard<std::mutex> g(leader_mtx_);
    if (leader_.id != lid || leader_.address != (laddr != nullptr ? laddr : "")) {
      leader_.id = lid;
      leader_.address = laddr != nullptr ? laddr : "";
    }
  }
  bool leader_now = raft_state(&raft_) == RAFT_LEADER;
  if (auto now = std::chrono::steady_clock::now();
      now - members_at_ >= std::chrono::milliseconds{100})
    refresh_members();
  if (leader_now && (!raft_leader_ || leader_term_ != raft_.current_term)) {
    if (ready_leader_.exchange(false))
      notify(false);
    raft_leader_ = true;
    leader_term_ = raft_.current_term;
    barrier_needed_ = true;
  } else if (!leader_now && raft_leader_) {
    raft_leader_ = false;
    barrier_needed_ = false;
    if (ready_leader_.exchange(false))
      notify(false);
  }
  if (transfer_wanted_ && leader_now && !transfer_pending_) {
    // libraft picks the most up-to-date voter (id 0).
    std::memset(&transfer_, 0, sizeof(transfer_));
    transfer_.data = this;
    if (raft_transfer(&raft_, &transfer_, 0, transfer_cb) == 0)
      transfer_pending_ = true;
  }
  check_catch_up();
  update_lease(leader_now);
  // A new leader is not ready until its barrier is applied: the barrier commits every entry
  // of earlier terms (a leader commits only entries of its own term) and applies them here.
  if (raft_leader_ && barrier_needed_ && !barrier_pending_) {
    std::memset(&barrier_, 0, sizeof(barrier_));
    barrier_.data = this;
    if (raft_barrier(&raft_, &barrier_, barrier_cb) == 0) {
      barrier_pending_ = true;
      barrier_needed_ = false;
    }
  }
}

// -- only a leader acts: whether this leader is sure it still leads -------------------------

bool raft_store_impl::sure_to_lead() const {
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count();
  return now < sure_until_ms_.load(std::memory_order_acquire);
}

void raft_store_impl::update_lease(bool leader_now) {
  // libraft's leader checks once per election timeout that a majority answered it during the
  // last one (tick.c: checkContactQuorum), and steps down only then, or when a message of a
  // newer term arrives. A leader frozen for longer (SIGSTOP, a paused VM) is no longer
  // leader by the time it thaws, but libraft learns it only from the next answers, while its
  // answers from before the freeze still count: for that while every worker that thawed with
  // it would start steps. So this loop vouches for the leader only while it runs: each check
  // holds for half an election timeout, and after a gap longer than that between two checks
  // it vouches again only once a round of heartbeats that began after the gap
  // (election_timer_start, reset by libraft at each check) was answered by a majority. In the
  // steady state (a check at least every heartbeat timeout) it is sure all along.
  const uint64_t now = raft_.io->time(raft_.io);
  const uint64_t hold = std::max<uint64_t>(opts_.election_timeout_ms / 2, 1);
  if (last_check_ms_ != 0 && now - last_check_ms_ > hold) {
    if (unsure_since_ms_ == 0 && ready_leader_.load())
      spdlog::warn("replica {}: its Raft loop did not run for {} ms (frozen, or starved): no "
                   "step runs until a majority answers it again, or it learns of a newer term",
                   self_name(), now - last_check_ms_);
    unsure_since_ms_ = now;
  }
  last_check_ms_ = now;
  bool sure = leader_now && ready_leader_.load();
  if (sure && unsure_since_ms_ != 0) {
    sure = false;
    // Not the round libraft starts as it thaws (its first tick finds an election timeout
    // gone by, counts the answers from before the gap, and starts a round, in this iteration
    // or the next, whose flags the answers the others sent before the gap, still buffered,
    // may set again): the one after, an election timeout later, counts only answers read
    // since; by then a newer term, if there is one, has reached this replica. (Measured: with
    // "strictly after the gap" alone the two came in the same millisecond and 5 to 7 steps
    // began.)
    if (raft_.election_timer_start >= unsure_since_ms_ + hold) {
      unsigned voters = 0, heard = 0;
      for (unsigned i = 0; i < raft_.configuration.n; ++i) {
        const auto& s = raft_.configuration.servers[i];
        if (s.role != RAFT_VOTER)
          continue;
        ++voters;
        if (s.id == raft_.id || raft_.leader_state.progress[i].recent_recv)
          ++heard;
      }
      sure = heard > voters / 2;
    }
    if (sure) {
      spdlog::info("replica {}: a majority answered it again: it runs steps again", self_name());
      unsure_since_ms_ = 0;
    }
  }
  if (!leader_now)
    unsure_since_ms_ = 0;  // a new term starts from its barrier (ready_leader_)
  int64_t until = 0;
  if (sure)
    until = std::chrono::duration_cast<std::chrono::milliseconds>(
              std::chrono::steady_clock::now().time_since_epoch())
              .count()
            + static_cast<int64_t>(hold);
  sure_until_ms_.store(until, std::memory_order_release);
}

void raft_store_impl::refresh_members() {
  members_at_ = std::chrono::steady_clock::now();
  const bool leader_now = raft_state(&raft_) == RAFT_LEADER;
  std::vector<member_status> ms;
  for (unsigned i = 0; i < raft_.configuration.n; ++i) {
    const auto& srv = raft_.configuration.servers[i];
    member_status m;
    m.id = srv.id;
    split_config_address(srv.address, &m.address, &m.label);
    m.role = srv.role == RAFT_VOTER     ? member_status::role_kind::voter
             : srv.role == RAFT_STANDBY ? member_status::role_kind::standby
                                        : member_status::role_kind::spare;
    if (leader_now && raft_.leader_state.progress != nullptr) {
      // libraft keeps progress[i] for configuration.servers[i] (0.15, progress.c).
      m.match_index =
        srv.id == raft_.id ? raft_.last_stored : raft_.leader_state.progress[i].match_index;
      m.recently_heard = srv.id == raft_.id || raft_.leader_state.progress[i].recent_recv;
    }
    ms.push_back(std::move(m));
  }
  auto state = raft_state(&raft_);
  std::lock_guard<std::mutex> g(leader_mtx_);
  members_ = std::move(ms);
  role_ = state == RAFT_LEADER      ? (ready_leader_.load() ? "leader" : "leader (taking over)")
          : state == RAFT_FOLLOWER  ? "follower"
          : state == RAFT_CANDIDATE ? "candidate"
                                    : "unavailable";
}

void raft_store_impl::barrier_cb(struct raft_barrier* req, int status) {
  auto* self = static_cast<raft_store_impl*>(req->data);
  self->barrier_pending_ = false;
  if (self->close_started_)
    return;
  bool same_term = raft_state(&self->raft_) == RAFT_LEADER && self->raft_leader_
                   && self->leader_term_ == self->raft_.current_term;
  if (!same_term)
    return;
  if (status != 0) {
    self->barrier_needed_ = true;  // retried at the next check
    return;
  }
  bool fatal = false;
  {
    std::lock_guard<std::mutex> g(self->mtx_);
    fatal = !self->fatal_.ok();
  }
  if (!fatal && !self->ready_leader_.exchange(true))
    self->notify(true);
}

}  // namespace proctor
