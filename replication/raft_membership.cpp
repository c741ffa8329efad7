// A raft group's membership changes (raft_group::change_membership): the caller's side queues
// a change; the loop thread drives it through libraft's requests. An add goes through a
// standby phase: libraft replicates to a standby (a snapshot first if the log no longer
// holds what it lacks) without counting it for the majority, so a member that is slow, or
// never comes, costs the group nothing; it becomes a voter only once nearly caught up, and
// libraft's own promotion rounds then close the last gap.
#include <cstring>

#include <spdlog/spdlog.h>

#include "replication/raft_store_impl.hpp"

namespace proctor {

namespace {

/// A standby at most this many entries behind the leader's log is made a voter.
constexpr uint64_t caught_up_entries = 16;

std::string ms_text(std::chrono::steady_clock::duration d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
}

const struct raft_server* find_server(const struct raft_configuration& c, raft_id id,
                                      unsigned* index = nullptr) {
  for (unsigned i = 0; i < c.n; ++i)
    if (c.servers[i].id == id) {
      if (index != nullptr)
        *index = i;
      return &c.servers[i];
    }
  return nullptr;
}

}  // namespace

std::string raft_store_impl::config_address(const raft_member& m) {
  return m.label.empty() ? m.address : m.address + "#" + m.label;
}

void raft_store_impl::split_config_address(const char* stored, std::string* address,
                                           std::string* label) {
  std::string s = stored != nullptr ? stored : "";
  auto hash = s.find('#');
  *address = s.substr(0, hash);
  *label = hash == std::string::npos ? "" : s.substr(hash + 1);
}

// -- caller's side ------------------------------------------------------------------------------

std::future<membership_outcome> raft_store_impl::change_membership(membership_change change) {
  auto pc = std::make_shared<pending_change>();
  pc->change = std::move(change);
  auto outcome = pc->done.get_future();
  std::string bad;
  if (pc->change.member.id == 0)
    bad = "a member's id must be > 0";
  else if ((pc->change.what == membership_change::kind::add
            || pc->change.what == membership_change::kind::add_standby)
           && (pc->change.member.address.empty()
               || pc->change.member.label.find('#') != std::string::npos))
    bad = "a new member needs an address (and a label without '#')";
  if (!bad.empty()) {
    pc->done.set_value({rocksdb::Status::InvalidArgument(bad), bad});
    return outcome;
  }
  std::lock_guard<std::mutex> g(mtx_);
  if (closing_ || !loop_running_) {
    pc->done.set_value({rocksdb::Status::ShutdownInProgress("raft replica closing"), ""});
    return outcome;
  }
  changes_.push_back(std::move(pc));
  uv_async_send(&wake_);
  return outcome;
}

// -- loop thread --------------------------------------------------------------------------------

void raft_store_impl::start_change(std::shared_ptr<pending_change> pc) {
  auto refuse = [&](rocksdb::Status st, std::string text) {
    pc->finished = true;
    pc->done.set_value({std::move(st), std::move(text)});
  };
  if (close_started_)
    return refuse(rocksdb::Status::ShutdownInProgress("raft replica closing"), "");
  if (change_)
    return refuse(rocksdb::Status::Busy("another membership change is under way"),
                  "another membership change is under way: try again when it ended");
  if (!ready_leader_.load())
    return refuse(not_leader_status(), "this replica does not lead the group");
  const auto& m = pc->change.member;
  pc->started = std::chrono::steady_clock::now();
  pc->deadline = pc->started + pc->change.catch_up_timeout;
  std::memset(&pc->req, 0, sizeof(pc->req));
  pc->req.data = pc.get();
  pc->change_owner = this;
  const auto* srv = find_server(raft_.configuration, m.id);
  int rv = 0;
  if (pc->change.what == membership_change::kind::remove) {
    if (srv == nullptr)
      return refuse(rocksdb::Status::NotFound("no such member"),
                    "member " + std::to_string(m.id) + " is not in the group");
    if (m.id == raft_.id)
      return refuse(rocksdb::Status::InvalidArgument("the leader cannot remove itself"),
                    "the leader cannot remove itself");
    change_ = pc;
    pc->at = pending_change::phase::removing;
    rv = raft_remove(&raft_, &pc->req, m.id, change_cb);
  } else if (pc->change.what == membership_change::kind::demote) {
    if (srv == nullptr)
      return refuse(rocksdb::Status::NotFound("no such member"),
                    "member " + std::to_string(m.id) + " is not in the group");
    if (srv->role != RAFT_VOTER)
      return refuse(rocksdb::Status::OK(), "not a voter");
    if (m.id == raft_.id)
      return refuse(rocksdb::Status::InvalidArgument("the leader cannot demote itself"),
                    "the leader cannot demote itself");
    change_ = pc;
    pc->at = pending_change::phase::demoting;
    rv = raft_assign(&raft_, &pc->req, m.id, RAFT_STANDBY, change_cb);
  } else {
    for (unsigned i = 0; i < raft_.configuration.n; ++i) {
      std::string addr, label;
      split_config_address(raft_.configuration.servers[i].address, &addr, &label);
      if (raft_.configuration.servers[i].id != m.id && addr == m.address)
        return refuse(rocksdb::Status::InvalidArgument("address in use"),
                      "address " + m.address + " is already member "
                        + std::to_string(raft_.configuration.servers[i].id) + "'s");
    }
    change_ = pc;
    if (srv == nullptr) {
      pc->at = pending_change::phase::adding;
      rv = raft_add(&raft_, &pc->req, m.id, config_address(m).c_str(), change_cb);
    } else if (srv->role == RAFT_VOTER) {
      change_.reset();
      return refuse(rocksdb::Status::OK(), "already a voter");
    } else if (srv->role == RAFT_STANDBY
               && pc->change.what == membership_change::kind::add_standby) {
      change_.reset();
      return refuse(rocksdb::Status::OK(), "already a standby");
    } else if (srv->role == RAFT_STANDBY) {
      pc->at = pending_change::phase::catching_up;
      pc->behind_at_standby = raft_last_index(&raft_);
      spdlog::info("raft replica {}: member {} is a standby: waiting for it to catch up",
                   self_name(), member_name(m.id, m.label));
    } else {
      pc->at = pending_change::phase::to_standby;
      rv = raft_assign(&raft_, &pc->req, m.id, RAFT_STANDBY, change_cb);
    }
  }
  if (rv != 0) {
    change_.reset();
    auto why = std::string(raft_strerror(rv));
    if (raft_errmsg(&raft_) != nullptr && raft_errmsg(&raft_)[0] != '\0')
      why = raft_errmsg(&raft_);
    return refuse(rv == RAFT_NOTLEADER    ? not_leader_status()
                  : rv == RAFT_CANTCHANGE ? rocksdb::Status::Busy(why)
                                          : rocksdb::Status::InvalidArgument(why),
                  "libraft refused the change: " + why);
  }
}

void raft_store_impl::change_cb(struct raft_change* req, int status) {
  auto* pc = static_cast<pending_change*>(req->data);
  auto* self = static_cast<raft_store_impl*>(pc->change_owner);
  self->advance_change(status);
}

void raft_store_impl::advance_change(int status) {
  auto pc = change_;
  if (!pc || pc->finished)
    return;
  const auto& m = pc->change.member;
  if (status != 0) {
    if (status == RAFT_LEADERSHIPLOST || status == RAFT_NOTLEADER)
      return end_change(rocksdb::Status::Incomplete("leadership lost during the change"),
                        "this replica stopped leading during the change; it may or may not "
                        "have committed: look at the group, then run it again");
    if (status == RAFT_SHUTDOWN || close_started_)
      return end_change(rocksdb::Status::ShutdownInProgress("raft replica closing"),
                        "the replica closed during the change");
    return end_change(rocksdb::Status::IOError(raft_strerror(status)),
                      std::string("the change failed: ") + raft_strerror(status));
  }
  switch (pc->at) {
    case pending_change::phase::adding: {
      pc->at = pending_change::phase::to_standby;
      std::memset(&pc->req, 0, sizeof(pc->req));
      pc->req.data = pc.get();
      pc->change_owner = this;
      int rv = raft_assign(&raft_, &pc->req, m.id, RAFT_STANDBY, change_cb);
      if (rv != 0)
        end_change(rocksdb::Status::Incomplete(raft_strerror(rv)),
                   std::string("added as a spare, but making it a standby failed (")
                     + raft_strerror(rv) + "): run the add again");
      return;
    }
    case pending_change::phase::to_standby:
      if (pc->change.what == membership_change::kind::add_standby)
        return end_change(rocksdb::Status::OK(), "a standby");
      pc->at = pending_change::phase::catching_up;
      pc->behind_at_standby = raft_last_index(&raft_);
      spdlog::info("raft replica {}: member {} is a standby: waiting for it to catch up",
                   self_name(), member_name(m.id, m.label));
      return;
    case pending_change::phase::to_voter:
      return end_change(rocksdb::Status::OK(),
                        "a voter, caught up in "
                          + ms_text(std::chrono::steady_clock::now() - pc->started));
    case pending_change::phase::removing:
      return end_change(rocksdb::Status::OK(), "removed");
    case pending_change::phase::demoting:
      return end_change(rocksdb::Status::OK(), "a standby (no longer a voter)");
    default:
      return;
  }
}

void raft_store_impl::check_catch_up() {
  auto pc = change_;
  if (!pc || pc->finished || pc->at != pending_change::phase::catching_up)
    return;
  if (raft_state(&raft_) != RAFT_LEADER)
    return end_change(rocksdb::Status::Incomplete("leadership lost during the change"),
                      "this replica stopped leading while the new member caught up; it stays "
                      "a standby: run the add again on the new leader");
  const auto& m = pc->change.member;
  unsigned i = 0;
  const auto* srv = find_server(raft_.configuration, m.id, &i);
  if (srv == nullptr || srv->role != RAFT_STANDBY || raft_.leader_state.progress == nullptr)
    return end_change(rocksdb::Status::Incomplete("the member changed meanwhile"),
                      "the member was removed or changed meanwhile");
  const uint64_t last = raft_last_index(&raft_);
  const uint64_t match = raft_.leader_state.progress[i].match_index;
  // match_index 0: it has not answered yet (a new member's log starts empty).
  if (match > 0 && match + caught_up_entries >= last) {
    pc->at = pending_change::phase::to_voter;
    std::memset(&pc->req, 0, sizeof(pc->req));
    pc->req.data = pc.get();
    pc->change_owner = this;
    spdlog::info("raft replica {}: member {} caught up to {} of {}: making it a voter", self_name(),
                 member_name(m.id, m.label), match, last);
    int rv = raft_assign(&raft_, &pc->req, m.id, RAFT_VOTER, change_cb);
    if (rv != 0) {
      pc->at = pending_change::phase::catching_up;  // retried at the next check
      if (rv != RAFT_CANTCHANGE)
        spdlog::warn("raft replica {}: making member {} a voter: {}", self_name(),
                     member_name(m.id, m.label), raft_strerror(rv));
    }
    return;
  }
  if (std::chrono::steady_clock::now() >= pc->deadline)
    end_change(rocksdb::Status::TimedOut("the new member did not catch up in time"),
               "it is a standby that has stored " + std::to_string(match) + " of "
                 + std::to_string(last) + " entries after "
                 + ms_text(std::chrono::steady_clock::now() - pc->started)
                 + "; it keeps catching up without counting for the majority: run the add "
                   "again to make it a voter, or remove it");
}

void raft_store_impl::end_change(rocksdb::Status st, std::string text) {
  auto pc = std::move(change_);
  if (!pc || pc->finished)
    return;
  pc->finished = true;
  refresh_members();  // members() shows the change once its outcome is known
  spdlog::log(st.ok() ? spdlog::level::info : spdlog::level::warn,
              "raft replica {}: membership change of member {}: {}", self_name(),
              member_name(pc->change.member.id, pc->change.member.label), text);
  pc->done.set_value({std::move(st), std::move(text)});
}

}  // namespace proctor
