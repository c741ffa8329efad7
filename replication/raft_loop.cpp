// raft_store's loop thread: the libuv loop that owns libraft's `struct raft`, its I/O and
// transport. Everything here runs on that thread (raft_store_impl.hpp), except what the
// comments say.
#include <sys/statfs.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "replication/raft_store_impl.hpp"

namespace proctor {

namespace {

constexpr long tmpfs_magic = 0x01021994;

rocksdb::Status status_of(int rv, const char* what) {
  std::string msg = std::string(what) + ": " + raft_strerror(rv);
  switch (rv) {
    case RAFT_NOTLEADER:
      return rocksdb::Status::Busy(msg);
    case RAFT_LEADERSHIPLOST:
      return rocksdb::Status::Incomplete(
        "leadership lost before the entry committed; it may still commit under the next "
        "leader");
    case RAFT_SHUTDOWN:
      return rocksdb::Status::ShutdownInProgress(msg);
    case RAFT_NOMEM:
      return rocksdb::Status::Aborted(msg);
    default:
      return rocksdb::Status::IOError(msg);
  }
}

raft_store_impl* self_of(uv_handle_t* h) {
  return static_cast<raft_store_impl*>(h->data);
}

/// libraft keeps its term and vote in metadata1/metadata2: their absence means a fresh
/// directory, which is bootstrapped with the initial members.
bool raft_dir_is_fresh(const std::string& dir) {
  std::error_code ec;
  return !std::filesystem::exists(dir + "/metadata1", ec)
         && !std::filesystem::exists(dir + "/metadata2", ec);
}

}  // namespace

bool raft_state_is_fresh(const std::string& data_dir) {
  return raft_dir_is_fresh(data_dir + "/raft");
}

void raft_store_impl::loop_main(std::promise<std::string>* started) {
  auto err = init_loop();
  if (!err.empty()) {
    started->set_value(err);
    return;
  }
  {
    std::lock_guard<std::mutex> g(mtx_);
    loop_running_ = true;
  }
  on_check();  // the observers hold the restored state before open returns
  started->set_value({});
  uv_run(&loop_, UV_RUN_DEFAULT);
  // Only our closed handles remain: close the loop (it fails with EBUSY if one is left).
  if (int rv = uv_loop_close(&loop_); rv != 0)
    spdlog::warn("raft replica {}: closing its loop: {}", self_name(), uv_strerror(rv));
  ready_leader_ = false;
}

std::string raft_store_impl::init_loop() {
  const std::string raft_dir = opts_.dir + "/raft";
  std::error_code ec;
  std::filesystem::create_directories(raft_dir, ec);
  if (ec)
    return "cannot create " + raft_dir + ": " + ec.message();
  // libraft writes its segments with O_DIRECT and kernel AIO; tmpfs supports neither. Its
  // own probe says "unsupported file system": say what to do instead.
  struct statfs fs {};
  if (::statfs(raft_dir.c_str(), &fs) == 0 && fs.f_type == tmpfs_magic)
    return raft_dir
           + " is on tmpfs: libraft needs O_DIRECT and kernel AIO (use a directory "
             "on a disk file system such as ext4 or xfs)";
  const bool fresh = raft_dir_is_fresh(raft_dir);
  if (fresh && sm_->applied_index() > 0)
    return opts_.dir + "/db has entries applied up to Raft index "
           + std::to_string(sm_->applied_index()) + " but " + raft_dir
           + " is empty: the Raft state was lost; remove both and rejoin as a new replica";

  if (int rv = uv_loop_init(&loop_); rv != 0)
    return std::string("libuv loop: ") + uv_strerror(rv);
  // Our handles are created first: every failure below closes them and runs the loop until
  // they (and whatever libraft opened) are closed.
  uv_async_init(&loop_, &wake_, wake_cb);
  wake_.data = this;
  uv_check_init(&loop_, &check_);
  check_.data = this;
  uv_check_start(&check_, check_cb);
  auto abandon = [&](std::string why) {
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&check_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    return why;
  };

  if (int rv = nodelay_transport_init(&transport_, &loop_); rv != 0)
    return abandon(std::string("raft transport: ") + raft_strerror(rv));
  if (opts_.tls)
    tls_ = tls_transport_new(&loop_, opts_.tls, opts_.tls_peer_node, opts_.tls_reload,
                             opts_.tls_check_host);
  std::memset(&io_, 0, sizeof(io_));
  if (int rv = raft_uv_init(&io_, &loop_, raft_dir.c_str(), transport()); rv != 0) {
    std::string why = std::string("raft I/O in ") + raft_dir + ": " + io_.errmsg;
    close_transport();
    return abandon(why);
  }
  // libraft 0.15's uv I/O implements async_work (what asynchronous snapshots need) but still
  // declares version 1, and raft_init refuses a version-3 FSM on a version-1 I/O; the next
  // releases only changed that number ("uv: set io version to 2").
  if (io_.async_work != nullptr && io_.version < 2)
    io_.version = 2;
  raft_uv_set_segment_size(&io_, opts_.segment_size);
  init_raft_fsm(&fsm_, &binding_);
  std::memset(&raft_, 0, sizeof(raft_));
  if (int rv = raft_init(&raft_, &io_, &fsm_, opts_.id, opts_.address.c_str()); rv != 0) {
    std::string why = std::string("raft: ") + raft_errmsg(&raft_);
    raft_uv_close(&io_);
    close_transport();
    return abandon(why);
  }
  raft_.data = this;
  binding_.raft = &raft_;
  raft_set_election_timeout(&raft_, opts_.election_timeout_ms);
  raft_set_heartbeat_timeout(&raft_, opts_.heartbeat_timeout_ms);
  raft_set_pre_vote(&raft_, opts_.pre_vote);
  raft_set_snapshot_threshold(&raft_, opts_.snapshot_threshold);
  raft_set_snapshot_trailing(&raft_, opts_.snapshot_trailing);
  raft_set_install_snapshot_timeout(&raft_, opts_.install_snapshot_timeout_ms);

  // libraft 0.15 leaves raft_errmsg empty when its I/O fails to start (a port in use): then
  // the I/O's or the transport's own message, else the code's.
  auto why_failed = [&](int rv) {
    for (const char* msg : {raft_errmsg(&raft_), static_cast<const char*>(io_.errmsg),
                            static_cast<const char*>(transport()->errmsg)})
      if (msg != nullptr && msg[0] != '\0')
        return std::string(msg);
    return std::string(raft_strerror(rv));
  };
  auto close_raft = [&](std::string why) {
    // raft_close releases libraft's state through the loop: run it until its callback.
    close_started_ = true;
    raft_close(&raft_, [](struct raft* r) {
      auto* self = static_cast<raft_store_impl*>(r->data);
      raft_uv_close(&self->io_);
      self->close_transport();
    });
    return abandon(why);
  };
  // `members` as voters, handed to `use` (raft_bootstrap or raft_recover): its result.
  auto with_members = [this](int (*use)(struct raft*, const struct raft_configuration*)) {
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    int rv = 0;
    for (const auto& m : opts_.members)
      if (rv == 0)
        rv = raft_configuration_add(&conf, m.id, config_address(m).c_str(), RAFT_VOTER);
    if (rv == 0)
      rv = use(&raft_, &conf);
    raft_configuration_close(&conf);
    return rv;
  };
  if (fresh && !opts_.join) {
    if (int rv = with_members(raft_bootstrap); rv != 0)
      return close_raft(std::string("raft bootstrap: ") + why_failed(rv));
  }
  if (opts_.recover) {
    if (fresh)
      return close_raft("cannot recover the group: " + raft_dir + " holds no Raft state");
    if (int rv = with_members(raft_recover); rv != 0)
      return close_raft(std::string("raft recover: ") + why_failed(rv));
  }
  if (int rv = raft_start(&raft_); rv != 0)
    return close_raft(std::string("raft start (") + opts_.address + "): " + why_failed(rv));
  return {};
}

// -- wake-ups: writes and close --------------------------------------------------------------

void raft_store_impl::wake_cb(uv_async_t* h) {
  self_of(reinterpret_cast<uv_handle_t*>(h))->on_wake();
}

void raft_store_impl::on_wake() {
  // uv_async coalesces wake-ups: take everything queued so far.
  std::deque<std::shared_ptr<pending_write>> batch;
  std::deque<std::shared_ptr<pending_change>> changes;
  bool closing = false;
  {
    std::lock_guard<std::mutex> g(mtx_);
    batch.swap(queue_);
    changes.swap(changes_);
    closing = closing_;
  }
  for (auto& pc : changes) {
    if (closing) {
      pc->finished = true;
      pc->done.set_value({rocksdb::Status::ShutdownInProgress("raft replica closing"), ""});
    } else {
      start_change(std::move(pc));
    }
  }
  for (auto& pw : batch) {
    if (closing) {
      raft_free(pw->buf.base);
      finish(pw.get(), rocksdb::Status::ShutdownInProgress("raft replica closing"));
    } else {
      submit(std::move(pw));
    }
  }
  if (closing && !close_started_)
    begin_close();
}

void raft_store_impl::submit(std::shared_ptr<pending_write> pw) {
  // The writer checked is_leader(); it may have changed since.
  if (!ready_leader_.load() || close_started_) {
    raft_free(pw->buf.base);
    finish(pw.get(), not_leader_status());
    return;
  }
  rocksdb::Status fatal;
  {
    std::lock_guard<std::mutex> g(mtx_);
    fatal = fatal_;
  }
  if (!fatal.ok()) {
    raft_free(pw->buf.base);
    finish(pw.get(), fatal);
    return;
  }
  int rv = raft_apply(&raft_, &pw->req, &pw->buf, 1, apply_cb);
  if (rv != 0) {
    raft_free(pw->buf.base);  // libraft took it only if raft_apply returned 0
    finish(pw.get(), rv == RAFT_NOTLEADER ? not_leader_status() : status_of(rv, "raft apply"));
    return;
  }
  submitted_.emplace(pw.get(), std::move(pw));
}

void raft_store_impl::apply_cb(struct raft_apply* req, int status, void*) {
  // Status 0: committed on a majority and applied here (libraft calls this right after the
  // FSM's apply). Otherwise the entry did not commit while this replica led: stepped down,
  // or closed (both RAFT_LEADERSHIPLOST in 0.15).
  auto* pw = static_cast<pending_write*>(req->data);
  auto* self = pw->owner;
  std::shared_ptr<pending_write> keep;  // alive until finished
  if (auto it = self->submitted_.find(pw); it != self->submitted_.end()) {
    keep = std::move(it->second);
    self->submitted_.erase(it);
  }
  if (status == 0) {
    self->finish(pw, rocksdb::Status::OK());
  } else if (self->close_started_) {
    self->finish(pw, rocksdb::Status::Incomplete("raft replica closed before the entry "
                                                 "committed; it may still commit under "
                                                 "another leader"));
  } else {
    self->finish(pw, status_of(status, "raft apply"));
  }
}

void raft_store_impl::finish(pending_write* pw, rocksdb::Status st) {
  if (pw->finished)
    return;
  pw->finished = true;
  pw->done.set_value(std::move(st));
  {
    std::lock_guard<std::mutex> g(mtx_);
    --in_flight_;
  }
  room_.notify_one();
}

void raft_store_impl::fail_all(const rocksdb::Status& st) {
  std::deque<std::shared_ptr<pending_write>> queued;
  {
    std::lock_guard<std::mutex> g(mtx_);
    queued.swap(queue_);
  }
  for (auto& pw : queued) {
    raft_free(pw->buf.base);
    finish(pw.get(), st);
  }
  // Submitted ones stay in submitted_ (libraft holds their requests) but are answered now.
  for (auto& [pw, keep] : submitted_)
    finish(pw, st);
}

void raft_store_impl::on_fatal(const rocksdb::Status& st) {
  {
    std::lock_guard<std::mutex> g(mtx_);
    if (fatal_.ok())
      fatal_ = rocksdb::Status::IOError("raft replica stopped applying: " + st.ToString());
  }
  room_.notify_all();
  rocksdb::Status fatal;
  {
    std::lock_guard<std::mutex> g(mtx_);
    fatal = fatal_;
  }
  fail_all(fatal);
  if (ready_leader_.exchange(false))
    notify(false);
  // A leader that cannot apply makes the whole group unavailable for writes: on_check hands
  // the leadership to another voter (not from here: this runs inside libraft's apply loop).
  transfer_wanted_ = true;
}

void raft_store_impl::transfer_cb(struct raft_transfer* req) {
  static_cast<raft_store_impl*>(req->data)->transfer_pending_ = false;
}

// -- close ------------------------------------------------------------------------------------

void raft_store_impl::begin_close() {
  close_started_ = true;
  if (ready_leader_.exchange(false))
    notify(false);
  // Fails libraft's pending requests (apply_cb with RAFT_LEADERSHIPLOST), then closes its
  // I/O and transport through the loop.
  raft_close(&raft_, raft_close_cb);
}

void raft_store_impl::close_transport() {
  nodelay_transport_close(&transport_);
  tls_transport_free(tls_);
  tls_ = nullptr;
}

void raft_store_impl::raft_close_cb(struct raft* r) {
  static_cast<raft_store_impl*>(r->data)->on_raft_closed();
}

void raft_store_impl::on_raft_closed() {
  raft_uv_close(&io_);
  close_transport();
  for (auto& [pw, keep] : submitted_)
    finish(pw, rocksdb::Status::ShutdownInProgress("raft replica closed"));
  submitted_.clear();
  end_change(rocksdb::Status::ShutdownInProgress("raft replica closed"),
             "the replica closed during the change");
  // No uv_async_send can follow: writers send only under mtx_ and not once closing_ is set,
  // which on_wake saw before this close began.
  uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&check_), nullptr);
}

}  // namespace proctor
