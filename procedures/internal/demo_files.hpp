// What the demo procedures share (procedures/demo*.cpp only): their files' helpers (a
// ledger line, a marker file, a fence), their naps, and demo.ledger's registration.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>

#include <proctor/registry.hpp>
#include <proctor/state_machine.hpp>

namespace proctor::demo_detail {

namespace fs = std::filesystem;

/// Creates `path` if missing (idempotent); throws on I/O errors (a crash: retried).
void touch(const fs::path& path);

/// Appends `line` and a newline to `path`, creating it (one write(2) with O_APPEND: whole
/// lines, also from several processes); throws on I/O errors (a crash: retried).
void append_line(const fs::path& path, std::string line);

/// Removes `path` if present (idempotent).
void remove_file(const fs::path& path);

/// "" if `dir` is a directory, else why not (never throws: args come from clients).
std::string check_dir(const std::string& dir);

void nap(int ms);

/// Sleeps `ms` in slices of at most 10 ms; false, at once, when the step is no longer wanted
/// (ctx.cancelled(): a cancelled sibling, a stopped subtree).
bool nap_unless_cancelled(int ms, const context& ctx);

/// True when `gate_dir` is "" or holds the file `name`: demo.ledger's gates (see demo.proto).
bool gate_open(const std::string& gate_dir, const std::string& name);

/// The wall clock, in ms since the epoch.
int64_t wall_ms();

/// Runs `write` under the fencing token `t` of a step or undo of procedure `id`, when
/// `fence_dir` is set: `<fence_dir>/<id>` holds the newest token seen ("epoch seq"); an older
/// `t` is refused (throws: the run is a deposed leader's, and none of its effects may land),
/// else `t` is recorded and `write` runs, both under an exclusive flock, so that a newer
/// leader's run that comes meanwhile waits for the write and then sees its token. The lock is
/// awaited for at most 10 s (its holder may be a frozen process), then the run throws and is
/// retried.
template <class Write>
void fenced(const std::string& fence_dir, uint64_t id, const fencing_token& t, Write&& write) {
  if (fence_dir.empty())
    return write();
  auto path = (fs::path(fence_dir) / std::to_string(id)).string();
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }  // (releases the flock)
  } guard{fd};
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      throw std::runtime_error("cannot lock " + path + ": " + std::strerror(errno));
    if (std::chrono::steady_clock::now() > until)
      throw std::runtime_error("demo.ledger: fence " + path + " held for 10 s by another run");
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  char buf[64] = {};
  auto n = ::pread(fd, buf, sizeof buf - 1, 0);
  fencing_token seen;
  if (n > 0)
    std::sscanf(buf, "%" SCNu64 " %" SCNu64, &seen.epoch, &seen.seq);
  if (t < seen)
    throw std::runtime_error("demo.ledger: fenced: procedure " + std::to_string(id) + "'s token "
                             + t.str() + " is older than " + seen.str()
                             + " (a newer leader ran it): refused");
  auto text = std::to_string(t.epoch) + " " + std::to_string(t.seq) + "\n";
  if (::ftruncate(fd, 0) != 0
      || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  write();
}

/// Registers demo.ledger, demo.ledger.impatient and demo.race (demo_ledger.cpp).
void register_demo_ledgers(registry& r);

}  // namespace proctor::demo_detail
