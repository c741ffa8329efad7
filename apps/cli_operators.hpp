// The operator commands of the proctor CLI: tree, watch, history, locks, bypass, limits,
// retry, resubmit, schedule
// (docs/command-line.md). apps/proctor.cpp registers them and lends them its round trip to
// the node, so they share its addressing, timeouts and error reporting.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <variant>

#include <CLI/CLI.hpp>

#include <proctor/wire.pb.h>

namespace proctor::cli {

/// One round trip to the node: its answer, or the exit code of a call that brought none
/// (its reason printed on stderr).
using caller =
  std::function<std::variant<pb::Response, int>(const pb::Request&, std::chrono::milliseconds)>;

/// What the chosen operator command does once the command line is parsed; returns the
/// exit code (apps/proctor.cpp's: 0 ok, 1 error, 2 timed out, 3 unreachable).
using runner = std::function<int(const caller&)>;

/// Registers the operator commands on `app`; the one chosen sets `*run`.
void add_operator_commands(CLI::App& app, runner* run);

// -- shared by the commands' files ------------------------------------------------------------
constexpr int exit_ok = 0;
constexpr int exit_error = 1;
constexpr int exit_timeout = 2;
constexpr int exit_unreachable = 3;

/// Prints a non-OK answer's error (one line) and returns its exit code; exit_ok for OK.
int check(const pb::Response& r);

/// Sends `req` (30 s bound): its OK answer, or the exit code of a call that brought none or
/// of a non-OK answer (its error printed).
std::variant<pb::Response, int> ask(const caller& call, const pb::Request& req);

/// Colours for a terminal (none in a pipe, or with NO_COLOR set).
struct palette {
  bool on = false;
  const char* state(int s) const;
  const char* dim() const { return on ? "\033[2m" : ""; }
  const char* bold() const { return on ? "\033[1m" : ""; }
  const char* reset() const { return on ? "\033[0m" : ""; }
  /// On when stdout is a terminal and NO_COLOR is not set.
  static palette for_stdout();
};

/// "1s", "250ms", "5m", "2h" as milliseconds; nullopt if it is none of those (cli_limits.cpp).
std::optional<uint64_t> parse_period(const std::string& text);
/// Milliseconds as the shortest of those: "2h", "90s", "250ms".
std::string period_ms_text(uint64_t ms);

/// A duration for people: "850ms", "12.3s", "4m05s", "2h03m".
std::string human_ms(int64_t ms);

/// Options of the tree's text form.
struct tree_options {
  palette colours;
  /// Show at most this many children of one procedure (those that have not ended first),
  /// under a progress bar; 0 = all (a bar still heads a procedure with many children).
  size_t max_children = 0;
  int64_t now_ms = 0;
};

/// The tree of a `tree` answer (root first, depth first) as indented text.
std::string render_tree(const google::protobuf::RepeatedPtrField<pb::ProcStatus>& xs,
                        const tree_options& o);

/// The `tree` answer for procedure `id` (its tree, root first, depth first), or the exit code
/// of a call that brought none or of a non-OK answer (its error printed): `tree` and `watch`.
std::variant<pb::Response, int> fetch_tree(const caller& call, uint64_t id);

/// "[#######.............] 35/100".
std::string progress_bar(size_t done, size_t total, size_t width = 20);

// -- the commands (cli_tree.cpp, cli_watch.cpp, cli_history.cpp) ------------------------------
void add_tree_command(CLI::App& app, runner* run);
void add_watch_command(CLI::App& app, runner* run);
void add_history_commands(CLI::App& app, runner* run);   ///< history, locks, bypass
void add_security_commands(CLI::App& app, runner* run);  ///< audit, tls reload (cli_security.cpp)
void add_limits_command(CLI::App& app, runner* run);     ///< limits [set|clear] (cli_limits.cpp)
void add_retry_commands(CLI::App& app, runner* run);     ///< retry, resubmit (cli_retry.cpp)
void add_queues_command(CLI::App& app, runner* run);     ///< queues (cli_queues.cpp)
/// schedule add|list|show|pause|resume|delete|trigger (cli_schedule.cpp)
void add_schedule_command(CLI::App& app, runner* run);

/// cluster nodes|init, node drain|remove (cli_cluster.cpp; after `node` is registered)
void add_cluster_command(CLI::App& app, runner* run);

/// `replicas`: the group as a table, or JSON (cli_replicas.cpp).
void print_replicas(const pb::ReplicasInfo& info, bool json);

}  // namespace proctor::cli
