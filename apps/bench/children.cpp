// proctor-bench, the child processes: the reporter (the child's end of the pipe), run_phase
// (fork, collect the child's "key value" lines, kill it on a crash or an overrun), and the
// helpers used inside children (resident memory, request builders, call(), metric()).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "bench.hpp"

namespace proctor::bench {

// -- child processes ------------------------------------------------------------------------

void reporter::put(const std::string& key, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  put_str(key, buf);
}

void reporter::put_str(const std::string& key, std::string v) {
  for (auto& c : v)
    if (c == '\n' || c == '\r')
      c = ' ';
  write_all(key + ' ' + v + '\n');
}

/// Reports the end of the phase and leaves the process without running any destructor
/// (no actor system teardown, no clean database close). A phase that ends in a crash
/// waits here for the parent's SIGKILL.
void reporter::finish() {
  kill_live_proctords();
  write_all("end\n");
  if (wait_for_kill_)
    for (;;)
      ::pause();
  ::_exit(0);
}

void reporter::write_all(const std::string& s) {
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    auto n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      ::_exit(3);
    p += n;
    left -= static_cast<size_t>(n);
  }
}

namespace {

/// Waits up to `limit` for child `pid` to exit, without reaping it (its process group stays
/// reserved while it is a zombie). True if it exited.
bool await_exit(pid_t pid, std::chrono::milliseconds limit) {
  auto end = clk::now() + limit;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0
        && info.si_pid == pid)
      return true;
    if (clk::now() >= end)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

/// Ends phase child `pid` and every process of its group (the proctords it started): gives
/// the child a moment to exit (a finished phase exits at once), then SIGKILLs the group and
/// reaps them all. The proctords a killed child leaves become this process's children (it is
/// their subreaper: main()), so this returns once none is left. Returns the child's status.
int end_process_group(pid_t pid) {
  if (!await_exit(pid, std::chrono::seconds{5}))
    ::kill(-pid, SIGKILL);
  await_exit(pid, std::chrono::seconds{60});
  ::kill(-pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  // A SIGKILLed process ends within moments; the bound is for one stuck in the kernel.
  auto end = clk::now() + std::chrono::seconds{60};
  while (::waitpid(-pid, nullptr, WNOHANG) >= 0 && clk::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  if (::waitpid(-pid, nullptr, WNOHANG) >= 0)
    spdlog::error("a process of phase child {} outlived SIGKILL for 60 s", pid);
  return status;
}

}  // namespace

/// Runs `body` in a forked child; collects its lines until "end", EOF or the deadline.
/// `kill_after` SIGKILLs the child once it reported (phase d's crash).
phase_result run_phase(const std::string& name, double timeout_s, bool kill_after,
                       const std::function<void(reporter&)>& body) {
  phase_result res;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    res.error = std::string("pipe: ") + std::strerror(errno);
    return res;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  auto t0 = clk::now();
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid > 0)
    ::setpgid(pid, pid);  // also here: no kill of the group before the child set it
  if (pid < 0) {
    res.error = std::string("fork: ") + std::strerror(errno);
    ::close(p[0]);
    ::close(p[1]);
    return res;
  }
  if (pid == 0) {
    // Its own process group, which the proctords it starts share: the parent kills the
    // group when the phase ends, however it ends. And SIGKILL if proctor-bench dies first.
    ::setpgid(0, 0);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent)
      ::_exit(3);
    ::close(p[0]);
    reporter r(p[1], kill_after);
    try {
      body(r);
      r.put_str("error", "phase body returned without finishing");
    } catch (const std::exception& e) {
      r.put_str("error", e.what());
    } catch (...) {
      r.put_str("error", "unknown exception");
    }
    r.finish();
  }
  ::close(p[1]);
  std::string buf;
  bool ended = false;
  auto deadline =
    t0 + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clk::now());
    if (left.count() <= 0) {
      res.timed_out = true;
      break;
    }
    pollfd pfd{p[0], POLLIN, 0};
    int n = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      continue;
    char tmp[4096];
    auto got = ::read(p[0], tmp, sizeof(tmp));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;  // EOF: the child died (or exited) before "end"
    buf.append(tmp, static_cast<size_t>(got));
    size_t nl;
    while ((nl = buf.find('\n')) != std::string::npos) {
      auto line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      if (line == "end") {
        ended = true;
        break;
      }
      auto sp = line.find(' ');
      if (sp == std::string::npos)
        res.values[line] = "";
      else
        res.values[line.substr(0, sp)] = line.substr(sp + 1);
    }
    if (ended)
      break;
  }
  ::close(p[0]);
  if (kill_after || res.timed_out)
    ::kill(-pid, SIGKILL);
  int status = end_process_group(pid);
  res.wall_s = secs(clk::now() - t0);
  if (auto e = res.values.find("error"); e != res.values.end())
    res.error = e->second;
  else if (res.timed_out)
    res.error = name + " did not finish within " + std::to_string(static_cast<int>(timeout_s))
                + " s (killed)";
  else if (!ended) {
    if (WIFSIGNALED(status))
      res.error = name + ": child killed by signal " + std::to_string(WTERMSIG(status));
    else
      res.error = name + ": child exited with status " + std::to_string(WEXITSTATUS(status))
                  + " before reporting";
  }
  res.ok = ended && res.error.empty();
  return res;
}

// -- helpers used inside children ----------------------------------------------------------

size_t rss_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr)
    return 0;
  unsigned long size = 0, resident = 0;
  if (std::fscanf(f, "%lu %lu", &size, &resident) != 2)
    resident = 0;
  std::fclose(f);
  return static_cast<size_t>(resident) * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

double cpu_us() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(u.ru_utime) + us(u.ru_stime);
}

std::string submit_req(const std::string& type, const std::string& args) {
  proctor::pb::Request r;
  auto* s = r.mutable_submit();
  s->set_type(type);
  s->set_args_json(args);
  return r.SerializeAsString();
}

std::string wait_req(uint64_t id) {
  proctor::pb::Request r;
  r.mutable_wait()->set_id(id);
  return r.SerializeAsString();
}

std::string status_req(uint64_t id) {
  proctor::pb::Request r;
  r.mutable_status()->set_id(id);
  return r.SerializeAsString();
}

std::string metrics_req() {
  proctor::pb::Request r;
  r.mutable_metrics();
  return r.SerializeAsString();
}

std::string list_req(proctor::pb::ProcState state) {
  proctor::pb::Request r;
  r.mutable_list()->set_state(state);
  return r.SerializeAsString();
}

std::string event_req(const std::string& key, const std::string& payload) {
  proctor::pb::Request r;
  r.mutable_event()->set_key(key);
  r.mutable_event()->set_payload_json(payload);
  return r.SerializeAsString();
}

/// One blocking request from the child's main thread.
proctor::pb::Response call(caf::scoped_actor& self, const caf::actor& exec, const std::string& req,
                           caf::duration timeout) {
  proctor::pb::Response out;
  std::string err;
  self->request(exec, timeout, rpc_atom::value, req)
    .receive(
      [&](std::string& bytes) {
        if (!out.ParseFromString(bytes))
          err = "unparsable response";
      },
      [&](caf::error& e) { err = error_text(self->system(), e); });
  if (!err.empty())
    throw std::runtime_error("request failed: " + err);
  return out;
}

/// A gauge or counter from the node's Prometheus text (first sample of that name).
double metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0
        && (line[name.size()] == ' ' || line[name.size()] == '{')) {
      auto sp = line.rfind(' ');
      return std::strtod(line.c_str() + sp + 1, nullptr);
    }
  return -1;
}

}  // namespace proctor::bench
