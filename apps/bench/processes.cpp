// proctor-bench: real proctord processes for the phases that need them ((g), (h), (i)): the
// binary beside proctor-bench, started on 127.0.0.1 with free ports and driven over the
// client protocol (proto/WIRE.md) as the CLI drives it.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <proctor/wire.pb.h>

#include "actors/wire/wire_client.hpp"
#include "bench.hpp"

extern char** environ;

namespace proctor::bench {

uint16_t free_port() {
  // Never a port given before in this run: a phase's nodes get their ports before any of
  // them listens, so the kernel may hand the same one out twice.
  static std::mutex m;
  static std::set<uint16_t> given;
  std::lock_guard<std::mutex> g(m);
  for (int attempt = 0;; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0
        || ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("no free port");
    ::close(fd);
    auto port = ntohs(a.sin_port);
    if (given.insert(port).second || attempt >= 100)
      return port;
  }
}

namespace {

/// Every proctord this process started and has not reaped: a phase ends with
/// reporter::finish(), which leaves by _exit, past the destructors of its node_groups.
std::vector<pid_t>& live_proctords() {
  static std::vector<pid_t> pids;
  return pids;
}

}  // namespace

void kill_proctord(pid_t pid) {
  if (pid <= 0)
    return;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  auto& pids = live_proctords();
  pids.erase(std::remove(pids.begin(), pids.end(), pid), pids.end());
}

void kill_live_proctords() {
  while (!live_proctords().empty())
    kill_proctord(live_proctords().back());
}

double process_cpu_us(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line))
    return 0;
  // Fields after the command (which may hold spaces, in parentheses): 3 is the state, 14 and
  // 15 utime and stime, in clock ticks.
  auto close = line.rfind(')');
  if (close == std::string::npos)
    return 0;
  std::istringstream in(line.substr(close + 1));
  std::string skip;
  for (int field = 3; field <= 13; ++field)
    in >> skip;
  unsigned long long utime = 0, stime = 0;
  if (!(in >> utime >> stime))
    return 0;
  return static_cast<double>(utime + stime) * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

pid_t spawn_proctord(const std::vector<std::string>& args, const std::string& log) {
  // Everything the child needs is prepared before fork: a phase's child has the threads of
  // its actor system, so between fork and exec only async-signal-safe calls are allowed.
  auto exe = fs::read_symlink("/proc/self/exe").parent_path() / "proctord";
  std::vector<std::string> all{exe.string()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0)
    throw std::runtime_error("cannot open " + log + ": " + std::strerror(errno));
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    // SIGKILL when the phase's process dies, however it dies (killed at its deadline, a
    // crash, proctor-bench itself killed): a proctord never outlives the phase. The phase
    // calls this from its main thread, whose end is the process's.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent)
      ::_exit(127);
    if (::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)
      ::_exit(127);
    ::execve(argv[0], argv.data(), environ);
    ::_exit(127);
  }
  int err = errno;
  ::close(out);
  if (pid < 0)
    throw std::runtime_error("cannot start " + exe.string() + ": " + std::strerror(err));
  live_proctords().push_back(pid);
  return pid;
}

pb::Response ask(uint16_t port, const pb::Request& req, std::chrono::milliseconds timeout) {
  wire_call_options o;
  o.reply_timeout = timeout;
  auto r = wire_call("127.0.0.1", port, req.SerializeAsString(), o);
  if (!r.ok())
    throw std::runtime_error("node at port " + std::to_string(port) + ": " + r.reason);
  pb::Response resp;
  if (!resp.ParseFromString(r.reply))
    throw std::runtime_error("unreadable answer");
  return resp;
}

void await_waiting(uint16_t port, size_t n, const std::string& what) {
  pb::Request metrics;
  metrics.mutable_metrics();
  await(
    [&] {
      auto m = ask(port, metrics, std::chrono::seconds{30});
      return metric(m.text(), "proctor_waiting_procedures") >= static_cast<double>(n);
    },
    std::chrono::seconds{300}, what);
}

uint64_t submit_one(uint16_t port, const std::string& type, const std::string& args) {
  pb::Request req;
  req.mutable_submit()->set_type(type);
  req.mutable_submit()->set_args_json(args);
  auto r = ask(port, req, std::chrono::seconds{30});
  if (r.code() != pb::Response::OK)
    throw std::runtime_error("submit " + type + ": " + r.error());
  return r.id();
}

void await_success(uint16_t port, uint64_t id, std::chrono::seconds limit) {
  auto end = clk::now() + limit;
  pb::Request req;
  req.mutable_wait()->set_id(id);
  req.mutable_wait()->set_timeout_ms(10'000);
  while (clk::now() < end) {
    auto r = ask(port, req, std::chrono::seconds{20});
    if (r.code() == pb::Response::TIMEOUT)
      continue;
    if (r.code() != pb::Response::OK)
      throw std::runtime_error("wait: " + r.error());
    if (r.status().state() == pb::SUCCESS)
      return;
    throw std::runtime_error("procedure " + std::to_string(id) + " ended "
                             + pb::ProcState_Name(r.status().state()) + ": " + r.status().error());
  }
  throw std::runtime_error("procedure " + std::to_string(id) + " did not end in time");
}

}  // namespace proctor::bench
