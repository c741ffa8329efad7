// proctor-bench leaves nothing running (issue 34, item 9): every proctord its phases start is
// gone when it exits, whether the phases finished or proctor-bench itself was killed.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/process_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using proctor::test::bin_path;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::run_program;
using proctor::test::temp_dir;

/// The pids of the live proctord processes whose command line mentions `dir` (a zombie's
/// command line is empty: it does not count).
std::vector<int> proctords_under(const fs::path& dir) {
  std::vector<int> pids;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    auto name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream in{e.path() / "cmdline", std::ios::binary};
    std::string cmd{std::istreambuf_iterator<char>(in), {}};
    auto argv0 = cmd.substr(0, cmd.find('\0'));
    if (fs::path(argv0).filename() == "proctord" && cmd.find(dir.string()) != std::string::npos)
      pids.push_back(std::stoi(name));
  }
  return pids;
}

std::string describe_pids(const std::vector<int>& pids) {
  std::string s;
  for (int p : pids)
    s += " " + std::to_string(p);
  return s.empty() ? " none" : s;
}

TEST(bench_cleanup, no_proctord_outlives_the_phases_that_started_them) {
  temp_dir dir;
  auto data = dir.path() / "bench";
  // (g): three proctords; (i): an active and a standby, the active SIGKILLed by the phase.
  auto r = run_program(bin_path("proctor-bench"),
                       {"--data-dir", data.string(), "--quick", "--phases", "gi",
                        "--remote-children", "50", "--waiting", "200"},
                       120s);
  ASSERT_FALSE(r.timed_out) << describe(r);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.err.find("FAILED"), std::string::npos) << describe(r);
  // Not eventually: gone when it exits.
  auto left = proctords_under(data);
  EXPECT_TRUE(left.empty()) << "still running:" << describe_pids(left);
  for (int p : left)
    ::kill(p, SIGKILL);
}

TEST(bench_cleanup, no_proctord_outlives_a_killed_benchmark) {
  temp_dir dir;
  auto data = dir.path() / "bench";
  auto log = dir.path() / "bench.log";
  std::string exe = bin_path("proctor-bench").string();
  std::vector<std::string> args{exe, "--data-dir", data.string(),       "--phases",
                                "g", "--quick",    "--remote-children", "1000000"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(out, 0);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent)
      ::_exit(127);
    if (::dup2(out, 1) < 0 || ::dup2(out, 2) < 0)
      ::_exit(127);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out);
  auto bench_log = [&] {
    std::ifstream in{log};
    return std::string{std::istreambuf_iterator<char>(in), {}};
  };
  // Its phase (g) runs three proctords: kill proctor-bench (SIGKILL: nothing of it runs
  // after) while they serve, in the middle of the phase.
  bool started = eventually([&] { return proctords_under(data).size() == 3; }, 60s);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(started) << "proctor-bench did not start (g)'s three proctords: " << bench_log();
  bool gone = eventually([&] { return proctords_under(data).empty(); }, 10s);
  auto left = proctords_under(data);
  EXPECT_TRUE(gone) << "still running 10 s after proctor-bench was killed:" << describe_pids(left);
  for (int p : left)
    ::kill(p, SIGKILL);
}

}  // namespace
