// The proctor CLI's round trip to a node (cli_call.hpp).
#include "apps/cli_call.hpp"

#include <algorithm>
#include <iostream>
#include <thread>

#include "actors/wire/json/status_json.hpp"
#include "actors/wire/wire_client.hpp"

namespace proctor::cli {

namespace {

constexpr auto connect_timeout = std::chrono::milliseconds{5'000};
constexpr auto default_request_timeout = std::chrono::milliseconds{30'000};
/// `wait` polls: each wait request asks the node to answer within this (or what is left of
/// --timeout-s), and the CLI gives the node `wait_grace` more before it gives up.
constexpr auto wait_poll = std::chrono::milliseconds{10'000};
constexpr auto wait_grace = std::chrono::milliseconds{5'000};

/// Prints `text` followed by a newline unless it already ends with one.
void print_text(const std::string& text) {
  std::cout << text;
  if (!text.empty() && text.back() != '\n')
    std::cout << '\n';
}

}  // namespace

/// "HOST:PORT,HOST:PORT" as a list, or nullopt.
std::optional<std::vector<endpoint>> parse_addresses(const std::string& text) {
  std::vector<endpoint> out;
  size_t from = 0;
  for (;;) {
    auto comma = text.find(',', from);
    auto one = parse_endpoint(text.substr(from, comma - from));
    if (!one)
      return std::nullopt;
    out.push_back(*one);
    if (comma == std::string::npos)
      return out;
    from = comma + 1;
  }
}

namespace {

/// The index in --node's addresses of `text` ("HOST:PORT"), if it is one of them.
std::optional<size_t> address_index(const command& cmd, const std::string& text) {
  for (size_t i = 0; i < cmd.addresses.size(); ++i)
    if (text == cmd.addresses[i].host + ":" + std::to_string(cmd.addresses[i].port))
      return i;
  return std::nullopt;
}

}  // namespace

/// The first line of `text`: errors go to stderr as one line (protobuf's JSON parse errors,
/// for one, append the offending input and a caret on lines of their own).
std::string first_line(const std::string& text) {
  auto line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line;
}

namespace {

/// Prints the answer to `cmd` and returns the exit code.
int report(const command& cmd, const pb::Response& resp) {
  using pb::Response;
  if (cmd.what == command::verb::wait && resp.code() == Response::TIMEOUT) {
    if (resp.has_status())
      std::cout << status_to_json(resp.status()) << '\n';
    std::cerr << "error: "
              << (resp.error().empty() ? "timed out waiting for the procedure"
                                       : first_line(resp.error()))
              << '\n';
    return exit_timeout;
  }
  if (resp.code() != Response::OK) {
    std::cerr << "error: "
              << (resp.error().empty() ? Response::Code_Name(resp.code())
                                       : first_line(resp.error()))
              << '\n';
    // The node answered, but the node that holds the procedure did not.
    return resp.code() == Response::UNREACHABLE ? exit_unreachable : exit_error;
  }
  switch (cmd.what) {
    case command::verb::submit:
      std::cout << resp.id() << '\n';
      return exit_ok;
    case command::verb::status:
      std::cout << status_to_json(resp.status()) << '\n';
      return exit_ok;
    case command::verb::list:
      std::cout << list_to_json(resp.list()) << '\n';
      // A cluster-wide list that lacks some node's procedures is not a complete answer.
      for (const auto& u : resp.unreachable())
        std::cerr << "error: not listed: " << first_line(u) << '\n';
      return resp.unreachable().empty() ? exit_ok : exit_unreachable;
    case command::verb::nodes:
      std::cout << nodes_to_json(resp.nodes()) << '\n';
      return exit_ok;
    case command::verb::forget:
    case command::verb::backup:
      print_text(resp.text());
      return exit_ok;
    case command::verb::wait: {
      std::cout << status_to_json(resp.status()) << '\n';
      switch (resp.status().state()) {
        case pb::SUCCESS:
          return exit_ok;
        case pb::ROLLEDBACK:
        case pb::FAILED:
          return exit_error;
        default:
          std::cerr << "error: the procedure has not ended\n";
          return exit_timeout;
      }
    }
    case command::verb::abort:
      // What the node did ("abort of procedure 12 accepted: its tree rolls back"); a node
      // of an older version answers nothing.
      print_text(resp.text().empty()
                   ? "abort of procedure " + std::to_string(cmd.request.abort().id()) + " accepted"
                   : resp.text());
      return exit_ok;
    case command::verb::release:
      if (resp.has_status())
        std::cout << status_to_json(resp.status()) << '\n';
      else if (!resp.text().empty())
        print_text(resp.text());
      return exit_ok;
    case command::verb::event:
    case command::verb::metrics:
      print_text(resp.text());
      return exit_ok;
    case command::verb::quarantine:
      std::cout << quarantine_to_json(resp.quarantined()) << '\n';
      return exit_ok;
    case command::verb::replicas:
      if (!resp.text().empty() && !cmd.json)
        print_text(resp.text());
      print_replicas(resp.replicas(), cmd.json);
      return exit_ok;
  }
  return exit_ok;
}

}  // namespace

/// One round trip to the node: its answer, or the exit code of a call that brought none
/// (its reason printed).
std::variant<pb::Response, int> call(const command& cmd, const pb::Request& req,
                                     std::chrono::milliseconds reply_timeout) {
  using clock = std::chrono::steady_clock;
  wire_call_options opts;
  opts.connect_timeout = connect_timeout;
  opts.reply_timeout = reply_timeout;
  opts.tls = cmd.tls;
  auto bytes = req.SerializeAsString();
  auto give_up = clock::now() + cmd.failover;
  auto n = cmd.addresses.size();
  // Each address in turn, from the one that answered last; with standbys, rounds until one
  // answers or the fail-over time is up. Sending a request again is safe: a submit carries
  // a nonce, and the other requests but events change nothing twice.
  for (size_t tried = 0;; ++tried) {
    const auto& ep = cmd.addresses[cmd.at];
    auto r = wire_call(ep.host, ep.port, bytes, opts);
    auto where = ep.host + ":" + std::to_string(ep.port);
    bool last_of_round = (tried + 1) % n == 0;
    if (r.ok()) {
      pb::Response resp;
      if (!resp.ParseFromString(r.reply)) {
        std::cerr << "error: node " << ep.host << ':' << ep.port << " sent a malformed reply\n";
        return exit_error;
      }
      if (resp.code() != pb::Response::NOT_LEADER)
        return resp;
      // A replica that does not lead did nothing (docs/replication.md): the leader it names,
      // when it is one of the addresses, is asked next; otherwise the next address, in the
      // same rounds as for a standby, within --failover-s.
      if ((n == 1 || last_of_round) && clock::now() >= give_up)
        return resp;
      auto known = address_index(cmd, resp.leader());
      if (!known && !resp.leader().empty() && cmd.addresses.size() < 32) {
        // A leader at an address the command line did not give (a replica replaced at a new
        // address): asked next, as any other (its answer is as trusted as any address's).
        if (auto ep = parse_endpoint(resp.leader())) {
          cmd.addresses.push_back(*ep);
          n = cmd.addresses.size();
          known = n - 1;
        }
      }
      auto next = known.value_or((cmd.at + 1) % n);
      // The same one again (elected, still taking over), or a round without a leader.
      if (next == cmd.at || (resp.leader().empty() && last_of_round))
        std::this_thread::sleep_for(std::chrono::milliseconds{100});
      cmd.at = next;
      continue;
    }
    // An event has no nonce: one that may have arrived is not sent again.
    bool maybe_arrived = r.what != wire_result::kind::unreachable;
    if ((last_of_round && clock::now() >= give_up) || (maybe_arrived && req.has_event())) {
      if (r.what == wire_result::kind::unreachable)
        std::cerr << "error: cannot reach node "
                  << (n > 1 ? cmd.node + " (last " + where + ")" : where) << ": " << r.reason
                  << '\n';
      else
        std::cerr << "error: node " << where << ": " << r.reason << '\n';
      return exit_unreachable;
    }
    cmd.at = (cmd.at + 1) % n;
    if (last_of_round)
      std::this_thread::sleep_for(std::chrono::milliseconds{200});  // a takeover takes time
  }
}

namespace {

/// `wait` as a series of polls, each on a new connection: a poll the node answers with
/// TIMEOUT while --timeout-s has not run out is sent again, so --timeout-s counts from the
/// start and no single request waits without bound.
int run_wait(const command& cmd) {
  using clock = std::chrono::steady_clock;
  auto running = [&] { return !cmd.wait_deadline || clock::now() < *cmd.wait_deadline; };
  for (;;) {
    auto req = cmd.request;
    auto poll = wait_poll;
    if (cmd.wait_deadline) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(*cmd.wait_deadline - clock::now());
      poll = std::clamp(left, std::chrono::milliseconds{1}, wait_poll);
    }
    req.mutable_wait()->set_timeout_ms(static_cast<uint64_t>(poll.count()));
    auto got = call(cmd, req, poll + wait_grace);
    if (auto* rc = std::get_if<int>(&got))
      return *rc;
    auto& resp = std::get<pb::Response>(got);
    if (resp.code() == pb::Response::TIMEOUT && running())
      continue;  // not ended yet
    return report(cmd, resp);
  }
}

}  // namespace

/// Sends the request, prints the answer, returns the exit code.
int run(const command& cmd) {
  if (cmd.what == command::verb::wait)
    return run_wait(cmd);
  auto limit = default_request_timeout;
  const bool changes_group =
    cmd.request.has_replicas()
    && (!cmd.request.replicas().add().empty() || !cmd.request.replicas().remove().empty());
  if (changes_group)  // the leader answers once the new replica caught up, or its time ran out
    limit += std::chrono::milliseconds{cmd.request.replicas().timeout_ms()};
  auto got = call(cmd, cmd.request, limit);
  if (auto* rc = std::get_if<int>(&got))
    return *rc;
  if (cmd.what == command::verb::replicas && !changes_group) {
    // Any replica answers; only the leader knows everyone's progress: ask it if listed.
    const auto& info = std::get<pb::Response>(got).replicas();
    for (const auto& r : info.replicas())
      if (auto i = address_index(cmd, r.address()); i && !r.self() && r.role() == "leader") {
        cmd.at = *i;
        auto again = call(cmd, cmd.request, default_request_timeout);
        if (std::holds_alternative<pb::Response>(again))
          return report(cmd, std::get<pb::Response>(again));
      }
  }
  return report(cmd, std::get<pb::Response>(got));
}

}  // namespace proctor::cli
