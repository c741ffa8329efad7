// raft_store's implementation, shared by raft_store.cpp (the callers' side: options, writes,
// observers, the notifier thread), raft_loop.cpp (the loop thread: libraft and libuv) and
// raft_observe.cpp (the loop thread's observing of libraft's state).
//
// Threading: fields are grouped by who touches them. "loop" fields belong to the loop thread
// (after start() hands it over, and until the loop thread ends); "shared" fields are guarded
// by mtx_; observed values are atomics (or leader_mtx_) written by the loop thread only.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "replication/journal_replica_db.hpp"
#include "replication/raft_c.hpp"
#include "replication/raft_fsm.hpp"
#include "replication/raft_store.hpp"
#include "replication/raft_tls_transport.hpp"
#include "replication/raft_transport.hpp"

namespace proctor {

class raft_store_impl final : public raft_store {
public:
  /// With `state` null, the group is the journal's: start() opens its database in dir/db.
  raft_store_impl(raft_store_options opts, std::unique_ptr<raft_state_machine> state);
  ~raft_store_impl() override;

  /// Opens the database, starts the notifier and loop threads; false with `error` set.
  bool start(std::string* error);

  // -- raft_group / raft_store -------------------------------------------------------------
  rocksdb::Status propose(std::string_view entry) override;
  rocksdb::Status write(const std::vector<store_op>& ops) override;
  // The journal's reads: NotSupported in a group opened with its own state machine.
  rocksdb::Status scan(const std::function<bool(const stored_record&)>& fn) override;
  rocksdb::Status read_tree(uint64_t root_id, std::vector<stored_record>* out) override;
  /// A checkpoint of this replica's database: the journal as applied here (a leader has
  /// applied every write it acknowledged).
  rocksdb::Status backup(const std::string& dir, const backup_info& info) override;
  uint64_t id() const override { return opts_.id; }
  bool is_leader() const override { return ready_leader_.load(); }
  bool sure_to_lead() const override;
  leader_info leader() const override;
  uint64_t term() const override { return term_.load(); }
  uint64_t commit_index() const override { return commit_.load(); }
  std::vector<member_status> members() const override {
    std::lock_guard<std::mutex> g(leader_mtx_);
    return members_;
  }
  std::string role() const override {
    std::lock_guard<std::mutex> g(leader_mtx_);
    return role_;
  }
  latency_histogram commit_latency() const override;
  uint64_t applied_index() const override { return applied_.load(); }
  uint64_t snapshot_index() const override { return snapshot_.load(); }
  void on_leadership_change(std::function<void(bool leader)> fn) override;
  std::future<membership_outcome> change_membership(membership_change change) override;

private:
  /// One write on its way: queued by its writer, submitted by the loop thread, finished
  /// (its promise set) exactly once. Shared by the writer and the loop, which keeps it alive
  /// while libraft holds `req`.
  struct pending_write {
    struct raft_apply req;   // req.data = this
    struct raft_buffer buf;  // raft_malloc'd; libraft's once raft_apply accepted it
    std::promise<rocksdb::Status> done;
    raft_store_impl* owner = nullptr;
    bool finished = false;  // loop thread
  };

  /// A membership change on its way (raft_membership.cpp): queued by its caller, driven by
  /// the loop thread through libraft's requests (add, assign, remove) and, while a new
  /// member catches up, by on_check.
  struct pending_change {
    enum class phase : uint8_t {
      queued,
      adding,
      to_standby,
      catching_up,
      to_voter,
      removing,
      demoting
    };
    membership_change change;
    std::promise<membership_outcome> done;
    struct raft_change req;  // req.data = this, while libraft holds it
    raft_store_impl* change_owner = nullptr;
    phase at = phase::queued;
    std::chrono::steady_clock::time_point started{}, deadline{};
    uint64_t behind_at_standby = 0;  // entries the new member lacked when it became standby
    bool finished = false;
  };

  // -- callers' side (raft_store.cpp) -------------------------------------------------------
  /// Queues an entry of `n` bytes that `fill` writes into libraft's buffer (on the caller's
  /// thread) and waits for its outcome (propose()). n == 0 appends nothing: OK on a leader
  /// that can write, else why not.
  rocksdb::Status submit_entry(size_t n, const std::function<void(char*)>& fill);
  rocksdb::Status not_leader_status() const;
  void notify(bool leader);  // any thread; queued for the notifier
  void notifier_main();

  // -- loop thread (raft_loop.cpp, raft_observe.cpp) ----------------------------------------
  void loop_main(std::promise<std::string>* started);
  std::string init_loop();  // "" or why it failed (then everything is released)
  void on_wake();
  void on_check();
  void refresh_members();  // members_ and role_ from libraft's configuration and progress
  /// A member as logs name it: "b2 (#2)" (opts_.name_of on its label, found in the
  /// configuration when not given), "#2" when it has no name.
  std::string member_name(uint64_t id, const std::string& label = {}) const;
  std::string self_name() const { return member_name(opts_.id); }
  void submit(std::shared_ptr<pending_write> pw);
  void finish(pending_write* pw, rocksdb::Status st);
  void fail_all(const rocksdb::Status& st);
  void on_fatal(const rocksdb::Status& st);
  void begin_close();
  void on_raft_closed();
  static void wake_cb(uv_async_t* h);
  static void check_cb(uv_check_t* h);
  static void apply_cb(struct raft_apply* req, int status, void* result);
  static void barrier_cb(struct raft_barrier* req, int status);
  static void transfer_cb(struct raft_transfer* req);
  static void raft_close_cb(struct raft* r);
  // membership (raft_membership.cpp)
  void start_change(std::shared_ptr<pending_change> pc);
  void advance_change(int status);  // libraft answered the request in flight
  void check_catch_up();            // on_check, while a new member catches up
  void end_change(rocksdb::Status st, std::string text);
  static void change_cb(struct raft_change* req, int status);

public:
  /// How a member is stored in libraft's configuration: "ADDRESS#LABEL" (ADDRESS alone
  /// without a label); the transport connects to ADDRESS (raft_transport.cpp).
  static std::string config_address(const raft_member& m);
  static void split_config_address(const char* stored, std::string* address, std::string* label);

private:
  raft_store_options opts_;
  std::unique_ptr<raft_state_machine> sm_;
  raft_replica_db* journal_ = nullptr;  // sm_, when the group is the journal's
  raft_fsm_binding binding_;

  // -- loop --------------------------------------------------------------------------------
  uv_loop_t loop_;
  uv_async_t wake_;
  uv_check_t check_;
  nodelay_transport transport_;   // plain TCP: raft_uv_tcp with TCP_NODELAY
  tls_transport* tls_ = nullptr;  // with opts_.tls: the TLS transport instead
  struct raft_uv_transport* transport() {
    return tls_ ? tls_transport_uv(tls_) : &transport_.outer;
  }
  void close_transport();  // after libraft closed it
  struct raft_io io_;
  struct raft_fsm fsm_;
  struct raft raft_;
  struct raft_barrier barrier_;
  struct raft_transfer transfer_;
  bool raft_leader_ = false;      // libraft's state is leader (maybe not caught up yet)
  uint64_t leader_term_ = 0;      // the term raft_leader_ was seen in
  bool barrier_needed_ = false;   // a leader's catch-up barrier is still to be appended
  bool barrier_pending_ = false;  // ... is appended and not yet applied
  bool transfer_wanted_ = false;  // this replica cannot apply: hand leadership over
  bool transfer_pending_ = false;
  bool close_started_ = false;
  std::unordered_map<pending_write*, std::shared_ptr<pending_write>> submitted_;
  std::shared_ptr<pending_change> change_;  // the one under way (libraft allows one)
  std::thread loop_thread_;

  // -- shared (mtx_) -----------------------------------------------------------------------
  std::mutex mtx_;
  std::condition_variable room_;  // in_flight_ went down, or closing_ / fatal_ set
  std::deque<std::shared_ptr<pending_write>> queue_;
  std::deque<std::shared_ptr<pending_change>> changes_;
  size_t in_flight_ = 0;  // queued + submitted, not finished
  bool loop_running_ = false;
  bool closing_ = false;
  rocksdb::Status fatal_;  // set once this replica cannot apply any more

  // -- observed (written by the loop thread) --------------------------------------------------
  std::atomic<bool> ready_leader_{false};
  // sure_to_lead(): until when (steady clock, ms since its epoch) the loop vouches for this
  // leader (0: not sure); the loop's last check (libraft's clock, ms), and since when it has
  // been unsure after a stall (0: it was not stalled).
  std::atomic<int64_t> sure_until_ms_{0};
  uint64_t last_check_ms_ = 0;
  uint64_t unsure_since_ms_ = 0;
  void update_lease(bool leader_now);
  std::atomic<uint64_t> term_{0};
  std::atomic<uint64_t> commit_{0};
  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> snapshot_{0};
  mutable std::mutex leader_mtx_;
  leader_info leader_;
  std::vector<member_status> members_;                  // leader_mtx_
  std::string role_ = "unavailable";                    // leader_mtx_
  std::chrono::steady_clock::time_point members_at_{};  // loop thread: last refresh

  // -- acknowledged writes' latency (any writer thread) ----------------------------------------
  static constexpr std::array<double, 13> latency_bounds{
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5};
  std::array<std::atomic<uint64_t>, latency_bounds.size() + 1> latency_counts_{};
  std::atomic<uint64_t> latency_sum_us_{0};
  void record_latency(std::chrono::steady_clock::duration d);

  // -- notifier (note_mtx_) ----------------------------------------------------------------
  std::mutex note_mtx_;
  std::condition_variable note_cv_;
  std::deque<bool> notes_;
  std::vector<std::shared_ptr<std::function<void(bool)>>> callbacks_;
  bool note_stop_ = false;
  std::thread notifier_;
};

}  // namespace proctor
