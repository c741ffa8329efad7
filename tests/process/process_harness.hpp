// A harness for process-level tests: real `proctord` nodes started as child processes on
// free loopback ports with temporary data directories, driven through the `proctor` CLI,
// killed with SIGKILL or stopped with SIGTERM.
//
//   proctor::test::temp_dir dir;
//   proctor::test::node n{dir.path() / "data"};
//   ASSERT_TRUE(n.start()) << n.log_tail();
//   auto r = n.ctl({"submit", "demo.ledger", "--args-json", R"({"steps":3})"});
//   ASSERT_EQ(r.exit_code, 0) << r.err;
//   n.kill();                 // SIGKILL
//   ASSERT_TRUE(n.start());   // same data dir, same port
//
// Binaries come from PROCTOR_BIN_DIR (a compile definition), or from the environment
// variable of the same name when set. Children are started with fork/exec and get SIGKILL
// when the thread that started them exits (PR_SET_PDEATHSIG), so a test that crashes or is
// killed by ctest's timeout leaves no node behind: start nodes from the test's own thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>

namespace proctor::test {

/// The path of binary `name` (e.g. "proctord") in the build's bin directory.
std::filesystem::path bin_path(const std::string& name);

/// A TCP port on 127.0.0.1 that was free a moment ago (bound, then released), picked at
/// random below the kernel's ephemeral range: a node restarted on its port must not find it
/// taken by the source port of some outgoing connection meanwhile (a peer's reconnect, a
/// CLI call of a test running beside it), which ports from bind(0) could be.
uint16_t free_port();

/// A fresh directory under the system's temp directory, removed with its contents on
/// destruction.
class temp_dir {
public:
  temp_dir();
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }

private:
  std::filesystem::path path_;
};

/// How a child process ended.
struct run_result {
  /// The exit status; 128 + signal number if a signal ended it; -1 if it could not be started
  /// (then `err` says why).
  int exit_code = -1;
  std::string out;
  std::string err;
  /// True if the harness killed it because it ran past its time limit.
  bool timed_out = false;
};

/// Runs `program` with `args` (no shell involved), stdin from `stdin_file` (/dev/null when
/// empty), and captures its stdout and stderr. A child still running after `limit` is killed
/// with SIGKILL.
run_result run_program(const std::filesystem::path& program, const std::vector<std::string>& args,
                       std::chrono::milliseconds limit = std::chrono::seconds{120},
                       const std::filesystem::path& stdin_file = {});

/// Runs the `proctor` CLI with `args` (stdin as run_program's).
run_result run_proctor(const std::vector<std::string>& args,
                       std::chrono::milliseconds limit = std::chrono::seconds{120},
                       const std::filesystem::path& stdin_file = {});

/// One `proctord` child process. Its data dir and port stay the same across restarts, so
/// `kill()` followed by `start()` is a crash and recovery. Its stdout and stderr are appended
/// to `log_file()`. The destructor kills a running node with SIGKILL.
class node {
public:
  /// `data_dir` is passed as --data-dir; `port` 0 picks a free one; `extra_args` are
  /// appended to the command line (e.g. {"--workers", "4"}). The log goes beside the data
  /// dir, as `<data_dir>.log`.
  explicit node(std::filesystem::path data_dir, uint16_t port = 0,
                std::vector<std::string> extra_args = {});
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Starts the process and waits until it answers `list --json` (at most `ready_limit`).
  /// False if it did not come up (it is killed then); see `log_tail()`.
  /// The default limit is a bound for a node that does not come up, not a pace: on a loaded
  /// machine RocksDB's open alone has taken 2 s.
  bool start(std::chrono::milliseconds ready_limit = std::chrono::seconds{60});

  /// Starts the process without waiting for it to answer (a standby answers only once it
  /// has taken over). False if it could not be started.
  bool launch();

  /// Waits until the running process answers `list --json` (at most `limit`).
  bool wait_ready(std::chrono::milliseconds limit = std::chrono::seconds{60});

  /// With `only`, the process gets `extra_args` alone, no --data-dir or --listen (a
  /// --config file then names this node's data dir and address).
  void set_extra_args_only(bool only) noexcept { extra_args_only_ = only; }

  /// SIGKILL and reap. No-op if not running.
  void kill();

  /// SIGTERM and reap, waiting at most `limit` (then SIGKILL). Returns the exit code as in
  /// run_result (128 + signal if a signal ended it), or -1 if it was not running.
  int stop(std::chrono::milliseconds limit = std::chrono::seconds{30});

  /// True while the process has not exited (reaps it if it has).
  bool running();

  /// Runs `proctor --node 127.0.0.1:<port> args...`.
  run_result ctl(const std::vector<std::string>& args,
                 std::chrono::milliseconds limit = std::chrono::seconds{120}) const;

  pid_t pid() const noexcept { return pid_; }
  uint16_t port() const noexcept { return port_; }
  /// "127.0.0.1:<port>"
  std::string address() const;
  const std::filesystem::path& data_dir() const noexcept { return data_dir_; }
  const std::filesystem::path& log_file() const noexcept { return log_; }
  /// The last `lines` lines of the log, for failure messages.
  std::string log_tail(size_t lines = 20) const;

  /// The exit code of the last run once it ended (as in run_result), -1 before.
  int last_exit_code() const noexcept { return last_exit_code_; }

private:
  /// Waits up to `limit` for the child to exit; true if it was reaped.
  bool reap(std::chrono::milliseconds limit);

  std::filesystem::path data_dir_;
  uint16_t port_;
  std::vector<std::string> extra_args_;
  bool extra_args_only_ = false;
  std::filesystem::path log_;
  pid_t pid_ = -1;
  int last_exit_code_ = -1;
};

/// Polls `cond` every `interval` until it holds or `limit` passes; returns its last value.
template <class Cond>
bool eventually(Cond cond, std::chrono::milliseconds limit = std::chrono::seconds{10},
                std::chrono::milliseconds interval = std::chrono::milliseconds{50});

// -- reading what the CLI printed ----------------------------------------------------------

/// `s` without trailing newlines and spaces.
std::string trim(std::string s);

/// The non-empty lines of `text`.
std::vector<std::string> lines(const std::string& text);

/// A procedure id printed alone (as `submit` does), or nullopt.
std::optional<uint64_t> parse_id(const std::string& text);

/// Why libraft cannot keep its files under `dir` ("" when it can): on tmpfs it has no
/// O_DIRECT. The fixtures of replicas and of the cluster group skip with it (set TMPDIR).
std::string raft_unfit_dir(const std::filesystem::path& dir);

/// Of a node's replica processes, the index of the one that serves (answers `list` by its
/// address alone), other than `skip`; -1 when none does within `limit`.
int serving_replica(const std::vector<node*>& replicas, std::chrono::milliseconds limit,
                    int skip = -1);

/// One JSON value (a `status` object, a `list` array), or nullopt if `text` is not JSON.
std::optional<google::protobuf::Value> parse_json(const std::string& text);

/// A field of a JSON object (a null value when missing).
const google::protobuf::Value& field(const google::protobuf::Value& v, const std::string& key);

/// The "state" and "id" of a status object.
std::string state_of(const google::protobuf::Value& v);
uint64_t id_of(const google::protobuf::Value& v);

/// A run_result for failure messages.
std::string describe(const run_result& r);

/// The value of metric `name` in node `n`'s `proctor metrics`, summed over its labels (one
/// sample per peer, per type); -1 if absent.
double metric(const node& n, const std::string& name);

// -- ledgers ----------------------------------------------------------------------------------

/// The names of the files in `dir` (none if it cannot be read).
std::set<std::string> file_names(const std::filesystem::path& dir);

/// How many files `dir` holds (0 if it cannot be read).
size_t count_files(const std::filesystem::path& dir);

/// The whole of file `p` ("" if it cannot be read).
std::string read_file(const std::filesystem::path& p);

// -- TLS (docs/tls.md) --------------------------------------------------------------------------

/// Runs scripts/make-certs.sh: a throw-away CA in `dir`, a certificate per name in `nodes`, a
/// client's, and another CA's (other-ca, other-client, other-node).
run_result make_certs(const std::filesystem::path& dir, const std::vector<std::string>& nodes);

/// The CLI the harness runs reads its TLS options from the environment (PROCTOR_TLS_*).
void set_cli_tls(const std::filesystem::path& cert, const std::filesystem::path& key,
                 const std::filesystem::path& ca);
void clear_cli_tls();

}  // namespace proctor::test

// -- template implementation ----------------------------------------------------------------

#include <thread>

namespace proctor::test {

template <class Cond>
bool eventually(Cond cond, std::chrono::milliseconds limit, std::chrono::milliseconds interval) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (cond())
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace proctor::test
