// The proctor CLI's round trip to a node (apps/proctor.cpp's commands): what the command line
// asked for and at which addresses, the call that tries them in turn (a standby taking over,
// the leader a replica names), `wait` as a series of bounded polls, and the printing of an
// answer with its exit code.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <proctor/wire.pb.h>

#include "actors/wire/endpoint.hpp"
#include "apps/cli_operators.hpp"
#include "tls/tls_options.hpp"

namespace proctor::cli {

constexpr int exit_usage = 64;

/// What the command line asked for.
struct command {
  std::string node;  ///< as given: HOST:PORT[,HOST:PORT...]
  tls_options tls;   ///< --tls-cert/--tls-key/--tls-ca (docs/tls.md)
  /// The node's addresses: its active process's and its standbys' (docs/standby.md), and a
  /// leader a replica named that the list did not hold (learned while the command runs).
  mutable std::vector<endpoint> addresses;
  /// The address that answered last: the next request starts there.
  mutable size_t at = 0;
  /// With more than one address: how long a request keeps trying them in turn when none
  /// answers (a takeover in progress) before it gives up.
  std::chrono::milliseconds failover{0};
  pb::Request request;
  enum class verb : uint8_t {
    submit,
    status,
    list,
    wait,
    abort,
    event,
    metrics,
    release,
    quarantine,
    nodes,
    replicas,
    forget,
    backup
  };
  verb what = verb::status;
  bool json = false;            ///< `replicas --json`
  uint64_t wait_timeout_s = 0;  ///< 0: no --timeout-s, wait as long as it takes
  /// When --timeout-s runs out (counted from the start, across reconnections).
  std::optional<std::chrono::steady_clock::time_point> wait_deadline;
};

/// "HOST:PORT,HOST:PORT" as a list, or nullopt.
std::optional<std::vector<endpoint>> parse_addresses(const std::string& text);

/// The first line of `text`: errors go to stderr as one line.
std::string first_line(const std::string& text);

/// One round trip to the node: its answer, or the exit code of a call that brought none
/// (its reason printed).
std::variant<pb::Response, int> call(const command& cmd, const pb::Request& req,
                                     std::chrono::milliseconds reply_timeout);

/// Sends the command's request (`wait`: polls until it ended or --timeout-s ran out), prints
/// the answer, returns the exit code.
int run(const command& cmd);

}  // namespace proctor::cli
