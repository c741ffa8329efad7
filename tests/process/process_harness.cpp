#include "tests/process/process_harness.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <unordered_set>

#ifndef PROCTOR_BIN_DIR
#define PROCTOR_BIN_DIR "build/bin"
#endif

namespace proctor::test {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

/// Closes an fd on scope exit.
class fd_guard {
public:
  explicit fd_guard(int fd = -1) : fd_(fd) {}
  ~fd_guard() { reset(); }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  int get() const noexcept { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_;
};

int decode_status(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return -1;
}

/// Where a child's standard streams go: an fd of ours (dup'ed onto it) or a file to append to.
struct child_io {
  int out_fd = -1;
  int err_fd = -1;
  std::string out_file;  // used when out_fd < 0; stderr follows stdout then if err_fd < 0
  std::string in_file;   // stdin: this file ("" = /dev/null)
};

/// fork + exec of `program` with `args`; stdin is /dev/null (or io.in_file). The child is killed
/// with SIGKILL if the thread that started it exits, so a crashed test leaves no node behind.
/// Returns the pid, or -1 with `*error` set when the program could not be executed.
pid_t spawn_child(const std::filesystem::path& program, const std::vector<std::string>& args,
                  const child_io& io, std::string* error) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe
  // calls are allowed (the test process may have other threads).
  std::string prog = program.string();
  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.push_back(prog);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : storage)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0)
    throw_errno("pipe2");
  fd_guard status_read{status_pipe[0]};
  fd_guard status_write{status_pipe[1]};
  fd_guard out_file;
  if (io.out_fd < 0 && !io.out_file.empty()) {
    out_file.reset(::open(io.out_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (out_file.get() < 0)
      throw_errno("open " + io.out_file);
  }
  std::string in_path = io.in_file.empty() ? std::string("/dev/null") : io.in_file;
  int out_fd = io.out_fd >= 0 ? io.out_fd : out_file.get();
  int err_fd = io.err_fd >= 0 ? io.err_fd : out_fd;
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0)
    throw_errno("fork");
  if (pid == 0) {
    auto fail = [&](int err) {
      (void)!::write(status_pipe[1], &err, sizeof(err));
      ::_exit(127);
    };
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent)
      ::_exit(127);
    int null_fd = ::open(in_path.c_str(), O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0)
      fail(errno);
    if (out_fd >= 0 && ::dup2(out_fd, 1) < 0)
      fail(errno);
    if (err_fd >= 0 && ::dup2(err_fd, 2) < 0)
      fail(errno);
    ::execv(argv[0], argv.data());
    fail(errno);
  }
  status_write.reset();
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(status_read.get(), &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status;
    ::waitpid(pid, &status, 0);
    *error = "cannot execute " + prog + ": " + std::strerror(child_errno);
    return -1;
  }
  return pid;
}

}  // namespace

// -- free functions ---------------------------------------------------------------------------

std::filesystem::path bin_path(const std::string& name) {
  if (const char* dir = std::getenv("PROCTOR_BIN_DIR"); dir != nullptr && *dir != '\0')
    return std::filesystem::path{dir} / name;
  return std::filesystem::path{PROCTOR_BIN_DIR} / name;
}

namespace {

/// The first port of the kernel's ephemeral range (32768 if it cannot be read).
uint16_t ephemeral_start() {
  std::ifstream in{"/proc/sys/net/ipv4/ip_local_port_range"};
  unsigned lo = 0;
  if (in >> lo && lo > 1024 && lo <= 65535)
    return static_cast<uint16_t>(lo);
  return 32768;
}

/// True if `port` on 127.0.0.1 could be bound just now.
bool bindable(uint16_t port) {
  fd_guard s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (s.get() < 0)
    return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return ::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

}  // namespace

uint16_t free_port() {
  static const uint16_t top = ephemeral_start();
  if (top > 10000 + 1000) {
    static std::mt19937 rng{std::random_device{}()};
    static std::mutex m;
    // Never a port given before in this process: a test's nodes are given their ports before
    // any of them listens, so a port drawn twice was bindable both times, and two nodes got
    // it (CI of 2026-12-05: node a's link to node c reached node a).
    static std::unordered_set<uint16_t> given;
    std::lock_guard<std::mutex> g(m);
    std::uniform_int_distribution<unsigned> pick(10000, top - 1u);
    for (int i = 0; i < 200; ++i)
      if (auto p = static_cast<uint16_t>(pick(rng)); !given.count(p) && bindable(p)) {
        given.insert(p);
        return p;
      }
  }
  // No room below the ephemeral range (or all taken): whatever the kernel gives.
  fd_guard s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (s.get() < 0)
    throw_errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    throw_errno("bind");
  socklen_t len = sizeof(addr);
  if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_errno("getsockname");
  return ntohs(addr.sin_port);
}

temp_dir::temp_dir() {
  auto pattern = (std::filesystem::temp_directory_path() / "proctor-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw_errno("mkdtemp");
  path_ = pattern;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

run_result run_program(const std::filesystem::path& program, const std::vector<std::string>& args,
                       milliseconds limit, const std::filesystem::path& stdin_file) {
  run_result result;
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0)
    throw_errno("pipe2");
  fd_guard out_read{out_pipe[0]};
  fd_guard out_write{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw_errno("pipe2");
  fd_guard err_read{err_pipe[0]};
  fd_guard err_write{err_pipe[1]};

  child_io io;
  io.out_fd = out_write.get();
  io.err_fd = err_write.get();
  io.in_file = stdin_file.string();
  pid_t pid = spawn_child(program, args, io, &result.err);
  if (pid < 0)
    return result;
  out_write.reset();
  err_write.reset();

  // Drain both pipes until the child closes them (reading one at a time could deadlock
  // when the other fills up).
  auto deadline = steady_clock::now() + limit;
  bool out_open = true;
  bool err_open = true;
  char buf[4096];
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fds[2] = {{out_open ? out_read.get() : -1, POLLIN, 0},
                     {err_open ? err_read.get() : -1, POLLIN, 0}};
    int r = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (r < 0) {
      if (errno == EINTR)
        continue;
      throw_errno("poll");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0)
        continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0)
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR)
        (i == 0 ? out_open : err_open) = false;
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = decode_status(status);
  return result;
}

run_result run_proctor(const std::vector<std::string>& args, milliseconds limit,
                       const std::filesystem::path& stdin_file) {
  return run_program(bin_path("proctor"), args, limit, stdin_file);
}

// -- node -------------------------------------------------------------------------------------

node::node(std::filesystem::path data_dir, uint16_t port, std::vector<std::string> extra_args)
    : data_dir_(std::move(data_dir)), port_(port != 0 ? port : free_port()),
      extra_args_(std::move(extra_args)) {
  auto base = data_dir_;
  if (!base.has_filename())
    base = base.parent_path();
  log_ = base.string() + ".log";
}

node::~node() {
  kill();
}

std::string node::address() const {
  return "127.0.0.1:" + std::to_string(port_);
}

bool node::start(milliseconds ready_limit) {
  if (running())
    return true;
  if (!launch())
    return false;
  if (wait_ready(ready_limit))
    return true;
  kill();
  return false;
}

bool node::wait_ready(milliseconds limit) {
  bool up = eventually(
    [this] {
      return !running()
             || ctl({"list", "--local", "--json"}, std::chrono::seconds{5}).exit_code == 0;
    },
    limit, milliseconds{50});
  return up && running();
}

bool node::launch() {
  if (running())
    return true;
  std::error_code ec;
  std::filesystem::create_directories(log_.parent_path(), ec);
  std::vector<std::string> args;
  if (!extra_args_only_)
    args = {"--data-dir", data_dir_.string(), "--listen", address()};
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  child_io io;
  io.out_file = log_.string();
  std::string error;
  pid_ = spawn_child(bin_path("proctord"), args, io, &error);
  if (pid_ < 0) {
    std::ofstream{log_, std::ios::app} << "harness: " << error << '\n';
    return false;
  }
  return true;
}

void node::kill() {
  if (pid_ < 0)
    return;
  ::kill(pid_, SIGKILL);
  reap(std::chrono::seconds{30});
}

int node::stop(milliseconds limit) {
  if (pid_ < 0)
    return -1;
  ::kill(pid_, SIGTERM);
  if (!reap(limit))
    kill();
  return last_exit_code_;
}

bool node::running() {
  if (pid_ < 0)
    return false;
  return !reap(milliseconds{0});
}

bool node::reap(milliseconds limit) {
  auto deadline = steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      last_exit_code_ = r == pid_ ? decode_status(status) : -1;
      pid_ = -1;
      return true;
    }
    if (steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(milliseconds{10});
  }
}

run_result node::ctl(const std::vector<std::string>& args, milliseconds limit) const {
  std::vector<std::string> full{"--node", address()};
  full.insert(full.end(), args.begin(), args.end());
  return run_proctor(full, limit);
}

std::string node::log_tail(size_t lines) const {
  std::ifstream in{log_};
  std::deque<std::string> tail;
  for (std::string line; std::getline(in, line);) {
    tail.push_back(std::move(line));
    if (tail.size() > lines)
      tail.pop_front();
  }
  std::string out;
  for (auto& l : tail)
    out += l + '\n';
  return out;
}

std::string raft_unfit_dir(const std::filesystem::path& dir) {
  struct statfs f {};
  if (statfs(dir.c_str(), &f) == 0 && f.f_type == TMPFS_MAGIC)
    return dir.string() + " is on tmpfs: libraft needs O_DIRECT (set TMPDIR)";
  return {};
}

int serving_replica(const std::vector<node*>& replicas, std::chrono::milliseconds limit, int skip) {
  int found = -1;
  eventually(
    [&] {
      for (int i = 0; i < static_cast<int>(replicas.size()); ++i)
        if (i != skip && replicas[i]->running()
            && replicas[i]->ctl({"list", "--json"}, std::chrono::seconds{10}).exit_code == 0)
          found = i;
      return found >= 0;
    },
    limit, std::chrono::milliseconds{50});
  return found;
}

run_result make_certs(const std::filesystem::path& dir, const std::vector<std::string>& nodes) {
  std::vector<std::string> args{
    (std::filesystem::path{PROCTOR_SOURCE_DIR} / "scripts" / "make-certs.sh").string(),
    dir.string()};
  args.insert(args.end(), nodes.begin(), nodes.end());
  return run_program("/bin/bash", args, std::chrono::seconds{60});
}

void set_cli_tls(const std::filesystem::path& cert, const std::filesystem::path& key,
                 const std::filesystem::path& ca) {
  setenv("PROCTOR_TLS_CERT", cert.c_str(), 1);
  setenv("PROCTOR_TLS_KEY", key.c_str(), 1);
  setenv("PROCTOR_TLS_CA", ca.c_str(), 1);
}

void clear_cli_tls() {
  unsetenv("PROCTOR_TLS_CERT");
  unsetenv("PROCTOR_TLS_KEY");
  unsetenv("PROCTOR_TLS_CA");
  unsetenv("PROCTOR_TLS_CHECK_HOST");
}

}  // namespace proctor::test
