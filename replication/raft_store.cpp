// raft_store (and any raft_group): options, opening, the writers' side of propose() and
// write(), the observers and the notifier thread. The loop thread's side is raft_loop.cpp.
#include "replication/raft_store.hpp"

#include <csignal>
#include <cstring>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include "persistence/journal_backup.hpp"
#include "replication/raft_codec.hpp"
#include "replication/raft_store_impl.hpp"

namespace proctor {

// -- members --------------------------------------------------------------------------------

bool parse_raft_members(std::string_view spec, std::vector<raft_member>* out, std::string* error) {
  auto fail = [&](std::string msg) {
    if (error != nullptr)
      *error = std::move(msg);
    return false;
  };
  out->clear();
  std::set<uint64_t> ids;
  std::set<std::string> addresses;
  size_t i = 0;
  while (i < spec.size()) {
    if (spec[i] == ',' || spec[i] == ' ') {
      ++i;
      continue;
    }
    auto end = spec.find_first_of(", ", i);
    if (end == std::string_view::npos)
      end = spec.size();
    auto item = spec.substr(i, end - i);
    i = end;
    auto eq = item.find('=');
    auto colon = item.rfind(':');
    if (eq == std::string_view::npos || eq == 0 || colon == std::string_view::npos || colon < eq + 2
        || colon + 1 == item.size())
      return fail("malformed replica \"" + std::string(item) + "\": expected ID=HOST:PORT");
    raft_member m;
    for (auto c : item.substr(0, eq)) {
      if (c < '0' || c > '9' || m.id > (UINT64_MAX - 9) / 10)
        return fail("malformed replica id in \"" + std::string(item) + "\"");
      m.id = m.id * 10 + static_cast<uint64_t>(c - '0');
    }
    for (auto c : item.substr(colon + 1))
      if (c < '0' || c > '9')
        return fail("malformed port in \"" + std::string(item) + "\"");
    m.address = std::string(item.substr(eq + 1));
    if (m.id == 0)
      return fail("replica id 0 in \"" + std::string(item) + "\": ids start at 1");
    if (!ids.insert(m.id).second)
      return fail("replica id " + std::to_string(m.id) + " appears twice");
    if (!addresses.insert(m.address).second)
      return fail("replica address " + m.address + " appears twice");
    out->push_back(std::move(m));
  }
  if (out->empty())
    return fail("no replicas given");
  return true;
}

// -- raft_store_impl: writers' side -----------------------------------------------------------

raft_store_impl::raft_store_impl(raft_store_options opts, std::unique_ptr<raft_state_machine> state)
    : opts_(std::move(opts)), sm_(std::move(state)) {
  // nop
}

raft_store_impl::~raft_store_impl() {
  {
    std::lock_guard<std::mutex> g(mtx_);
    closing_ = true;
    // Under mtx_, like every uv_async_send: the loop closes wake_ only after it saw
    // closing_ under mtx_, so no send can race with that close.
    if (loop_running_)
      uv_async_send(&wake_);
  }
  room_.notify_all();
  if (loop_thread_.joinable())
    loop_thread_.join();
  {
    std::lock_guard<std::mutex> g(note_mtx_);
    note_stop_ = true;
  }
  note_cv_.notify_all();
  if (notifier_.joinable())
    notifier_.join();
  journal_ = nullptr;
  sm_.reset();
}

bool raft_store_impl::start(std::string* error) {
  std::string err;
  if (!sm_) {
    auto db = raft_replica_db::open(opts_.dir + "/db", opts_.sync_applies, &err);
    if (!db) {
      *error = err;
      return false;
    }
    journal_ = db.get();
    sm_ = std::move(db);
  }
  applied_ = sm_->applied_index();
  binding_.sm = sm_.get();
  binding_.name = self_name();
  binding_.min_threshold = opts_.snapshot_threshold;
  binding_.max_log_bytes = opts_.snapshot_max_log_bytes;
  binding_.on_fatal = [this](const rocksdb::Status& st) { on_fatal(st); };
  binding_.on_applied = [this](uint64_t index) {
    if (index > applied_.load(std::memory_order_relaxed))
      applied_.store(index);
  };
  notifier_ = std::thread([this] { notifier_main(); });
  std::promise<std::string> started;
  auto result = started.get_future();
  loop_thread_ = std::thread([this, &started] { loop_main(&started); });
  err = result.get();
  if (!err.empty()) {
    loop_thread_.join();
    *error = err;
    return false;
  }
  return true;
}

rocksdb::Status raft_store_impl::write(const std::vector<store_op>& ops) {
  // Encoded on the writer's thread, straight into the buffer libraft will own.
  return submit_entry(ops.empty() ? 0 : raft_codec::encoded_size(ops),
                      [&](char* buf) { raft_codec::encode_ops(ops, buf); });
}

rocksdb::Status raft_store_impl::propose(std::string_view entry) {
  if (entry.empty())
    return rocksdb::Status::InvalidArgument("an empty raft entry");
  // Padded to a multiple of 8 (raft_codec.hpp says why libraft needs it).
  const size_t padded = (entry.size() + 7) / 8 * 8;
  return submit_entry(padded, [&](char* buf) {
    std::memcpy(buf, entry.data(), entry.size());
    std::memset(buf + entry.size(), 0, padded - entry.size());
  });
}

rocksdb::Status raft_store_impl::submit_entry(size_t n, const std::function<void(char*)>& fill) {
  {
    std::lock_guard<std::mutex> g(mtx_);
    if (!fatal_.ok())
      return fatal_;
    if (closing_)
      return rocksdb::Status::ShutdownInProgress("raft replica closing");
  }
  if (!ready_leader_.load())
    return not_leader_status();
  if (n == 0)
    return rocksdb::Status::OK();  // nothing to append
  auto pw = std::make_shared<pending_write>();
  pw->buf.base = raft_malloc(n);
  if (pw->buf.base == nullptr)
    return rocksdb::Status::Aborted("out of memory for a raft entry of " + std::to_string(n)
                                    + " bytes");
  pw->buf.len = n;
  fill(static_cast<char*>(pw->buf.base));
  std::memset(&pw->req, 0, sizeof(pw->req));
  pw->req.data = pw.get();
  pw->owner = this;
  auto outcome = pw->done.get_future();
  {
    std::unique_lock<std::mutex> g(mtx_);
    room_.wait(g, [&] { return in_flight_ < opts_.max_in_flight || closing_ || !fatal_.ok(); });
    if (closing_ || !fatal_.ok()) {
      raft_free(pw->buf.base);
      return fatal_.ok() ? rocksdb::Status::ShutdownInProgress("raft replica closing") : fatal_;
    }
    queue_.push_back(pw);
    ++in_flight_;
    uv_async_send(&wake_);
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (opts_.write_timeout_ms > 0
      && outcome.wait_for(std::chrono::milliseconds(opts_.write_timeout_ms))
           == std::future_status::timeout)
    return rocksdb::Status::TimedOut("raft entry not committed within "
                                     + std::to_string(opts_.write_timeout_ms)
                                     + " ms; it may still commit");
  auto st = outcome.get();
  if (st.ok())
    record_latency(std::chrono::steady_clock::now() - t0);
  return st;
}

void raft_store_impl::record_latency(std::chrono::steady_clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  size_t i = 0;
  while (i < latency_bounds.size() && s > latency_bounds[i])
    ++i;
  latency_counts_[i].fetch_add(1, std::memory_order_relaxed);
  latency_sum_us_.fetch_add(
    static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count()),
    std::memory_order_relaxed);
}

raft_store::latency_histogram raft_store_impl::commit_latency() const {
  latency_histogram h;
  h.bounds.assign(latency_bounds.begin(), latency_bounds.end());
  for (const auto& c : latency_counts_) {
    h.counts.push_back(c.load(std::memory_order_relaxed));
    h.count += h.counts.back();
  }
  h.sum_seconds = static_cast<double>(latency_sum_us_.load(std::memory_order_relaxed)) / 1e6;
  return h;
}

namespace {
rocksdb::Status not_a_journal() {
  return rocksdb::Status::NotSupported("this raft group does not replicate a journal");
}
}  // namespace

rocksdb::Status raft_store_impl::scan(const std::function<bool(const stored_record&)>& fn) {
  return journal_ != nullptr ? journal_->store().scan(fn) : not_a_journal();
}

rocksdb::Status raft_store_impl::read_tree(uint64_t root_id, std::vector<stored_record>* out) {
  return journal_ != nullptr ? journal_->store().read_tree(root_id, out) : not_a_journal();
}

rocksdb::Status raft_store_impl::backup(const std::string& dir, const backup_info& info) {
  return journal_ != nullptr ? journal_->store().backup(dir, info) : not_a_journal();
}

std::string raft_store_impl::member_name(uint64_t id, const std::string& label) const {
  std::string found = label;
  if (found.empty()) {
    std::lock_guard<std::mutex> g(leader_mtx_);
    for (const auto& m : members_)
      if (m.id == id)
        found = m.label;
  }
  if (found.empty())
    for (const auto& m : opts_.members)
      if (m.id == id)
        found = m.label;
  std::string name =
    opts_.name_of && !found.empty() ? opts_.name_of(raft_member{id, {}, found}) : std::string{};
  auto number = "#" + std::to_string(id);
  return name.empty() ? number : name + " (" + number + ")";
}

raft_store::leader_info raft_store_impl::leader() const {
  std::lock_guard<std::mutex> g(leader_mtx_);
  return leader_;
}

rocksdb::Status raft_store_impl::not_leader_status() const {
  auto l = leader();
  if (l.id == 0)
    return rocksdb::Status::Busy("not the leader; no leader known (election in progress)");
  if (l.id == opts_.id)
    return rocksdb::Status::Busy("not the leader yet; elected, applying earlier entries");
  return rocksdb::Status::Busy("not the leader; leader is " + std::to_string(l.id) + " at "
                               + l.address);
}

// -- notifier ---------------------------------------------------------------------------------

void raft_store_impl::on_leadership_change(std::function<void(bool leader)> fn) {
  std::lock_guard<std::mutex> g(note_mtx_);
  callbacks_.push_back(std::make_shared<std::function<void(bool)>>(std::move(fn)));
}

void raft_store_impl::notify(bool leader) {
  {
    std::lock_guard<std::mutex> g(note_mtx_);
    notes_.push_back(leader);
  }
  note_cv_.notify_all();
}

void raft_store_impl::notifier_main() {
  // Callbacks run here, not on the loop thread: they may block or call write(), which
  // needs the loop thread to make progress.
  std::unique_lock<std::mutex> g(note_mtx_);
  for (;;) {
    note_cv_.wait(g, [&] { return note_stop_ || !notes_.empty(); });
    // Stopping delivers what is queued first: a closing leader's "false" is not lost.
    if (notes_.empty())
      return;
    bool leader = notes_.front();
    notes_.pop_front();
    auto fns = callbacks_;
    g.unlock();
    for (auto& fn : fns)
      (*fn)(leader);
    g.lock();
  }
}

// -- open -------------------------------------------------------------------------------------

namespace {

std::unique_ptr<raft_store_impl> open_impl(const raft_store_options& options,
                                           std::unique_ptr<raft_state_machine> state,
                                           std::string* error) {
  auto fail = [&](std::string msg) -> std::unique_ptr<raft_store_impl> {
    if (error != nullptr)
      *error = std::move(msg);
    return nullptr;
  };
  if (options.id == 0)
    return fail("raft replica id must be > 0");
  if (options.dir.empty())
    return fail("raft replica: no data directory");
  if (options.max_in_flight == 0)
    return fail("raft replica: max_in_flight must be > 0");
  bool member = options.join;  // a joining replica learns the group from its leader
  for (const auto& m : options.members)
    if (m.id == options.id) {
      if (m.address != options.address && !options.join)
        return fail("raft replica " + std::to_string(options.id) + " is " + m.address
                    + " in the member list but its address is " + options.address);
      member = true;
    }
  if (!member)
    return fail("raft replica " + std::to_string(options.id) + " is not in the member list");
  // Process-wide, once: see raft_group.hpp. A peer's connection that drops while libuv
  // writes to it would otherwise end the process (exit 141 in the libraft probe).
  static std::once_flag sigpipe_once;
  std::call_once(sigpipe_once, [] { std::signal(SIGPIPE, SIG_IGN); });
  auto store = std::make_unique<raft_store_impl>(options, std::move(state));
  std::string err;
  if (!store->start(&err))
    return fail(err);
  return store;
}

}  // namespace

std::unique_ptr<raft_store> open_raft_store(const raft_store_options& options, std::string* error) {
  return open_impl(options, nullptr, error);
}

std::unique_ptr<raft_group> open_raft_group(const raft_store_options& options,
                                            std::unique_ptr<raft_state_machine> state,
                                            std::string* error) {
  if (!state) {
    if (error != nullptr)
      *error = "raft group: no state machine";
    return nullptr;
  }
  return open_impl(options, std::move(state), error);
}

}  // namespace proctor
