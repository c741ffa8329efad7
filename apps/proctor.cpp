// proctor: the operator CLI. Each command sends one pb::Request to a node over the client
// protocol (proto/WIRE.md; actors/wire/wire_client.hpp) and prints the answer. No actor system:
// the CLI is a plain TCP client (TLS with --tls-*), so it leaves nothing behind in the node.
//
// Exit codes: 0 ok; 1 the node answered with an error, or `wait` saw ROLLEDBACK / FAILED;
// 2 `wait` timed out; 3 the node cannot be reached (or the connection dropped); 64 usage.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include <proctor/journal.pb.h>
#include <proctor/wire.pb.h>

#include "actors/wire/endpoint.hpp"
#include "actors/wire/json/status_json.hpp"
#include "actors/wire/wire_client.hpp"
#include "apps/cli_operators.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_error = 1;
constexpr int exit_timeout = 2;
constexpr int exit_unreachable = 3;
constexpr int exit_usage = 64;

constexpr auto connect_timeout = std::chrono::milliseconds{5'000};
constexpr auto default_request_timeout = std::chrono::milliseconds{30'000};
/// `wait` polls: each wait request asks the node to answer within this (or what is left of
/// --timeout-s), and the CLI gives the node `wait_grace` more before it gives up.
constexpr auto wait_poll = std::chrono::milliseconds{10'000};
constexpr auto wait_grace = std::chrono::milliseconds{5'000};

/// The first line of `text`: errors go to stderr as one line (protobuf's JSON parse errors,
/// for one, append the offending input and a caret on lines of their own).
std::string first_line(const std::string& text) {
  auto line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line;
}

/// Prints `text` followed by a newline unless it already ends with one.
void print_text(const std::string& text) {
  std::cout << text;
  if (!text.empty() && text.back() != '\n')
    std::cout << '\n';
}

/// A nonce for a submit that has none, so that sending it again cannot create a second
/// procedure.
std::string random_nonce() {
  std::random_device rd;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "cli-%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

/// What the command line asked for.
struct command {
  std::string node;          ///< as given: HOST:PORT[,HOST:PORT...]
  proctor::tls_options tls;  ///< --tls-cert/--tls-key/--tls-ca (docs/tls.md)
  /// The node's addresses: its active process's and its standbys' (docs/standby.md), and a
  /// leader a replica named that the list did not hold (learned while the command runs).
  mutable std::vector<proctor::endpoint> addresses;
  /// The address that answered last: the next request starts there.
  mutable size_t at = 0;
  /// With more than one address: how long a request keeps trying them in turn when none
  /// answers (a takeover in progress) before it gives up.
  std::chrono::milliseconds failover{0};
  proctor::pb::Request request;
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
std::optional<std::vector<proctor::endpoint>> parse_addresses(const std::string& text) {
  std::vector<proctor::endpoint> out;
  size_t from = 0;
  for (;;) {
    auto comma = text.find(',', from);
    auto one = proctor::parse_endpoint(text.substr(from, comma - from));
    if (!one)
      return std::nullopt;
    out.push_back(*one);
    if (comma == std::string::npos)
      return out;
    from = comma + 1;
  }
}

/// The index in --node's addresses of `text` ("HOST:PORT"), if it is one of them.
std::optional<size_t> address_index(const command& cmd, const std::string& text) {
  for (size_t i = 0; i < cmd.addresses.size(); ++i)
    if (text == cmd.addresses[i].host + ":" + std::to_string(cmd.addresses[i].port))
      return i;
  return std::nullopt;
}

/// Prints the answer to `cmd` and returns the exit code.
int report(const command& cmd, const proctor::pb::Response& resp) {
  using proctor::pb::Response;
  if (cmd.what == command::verb::wait && resp.code() == Response::TIMEOUT) {
    if (resp.has_status())
      std::cout << proctor::status_to_json(resp.status()) << '\n';
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
      std::cout << proctor::status_to_json(resp.status()) << '\n';
      return exit_ok;
    case command::verb::list:
      std::cout << proctor::list_to_json(resp.list()) << '\n';
      // A cluster-wide list that lacks some node's procedures is not a complete answer.
      for (const auto& u : resp.unreachable())
        std::cerr << "error: not listed: " << first_line(u) << '\n';
      return resp.unreachable().empty() ? exit_ok : exit_unreachable;
    case command::verb::nodes:
      std::cout << proctor::nodes_to_json(resp.nodes()) << '\n';
      return exit_ok;
    case command::verb::forget:
    case command::verb::backup:
      print_text(resp.text());
      return exit_ok;
    case command::verb::wait: {
      std::cout << proctor::status_to_json(resp.status()) << '\n';
      switch (resp.status().state()) {
        case proctor::pb::SUCCESS:
          return exit_ok;
        case proctor::pb::ROLLEDBACK:
        case proctor::pb::FAILED:
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
        std::cout << proctor::status_to_json(resp.status()) << '\n';
      else if (!resp.text().empty())
        print_text(resp.text());
      return exit_ok;
    case command::verb::event:
    case command::verb::metrics:
      print_text(resp.text());
      return exit_ok;
    case command::verb::quarantine:
      std::cout << proctor::quarantine_to_json(resp.quarantined()) << '\n';
      return exit_ok;
    case command::verb::replicas:
      if (!resp.text().empty() && !cmd.json)
        print_text(resp.text());
      proctor::cli::print_replicas(resp.replicas(), cmd.json);
      return exit_ok;
  }
  return exit_ok;
}

/// One round trip to the node: its answer, or the exit code of a call that brought none
/// (its reason printed).
std::variant<proctor::pb::Response, int> call(const command& cmd, const proctor::pb::Request& req,
                                              std::chrono::milliseconds reply_timeout) {
  using clock = std::chrono::steady_clock;
  proctor::wire_call_options opts;
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
    auto r = proctor::wire_call(ep.host, ep.port, bytes, opts);
    auto where = ep.host + ":" + std::to_string(ep.port);
    bool last_of_round = (tried + 1) % n == 0;
    if (r.ok()) {
      proctor::pb::Response resp;
      if (!resp.ParseFromString(r.reply)) {
        std::cerr << "error: node " << ep.host << ':' << ep.port << " sent a malformed reply\n";
        return exit_error;
      }
      if (resp.code() != proctor::pb::Response::NOT_LEADER)
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
        if (auto ep = proctor::parse_endpoint(resp.leader())) {
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
    bool maybe_arrived = r.what != proctor::wire_result::kind::unreachable;
    if ((last_of_round && clock::now() >= give_up) || (maybe_arrived && req.has_event())) {
      if (r.what == proctor::wire_result::kind::unreachable)
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
    auto& resp = std::get<proctor::pb::Response>(got);
    if (resp.code() == proctor::pb::Response::TIMEOUT && running())
      continue;  // not ended yet
    return report(cmd, resp);
  }
}

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
    const auto& info = std::get<proctor::pb::Response>(got).replicas();
    for (const auto& r : info.replicas())
      if (auto i = address_index(cmd, r.address()); i && !r.self() && r.role() == "leader") {
        cmd.at = *i;
        auto again = call(cmd, cmd.request, default_request_timeout);
        if (std::holds_alternative<proctor::pb::Response>(again))
          return report(cmd, std::get<proctor::pb::Response>(again));
      }
  }
  return report(cmd, std::get<proctor::pb::Response>(got));
}

/// Reads `path` (standard input for "-") whole into `*out`: "" or why it could not.
std::string read_args_file(const std::string& path, std::string* out) {
  std::FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return std::strerror(errno);
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    out->append(buf, n);
  std::string why = std::ferror(f) != 0 ? std::strerror(errno) : "";
  if (f != stdin)
    std::fclose(f);
  return why;
}

/// The seven state names, as --state accepts them.
std::vector<std::string> state_names() {
  std::vector<std::string> names;
  for (int s = proctor::pb::ProcState_MIN + 1; s <= proctor::pb::ProcState_MAX; ++s)
    names.push_back(proctor::pb::ProcState_Name(static_cast<proctor::pb::ProcState>(s)));
  return names;
}

}  // namespace

static int run_main(int argc, char** argv) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  command cmd;
  using verb = command::verb;
  namespace pb = proctor::pb;

  CLI::App app{"Operator CLI of a Proctor node.", "proctor"};
  app.require_subcommand(1);
  app.fallthrough();
  app
    .add_option("--node", cmd.node,
                "The node's address, HOST:PORT; a node with standbys or replicas: "
                "HOST:PORT,HOST:PORT,... (default: $PROCTOR_NODE)")
    ->envname("PROCTOR_NODE")
    ->required()
    ->check([](const std::string& s) {
      return parse_addresses(s) ? std::string{}
                                : std::string{"expected HOST:PORT[,HOST:PORT...], got " + s};
    });
  int64_t failover_s = 30;
  app
    .add_option("--failover-s", failover_s,
                "With several --node addresses: how long a request tries them in turn while "
                "none answers (a standby taking over)")
    ->check(CLI::Range(int64_t{0}, int64_t{24} * 3600));

  app
    .add_option("--tls-cert", cmd.tls.cert, "PEM certificate to present (with --tls-key, --tls-ca)")
    ->envname("PROCTOR_TLS_CERT");
  app.add_option("--tls-key", cmd.tls.key, "PEM private key of --tls-cert")
    ->envname("PROCTOR_TLS_KEY");
  app.add_option("--tls-ca", cmd.tls.ca, "PEM CA the node's certificate must chain to")
    ->envname("PROCTOR_TLS_CA");

  // Each subcommand's callback runs after a successful parse and fills in the request.
  bool json = false;  // accepted for the contract; JSON is the only format
  uint64_t id = 0;

  std::string type;
  std::string args_json;
  std::string args_file;
  std::string nonce;
  std::string placement_key;
  int32_t priority = 0;
  auto* submit = app.add_subcommand("submit", "Submit a procedure; prints its id");
  submit->add_option("type", type, "Registered procedure type, e.g. demo.ledger")->required();
  auto* args_json_opt =
    submit->add_option("--args-json", args_json, "The procedure's arguments as a JSON object");
  submit
    ->add_option("--args-file", args_file,
                 "Read the arguments (a JSON object) from file PATH, or from standard input with "
                 "-: for args too large for a command line")
    ->type_name("PATH")
    ->excludes(args_json_opt);
  submit->add_option("--nonce", nonce,
                     "Deduplication key: a repeated nonce returns the same id, from any node of "
                     "the cluster (without --key it also places the procedure)");
  submit->add_option("--key", placement_key,
                     "Placement key: the procedure runs on the node of the cluster that owns the "
                     "key's slot, whichever node is asked (docs/cluster.md)");
  submit->add_option("--priority", priority, "Higher runs first (default 0)");
  submit->callback([&] {
    cmd.what = verb::submit;
    auto* r = cmd.request.mutable_submit();
    r->set_type(type);
    r->set_args_json(args_json);
    r->set_nonce(nonce);
    r->set_key(placement_key);
    r->set_priority(priority);
  });

  auto* status = app.add_subcommand("status", "Print a procedure's status as JSON");
  status->add_option("id", id, "Procedure id")->required();
  status->add_flag("--json", json, "JSON output (the only format)");
  status->callback([&] {
    cmd.what = verb::status;
    cmd.request.mutable_status()->set_id(id);
  });

  std::string state_filter;
  bool all = false;
  auto* list = app.add_subcommand("list", "Print procedures' statuses as a JSON array");
  list->add_option("--state", state_filter, "Only procedures in this state")
    ->transform(CLI::IsMember(state_names(), CLI::ignore_case));
  bool local = false;
  list->add_flag("--all", all, "Children too, not only roots");
  list->add_flag("--local", local,
                 "Only what this node holds (a node of a cluster lists every node's)");
  list->add_flag("--json", json, "JSON output (the only format)");
  list->callback([&] {
    cmd.what = verb::list;
    auto* r = cmd.request.mutable_list();
    r->set_all(all);
    r->set_local(local);
    auto s = pb::STATE_UNSPECIFIED;
    if (!state_filter.empty())
      pb::ProcState_Parse(state_filter, &s);
    r->set_state(s);
  });

  uint64_t timeout_s = 0;
  auto* wait = app.add_subcommand("wait", "Wait for a procedure to end; prints its status");
  wait->add_option("id", id, "Procedure id")->required();
  wait->add_option("--timeout-s", timeout_s, "Give up after N seconds (exit 2)")
    ->check(CLI::Range(uint64_t{1}, uint64_t{10'000'000}));
  wait->add_flag("--json", json, "JSON output (the only format)");
  wait->callback([&] {
    cmd.what = verb::wait;
    cmd.wait_timeout_s = timeout_s;
    auto* r = cmd.request.mutable_wait();
    r->set_id(id);
    r->set_timeout_ms(timeout_s * 1000);
  });

  auto* abort = app.add_subcommand("abort", "Abort a procedure: its tree rolls back");
  abort->add_option("id", id, "Procedure id")->required();
  abort->callback([&] {
    cmd.what = verb::abort;
    cmd.request.mutable_abort()->set_id(id);
  });

  std::string key;
  std::string payload_json;
  std::string event_id;
  auto* event =
    app.add_subcommand("event", "Deliver an external event to the procedures waiting for KEY");
  event->add_option("key", key, "Event key")->required();
  event->add_option("--payload-json", payload_json, "The event's payload as JSON");
  event->add_option("--event-id", event_id,
                    "This event's id: sent again with the same key and id (while events are "
                    "kept), it is accepted once and delivers nothing more");
  event->callback([&] {
    cmd.what = verb::event;
    auto* r = cmd.request.mutable_event();
    r->set_key(key);
    r->set_payload_json(payload_json);
    r->set_event_id(event_id);
  });

  app.add_subcommand("metrics", "Print the node's metrics (Prometheus text)")->callback([&] {
    cmd.what = verb::metrics;
    cmd.request.mutable_metrics();
  });

  std::string forget_name;
  bool confirm_lost = false;
  auto* node_cmd = app.add_subcommand("node", "Operator actions on a peer node");
  node_cmd->require_subcommand(1);
  auto* forget = node_cmd->add_subcommand(
    "forget", "Declare a peer that is down lost for good: the trees with parts there fail and "
              "undo what is elsewhere; its journal is refused from then on (docs/cluster.md)");
  forget->add_option("name", forget_name, "The peer's name (--peers)")->required();
  forget->add_flag("--confirm-lost", confirm_lost,
                   "Say that what the node did is lost and will not be undone");
  forget->callback([&] {
    cmd.what = verb::forget;
    auto* r = cmd.request.mutable_forget();
    r->set_name(forget_name);
    r->set_confirm(confirm_lost);
  });

  std::string backup_dir;
  auto* backup = app.add_subcommand(
    "backup", "Write an online backup of the node's journal (a RocksDB checkpoint) to DIR on "
              "the node's machine; restore it with proctord --restore-from DIR "
              "(docs/operations.md)");
  backup->add_option("dir", backup_dir, "An absolute path that does not exist yet")->required();
  backup->callback([&] {
    cmd.what = verb::backup;
    cmd.request.mutable_backup()->set_dir(backup_dir);
  });

  auto* quarantine = app.add_subcommand(
    "quarantine", "List the trees whose journal records could not be read (JSON array)");
  quarantine->add_flag("--json", json, "JSON output (the only format)");
  quarantine->callback([&] {
    cmd.what = verb::quarantine;
    cmd.request.mutable_quarantine();
  });

  auto* nodes = app.add_subcommand(
    "nodes", "List this node and the peers it sees: up or down, since when (JSON array)");
  nodes->add_flag("--json", json, "JSON output (the only format)");
  nodes->callback([&] {
    cmd.what = verb::nodes;
    cmd.request.mutable_nodes();
  });

  auto* replicas = app.add_subcommand(
    "replicas", "The replicas of a node run as a replica group: role, progress, lag");
  replicas->add_flag("--json", cmd.json, "JSON output");
  std::string new_replica, old_replica;
  unsigned catch_up_s = 120;
  auto* replicas_add = replicas->add_subcommand(
    "add", "Add a replica to the group (start it first: proctord --replica NAME --join ...); it "
           "catches up as a standby, then votes");
  replicas_add->add_option("replica", new_replica, "NAME=HOST:PORT/RAFT_PORT")->required();
  replicas_add
    ->add_option("--timeout-s", catch_up_s,
                 "How long it may take to catch up before the add gives up (it stays a "
                 "standby); default 120")
    ->check(CLI::Range(1u, 86'400u));
  auto* replicas_remove = replicas->add_subcommand(
    "remove", "Take a replica out of the group (a lost machine's; the leader's: stop it first)");
  replicas_remove->add_option("name", old_replica, "The replica's name")->required();
  replicas->callback([&] {
    cmd.what = verb::replicas;
    auto* r = cmd.request.mutable_replicas();
    if (replicas_add->parsed()) {
      r->set_add(new_replica);
      r->set_timeout_ms(catch_up_s * 1000);
    }
    if (replicas_remove->parsed())
      r->set_remove(old_replica);
  });

  auto* release = app.add_subcommand("release", "Drop a finished procedure's retained result now");
  release->add_option("id", id, "Procedure id")->required();
  release->callback([&] {
    cmd.what = verb::release;
    cmd.request.mutable_release()->set_id(id);
  });

  proctor::cli::runner operator_command;  // tree, watch, history, locks, bypass, retry, ...
  proctor::cli::add_operator_commands(app, &operator_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }
  if (auto why = proctor::check_tls_options(cmd.tls); !why.empty()) {
    std::cerr << "error: " << why << '\n';
    return exit_usage;
  }

  if (cmd.what == verb::submit && !args_file.empty()) {
    std::string text;
    if (auto why = read_args_file(args_file, &text); !why.empty()) {
      std::cerr << "error: --args-file " << args_file << ": " << why << '\n';
      return exit_usage;
    }
    cmd.request.mutable_submit()->set_args_json(std::move(text));
  }

  cmd.addresses = *parse_addresses(cmd.node);
  if (cmd.addresses.size() > 1)
    cmd.failover = std::chrono::seconds{failover_s};
  // A submit always carries a nonce: an operator who runs it again after an unclear end
  // (exit 3) gets the same procedure, not a second one.
  // That nonce is the CLI's own: it does not place the procedure (docs/cluster.md).
  if (cmd.what == verb::submit && cmd.request.submit().nonce().empty()) {
    cmd.request.mutable_submit()->set_nonce(random_nonce());
    cmd.request.mutable_submit()->set_nonce_local(true);
  }
  if (cmd.what == verb::wait && cmd.wait_timeout_s > 0)
    cmd.wait_deadline = std::chrono::steady_clock::now() + std::chrono::seconds{cmd.wait_timeout_s};
  auto via_node = [&cmd](const pb::Request& req, std::chrono::milliseconds timeout) {
    return call(cmd, req, timeout);
  };
  int rc = operator_command ? operator_command(via_node) : run(cmd);
  std::cout.flush();
  return rc;
}

int main(int argc, char** argv) {
  // What escapes is a bug of ours: one line rather than an abort's core dump.
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "proctor: internal error: " << e.what() << "\n";
    return 70;
  }
}
