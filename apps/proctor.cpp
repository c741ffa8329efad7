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

#include "apps/cli_call.hpp"
#include "apps/cli_operators.hpp"

namespace {

using proctor::cli::command;
using proctor::cli::exit_ok;
using proctor::cli::exit_usage;

/// A nonce for a submit that has none, so that sending it again cannot create a second
/// procedure.
std::string random_nonce() {
  std::random_device rd;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "cli-%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
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
      return proctor::cli::parse_addresses(s)
               ? std::string{}
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
  app
    .add_flag("--tls-check-host", cmd.tls.check_host,
              "Require the node's certificate to carry the host of --node (IP or DNS "
              "subjectAltName)")
    ->envname("PROCTOR_TLS_CHECK_HOST");

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

  cmd.addresses = *proctor::cli::parse_addresses(cmd.node);
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
    return proctor::cli::call(cmd, req, timeout);
  };
  int rc = operator_command ? operator_command(via_node) : proctor::cli::run(cmd);
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
