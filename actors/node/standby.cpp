#include "actors/node/standby.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include <rocksdb/db.h>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/wire/endpoint.hpp"
#include "actors/wire/wire_client.hpp"
#include "persistence/rocksdb_store.hpp"

namespace proctor {

namespace {

using clock_type = std::chrono::steady_clock;

/// Where a standby keeps its RocksDB secondary instance's files: $TMPDIR (else /tmp).
std::filesystem::path standby_tmp_root() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t != '\0' ? t : "/tmp";
}

constexpr std::string_view standby_tmp_prefix = "proctord-standby-";

/// Removes the directories of standbys that are gone (killed while they waited: they could not
/// remove theirs): "proctord-standby-<pid>-XXXXXX" whose process no longer runs.
void sweep_dead_standbys() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(standby_tmp_root(), ec)) {
    auto name = e.path().filename().string();
    if (name.rfind(standby_tmp_prefix, 0) != 0)
      continue;
    auto rest = name.substr(standby_tmp_prefix.size());
    auto dash = rest.find('-');
    if (dash == std::string::npos)
      continue;
    char* end = nullptr;
    long pid = std::strtol(rest.c_str(), &end, 10);
    if (end != rest.c_str() + dash || pid <= 0)
      continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;  // it runs (or is not ours to tell)
    std::error_code rm;
    std::filesystem::remove_all(e.path(), rm);
    if (!rm)
      spdlog::info("standby: removed {}, left by standby process {} that is gone",
                   e.path().string(), pid);
  }
}

/// A RocksDB secondary instance following the active's journal. Its only use is to keep the
/// journal's files in the page cache; what it reads is thrown away.
class follower {
public:
  explicit follower(std::string dir) : dir_(std::move(dir)) {}

  ~follower() { close(); }

  /// Opens the instance (once the directory has a database) or catches it up.
  void step() {
    if (!db_) {
      if (!std::filesystem::exists(dir_ + "/CURRENT"))
        return;
      if (!swept_) {
        swept_ = true;
        sweep_dead_standbys();
      }
      // Named by this process, so that a later standby removes it if this one is killed.
      auto tmpl = (standby_tmp_root()
                   / (std::string(standby_tmp_prefix) + std::to_string(::getpid()) + "-XXXXXX"))
                    .string();
      if (::mkdtemp(tmpl.data()) == nullptr)
        return;
      own_path_ = tmpl;
      auto opts = journal_db_options();
      opts.create_if_missing = false;
      opts.max_open_files = -1;  // a secondary instance needs every file open
      rocksdb::DB* raw = nullptr;
      auto st = rocksdb::DB::OpenAsSecondary(opts, dir_, own_path_, &raw);
      if (!st.ok()) {
        spdlog::debug("standby: cannot follow the journal yet: {}", st.ToString());
        close();
        return;
      }
      db_.reset(raw);
    }
    auto st = db_->TryCatchUpWithPrimary();
    if (!st.ok()) {
      spdlog::debug("standby: catching up with the journal failed: {}; reopening", st.ToString());
      close();
      return;
    }
    auto seq = db_->GetLatestSequenceNumber();
    if (seq != last_seq_)
      spdlog::debug("standby: journal followed to sequence {}", seq);
    last_seq_ = seq;
  }

  void close() {
    db_.reset();
    if (!own_path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(own_path_, ec);
      own_path_.clear();
    }
  }

private:
  std::string dir_;
  std::string own_path_;
  std::unique_ptr<rocksdb::DB> db_;
  uint64_t last_seq_ = 0;
  bool swept_ = false;
};

/// True if /proc/locks shows `pid` holding an flock on the file `path`.
bool holds_flock(int64_t pid, const std::string& path) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0)
    return false;
  std::ifstream in("/proc/locks");
  std::string line;
  auto want_inode = std::to_string(sb.st_ino);
  while (std::getline(in, line)) {
    // "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF"
    std::istringstream ls(line);
    std::string n, kind, adv, mode, who, dev_inode;
    ls >> n >> kind >> adv >> mode >> who >> dev_inode;
    if (kind != "FLOCK" || who != std::to_string(pid))
      continue;
    auto colon = dev_inode.rfind(':');
    if (colon != std::string::npos && dev_inode.substr(colon + 1) == want_inode)
      return true;
  }
  return false;
}

/// Whether the active answers a ping (any answer, even a refusal, shows its executor runs).
bool answers(const std::string& listen, const tls_options& tls) {
  auto ep = parse_endpoint(listen);
  if (!ep)
    return false;
  pb::Request req;
  req.mutable_ping();
  wire_call_options o;
  o.connect_timeout = std::chrono::milliseconds{500};
  o.reply_timeout = std::chrono::milliseconds{500};
  o.tls = tls;
  return wire_call(ep->host, ep->port, req.SerializeAsString(), o).ok();
}

/// Fencing of a hung active on this host: pings it and kills it after `fence_after` of
/// silence.
class prober {
public:
  prober(const standby_options& opts) : opts_(opts), last_answer_(clock_type::now()) {}

  void step() {
    auto now = clock_type::now();
    if (!opts_.fence_after || now - last_probe_ < opts_.probe_every)
      return;
    last_probe_ = now;
    auto info = read_active_info(opts_.data_dir);
    if (!info || info->host != host_name() || info->pid <= 0 || info->listen.empty()) {
      last_answer_ = now;  // nothing this standby may judge
      return;
    }
    if (answers(info->listen, opts_.tls)) {
      last_answer_ = clock_type::now();
      return;
    }
    auto silent =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - last_answer_);
    if (silent < *opts_.fence_after)
      return;
    // Only the process that holds the lock file's flock is ever killed (a pid in a stale
    // ACTIVE file may name another process by now).
    if (!holds_flock(info->pid, opts_.data_dir + "/ACTIVE.lock"))
      return;
    spdlog::warn("standby: the active process (pid {}, epoch {}) has not answered on {} for "
                 "{} ms; killing it (SIGKILL) to take over",
                 info->pid, info->epoch, info->listen, silent.count());
    ::kill(static_cast<pid_t>(info->pid), SIGKILL);
    last_answer_ = clock_type::now();
  }

private:
  const standby_options& opts_;
  clock_type::time_point last_answer_;
  clock_type::time_point last_probe_{};
};

}  // namespace

standby_outcome wait_as_standby(const standby_options& opts) {
  standby_outcome out;
  follower warm(opts.data_dir);
  prober probe(opts);
  auto last_catch_up = clock_type::time_point{};
  bool told = false;
  for (;;) {
    std::string err;
    bool held = false;
    auto lock = active_lock::try_take(opts.data_dir, &err, &held);
    if (lock) {
      out.taken_at = clock_type::now();
      warm.close();
      out.lock = std::move(lock);
      return out;
    }
    if (!held) {
      out.error = err;
      return out;
    }
    out.waited = true;
    if (!told) {
      auto info = read_active_info(opts.data_dir);
      spdlog::info("standby on {}: the active process is {}; waiting for its lock", opts.data_dir,
                   info ? "pid " + std::to_string(info->pid) + " on " + info->host + " ("
                            + info->listen + ", epoch " + std::to_string(info->epoch) + ")"
                        : std::string{"unknown"});
      told = true;
    }
    if (opts.stop_requested && opts.stop_requested())
      return out;
    if (clock_type::now() - last_catch_up >= opts.catch_up_every) {
      warm.step();
      last_catch_up = clock_type::now();
    }
    probe.step();
    std::this_thread::sleep_for(opts.lock_poll);
  }
}

standby_outcome take_directory(const standby_options& opts, bool as_standby) {
  if (as_standby)
    return wait_as_standby(opts);
  standby_outcome out;
  out.lock = active_lock::try_take(opts.data_dir, &out.error);
  out.taken_at = clock_type::now();
  return out;
}

bool signal_pending(const sigset_t& sigs) {
  sigset_t pending;
  if (::sigpending(&pending) != 0)
    return false;
  for (int sig = 1; sig < NSIG; ++sig)
    if (::sigismember(&sigs, sig) == 1 && ::sigismember(&pending, sig) == 1)
      return true;
  return false;
}

int wait_for_signal_unless_fenced(const sigset_t& sigs, const active_lock& lock) {
  for (;;) {
    timespec slice{0, 250'000'000};
    int sig = ::sigtimedwait(&sigs, nullptr, &slice);
    if (sig > 0)
      return sig;
    std::string why;
    if (!lock.still_ours(&why)) {
      spdlog::critical("fenced off: {}; exiting without writing anything more", why);
      spdlog::shutdown();
      std::_Exit(75);
    }
  }
}

}  // namespace proctor
