#include "persistence/active_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "persistence/journal_backup.hpp"

namespace proctor {

namespace {

std::string lock_path(const std::string& dir) {
  return dir + "/ACTIVE.lock";
}

std::string info_path(const std::string& dir) {
  return dir + "/ACTIVE";
}

/// The epoch in the lock file's first 8 bytes (little-endian); 0 for a new file.
bool read_epoch(int fd, uint64_t* out) {
  unsigned char b[8] = {};
  auto n = ::pread(fd, b, sizeof b, 0);
  if (n < 0)
    return false;
  uint64_t v = 0;
  for (int i = 0; i < n && i < 8; ++i)
    v |= uint64_t{b[i]} << (8 * i);
  *out = n == 8 ? v : 0;
  return true;
}

bool write_epoch(int fd, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i)
    b[i] = static_cast<unsigned char>(v >> (8 * i));
  return ::pwrite(fd, b, sizeof b, 0) == 8 && ::fdatasync(fd) == 0;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

/// Holds the directory's lock for `fenced`: a base before the store's, so destroyed after it.
struct lock_holder {
  std::shared_ptr<const active_lock> lock_;
};

/// Checks the epoch before each write; everything else passes through. Destroyed in reverse:
/// the database closes (RocksDB's lock released) before the directory's lock, so a standby
/// that gets the latter finds the former free.
class fenced : private lock_holder, public forwarding_store {
public:
  fenced(std::shared_ptr<journal_store> inner, std::shared_ptr<const active_lock> lock)
      : lock_holder{std::move(lock)}, forwarding_store(std::move(inner)) {}

  rocksdb::Status write(const std::vector<store_op>& ops) override {
    std::string why;
    if (!lock_->still_ours(&why))
      return rocksdb::Status::Aborted("fenced off, not writing: " + why);
    return forwarding_store::write(ops);
  }
};

}  // namespace

active_lock::active_lock(std::string dir, int fd, uint64_t epoch)
    : dir_(std::move(dir)), fd_(fd), epoch_(epoch) {}

active_lock::~active_lock() {
  ::close(fd_);  // releases the flock
}

std::unique_ptr<active_lock> active_lock::try_take(const std::string& dir, std::string* error,
                                                   bool* held) {
  if (held != nullptr)
    *held = false;
  auto fail = [&](const std::string& msg) -> std::unique_ptr<active_lock> {
    if (error != nullptr)
      *error = msg;
    return nullptr;
  };
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return fail("data directory " + dir + " is not writable: " + ec.message());
  int fd = ::open(lock_path(dir).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return fail("data directory " + dir + " is not writable: " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK) {
      if (held != nullptr)
        *held = true;
      return fail("data directory " + dir + " is in use by another proctord (lock held)");
    }
    return fail("cannot lock data directory " + dir + ": " + std::strerror(e));
  }
  uint64_t epoch = 0;
  if (!read_epoch(fd, &epoch) || !write_epoch(fd, epoch + 1)) {
    int e = errno;
    ::close(fd);
    return fail("cannot write the epoch of data directory " + dir + ": " + std::strerror(e));
  }
  return std::unique_ptr<active_lock>(new active_lock(dir, fd, epoch + 1));
}

bool active_lock::still_ours(std::string* why) const {
  uint64_t now = 0;
  if (!read_epoch(fd_, &now)) {
    *why = std::string{"cannot read the epoch of "} + lock_path(dir_) + ": " + std::strerror(errno);
    return false;
  }
  if (now == epoch_)
    return true;
  *why = "data directory " + dir_ + " has epoch " + std::to_string(now) + ", this process took "
         + std::to_string(epoch_) + " (another process took over)";
  return false;
}

bool active_lock::publish(active_info info, std::string* error) const {
  info.epoch = epoch_;
  info.pid = ::getpid();
  info.host = host_name();
  if (info.since_ms == 0)
    info.since_ms = now_ms();
  auto tmp = info_path(dir_) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "epoch=" << info.epoch << "\npid=" << info.pid << "\nhost=" << info.host
        << "\nlisten=" << info.listen << "\nsince_ms=" << info.since_ms
        << "\ntakeover_ms=" << info.takeover_ms << "\n";
    out.flush();
    if (!out) {
      *error = "cannot write " + tmp;
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, info_path(dir_), ec);
  if (ec) {
    *error = "cannot write " + info_path(dir_) + ": " + ec.message();
    return false;
  }
  return true;
}

std::optional<active_info> read_active_info(const std::string& dir) {
  std::ifstream in(info_path(dir));
  if (!in)
    return std::nullopt;
  active_info info;
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos)
      continue;
    auto key = line.substr(0, eq);
    auto value = line.substr(eq + 1);
    try {
      if (key == "epoch")
        info.epoch = std::stoull(value);
      else if (key == "pid")
        info.pid = std::stoll(value);
      else if (key == "host")
        info.host = value;
      else if (key == "listen")
        info.listen = value;
      else if (key == "since_ms")
        info.since_ms = std::stoll(value);
      else if (key == "takeover_ms")
        info.takeover_ms = std::stoll(value);
    } catch (const std::exception&) {
      return std::nullopt;  // a torn or foreign file: no information
    }
  }
  return info;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0)
    return "unknown";
  return buf;
}

std::shared_ptr<journal_store> fenced_store(std::shared_ptr<journal_store> inner,
                                            std::shared_ptr<const active_lock> lock) {
  return std::make_shared<fenced>(std::move(inner), std::move(lock));
}

}  // namespace proctor
