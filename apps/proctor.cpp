// proctor: the operator CLI. Each command sends one pb::Request to a node's executor (see
// actors/rpc.hpp) and prints the answer.
//
// Exit codes: 0 ok; 1 the node answered with an error, or `wait` saw ROLLEDBACK / FAILED;
// 2 `wait` timed out; 3 the node cannot be reached (or the connection dropped); 64 usage.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <variant>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/rpc.hpp"
#include "apps/endpoint.hpp"
#include "apps/status_json.hpp"
#include "journal.pb.h"
#include "wire.pb.h"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_error = 1;
constexpr int exit_timeout = 2;
constexpr int exit_unreachable = 3;
constexpr int exit_usage = 64;

constexpr auto default_request_timeout = std::chrono::milliseconds{30'000};
/// A request that is safe to repeat and has had no answer this long is sent again over a new
/// connection (see main).
constexpr auto quiet_retry_after = std::chrono::milliseconds{3'000};
constexpr int quiet_retries = 2;
/// `wait` polls: each wait request asks the node to answer within this (or what is left of
/// --timeout-s), and the CLI gives the node `wait_grace` more before it takes the answer as
/// lost (see main) and polls again over a new connection.
constexpr auto wait_poll = std::chrono::milliseconds{10'000};
constexpr auto wait_grace = std::chrono::milliseconds{5'000};

/// Parses HOST:PORT (an IPv6 host may be bracketed: [::1]:4000).
/// The first line of `text`: errors go to stderr as one line (protobuf's JSON parse errors,
/// for one, append the offending input and a caret on lines of their own).
std::string first_line(const std::string& text) {
  auto line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
    line.pop_back();
  return line;
}

/// A CAF error as one readable line.
std::string describe(caf::actor_system& sys, const caf::error& err) {
  std::string text;
  if (err.category() == caf::atom("system")) {
    text = to_string(static_cast<caf::sec>(err.code()));
    std::replace(text.begin(), text.end(), '_', ' ');
    const auto& ctx = err.context();
    if (!ctx.empty() && ctx.match_element<std::string>(0))
      text += " (" + ctx.get_as<std::string>(0) + ")";
    else if (!ctx.empty())
      text += ": " + to_string(ctx);
  } else {
    text = sys.render(err);
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

constexpr const char* connection_lost = "the connection to the node was lost";

/// How one round trip to the node ended.
struct call_result {
  enum class kind : uint8_t { reply, unreachable, no_answer, failed };
  kind what = kind::failed;
  std::string reply;   ///< the serialized pb::Response (kind::reply)
  std::string reason;  ///< why there is no reply (otherwise)
};

/// Sends `request` to `node` and waits for the reply. An event-based helper does the
/// request so that it can monitor the node at the same time: a request to a peer whose
/// connection dropped is never answered (CAF 0.17 fails it only at its timeout), but the
/// monitor sees the peer go down within milliseconds. A zero `timeout` waits forever.
call_result call(caf::actor_system& sys, const caf::actor& node, std::string request,
                 std::chrono::milliseconds timeout) {
  struct shared {
    std::promise<call_result> promise;
    bool done = false;
    void finish(call_result r) {
      if (!done) {
        done = true;
        promise.set_value(std::move(r));
      }
    }
  };
  auto state = std::make_shared<shared>();
  auto result = state->promise.get_future();
  auto* sysp = &sys;
  auto limit = timeout.count() > 0 ? caf::duration{timeout} : caf::duration{caf::infinite};
  auto limit_text = std::to_string((timeout.count() + 999) / 1000) + " s";
  sys.spawn([=, request = std::move(request)](caf::event_based_actor* self) {
    self->monitor(node);
    self->set_down_handler([=](caf::down_msg&) {
      state->finish({call_result::kind::unreachable, {}, connection_lost});
      self->quit();
    });
    self->request(node, limit, proctor::rpc_atom::value, request)
      .then(
        [=](std::string& reply) {
          state->finish({call_result::kind::reply, std::move(reply), {}});
          self->quit();
        },
        [=](caf::error& err) {
          if (err == caf::sec::request_timeout)
            state->finish({call_result::kind::no_answer, {},
                           "the node did not answer within " + limit_text});
          else if (err == caf::sec::request_receiver_down)
            state->finish({call_result::kind::unreachable, {}, connection_lost});
          else
            state->finish({call_result::kind::failed, {}, describe(*sysp, err)});
          self->quit();
        });
  });
  return result.get();
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
  std::string node;
  proctor::pb::Request request;
  enum class verb : uint8_t {
    submit, status, list, wait, abort, event, metrics, release, quarantine
  };
  verb what = verb::status;
  uint64_t wait_timeout_s = 0;  ///< 0: no --timeout-s, wait as long as it takes
  /// When --timeout-s runs out (counted from the start, across reconnections).
  std::optional<std::chrono::steady_clock::time_point> wait_deadline;
  /// Safe to send twice (reads; submits, which always carry a nonce): see main.
  bool repeatable = false;
};

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
              << (resp.error().empty() ? Response::Code_Name(resp.code()) : first_line(resp.error()))
              << '\n';
    return exit_error;
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
      return exit_ok;
    case command::verb::wait: {
      std::cout << proctor::status_to_json(resp.status()) << '\n';
      switch (resp.status().state()) {
        case proctor::pb::SUCCESS: return exit_ok;
        case proctor::pb::ROLLEDBACK:
        case proctor::pb::FAILED: return exit_error;
        default:
          std::cerr << "error: the procedure has not ended\n";
          return exit_timeout;
      }
    }
    case command::verb::abort:
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
  }
  return exit_ok;
}

/// What run() returns when the node took the request but sent no answer in time and a
/// `last` attempt was not asked for: the caller may try again.
constexpr int no_answer_yet = -1;

/// The node's answer in `result`, or the exit code of a call that brought none (its reason
/// printed; no_answer_yet, printing nothing, when no answer came and `may_retry`).
std::variant<proctor::pb::Response, int> answer(const command& cmd, const call_result& result,
                                                bool may_retry) {
  switch (result.what) {
    case call_result::kind::no_answer:
      if (may_retry)
        return no_answer_yet;
      [[fallthrough]];
    case call_result::kind::unreachable:
      std::cerr << "error: node " << cmd.node << ": " << result.reason << '\n';
      return exit_unreachable;
    case call_result::kind::failed:
      std::cerr << "error: node " << cmd.node << " rejected the request: " << result.reason
                << '\n';
      return exit_error;
    case call_result::kind::reply:
      break;
  }
  proctor::pb::Response resp;
  if (!resp.ParseFromString(result.reply)) {
    std::cerr << "error: node " << cmd.node << " sent a malformed reply\n";
    return exit_error;
  }
  return resp;
}

/// `wait` as a series of polls on `node`: a poll the node answers with TIMEOUT while
/// --timeout-s has not run out is sent again; a poll without an answer returns no_answer_yet
/// (the caller reconnects and carries on), or exit_unreachable once --timeout-s ran out.
int run_wait(caf::actor_system& sys, const caf::actor& node, const command& cmd) {
  using clock = std::chrono::steady_clock;
  auto running = [&] { return !cmd.wait_deadline || clock::now() < *cmd.wait_deadline; };
  for (;;) {
    auto req = cmd.request;
    auto poll = wait_poll;
    if (cmd.wait_deadline) {
      auto left =
        std::chrono::ceil<std::chrono::milliseconds>(*cmd.wait_deadline - clock::now());
      poll = std::clamp(left, std::chrono::milliseconds{1}, wait_poll);
    }
    req.mutable_wait()->set_timeout_ms(static_cast<uint64_t>(poll.count()));
    auto got = answer(cmd, call(sys, node, req.SerializeAsString(), poll + wait_grace),
                      running());
    if (auto* rc = std::get_if<int>(&got))
      return *rc;
    auto& resp = std::get<proctor::pb::Response>(got);
    if (resp.code() == proctor::pb::Response::TIMEOUT && running())
      continue;  // not ended yet
    return report(cmd, resp);
  }
}

/// Connects, sends the request, prints the answer. Every CAF handle lives in this scope, so
/// none outlives the actor system. Unless this is the `last` attempt, a request that gets no
/// answer within `quiet` (when set) returns no_answer_yet, printing nothing.
int run(caf::actor_system& sys, const command& cmd,
        std::optional<std::chrono::milliseconds> quiet, bool last) {
  auto ep = proctor::parse_endpoint(cmd.node);
  auto node = sys.middleman().remote_actor(ep->host, ep->port);
  if (!node) {
    std::cerr << "error: cannot reach node " << cmd.node << ": " << describe(sys, node.error())
              << '\n';
    return exit_unreachable;
  }
  if (cmd.what == command::verb::wait)
    return run_wait(sys, *node, cmd);
  auto timeout = quiet && !last ? *quiet : default_request_timeout;
  auto got = answer(cmd, call(sys, *node, cmd.request.SerializeAsString(), timeout), !last);
  if (auto* rc = std::get_if<int>(&got))
    return *rc;
  return report(cmd, std::get<proctor::pb::Response>(got));
}

class cli_config : public caf::actor_system_config {
public:
  cli_config() {
    load<caf::io::middleman>();
    set("logger.console", caf::atom("none"));
    set("logger.file-verbosity", caf::atom("quiet"));
    set("scheduler.max-threads", size_t{2});
  }
};

/// The seven state names, as --state accepts them.
std::vector<std::string> state_names() {
  std::vector<std::string> names;
  for (int s = proctor::pb::ProcState_MIN + 1; s <= proctor::pb::ProcState_MAX; ++s)
    names.push_back(proctor::pb::ProcState_Name(static_cast<proctor::pb::ProcState>(s)));
  return names;
}

} // namespace

int main(int argc, char** argv) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  command cmd;
  using verb = command::verb;
  namespace pb = proctor::pb;

  CLI::App app{"Operator CLI of a Proctor node.", "proctor"};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--node", cmd.node, "The node's address, HOST:PORT")
    ->required()
    ->check([](const std::string& s) {
      return proctor::parse_endpoint(s) ? std::string{} : std::string{"expected HOST:PORT, got " + s};
    });

  // Each subcommand's callback runs after a successful parse and fills in the request.
  bool json = false;  // accepted for the contract; JSON is the only format
  uint64_t id = 0;

  std::string type;
  std::string args_json;
  std::string nonce;
  int32_t priority = 0;
  auto* submit = app.add_subcommand("submit", "Submit a procedure; prints its id");
  submit->add_option("type", type, "Registered procedure type, e.g. demo.ledger")->required();
  submit->add_option("--args-json", args_json, "The procedure's arguments as a JSON object");
  submit->add_option("--nonce", nonce, "Deduplication key: a repeated nonce returns the same id");
  submit->add_option("--priority", priority, "Higher runs first (default 0)");
  submit->callback([&] {
    cmd.what = verb::submit;
    cmd.repeatable = true;
    auto* r = cmd.request.mutable_submit();
    r->set_type(type);
    r->set_args_json(args_json);
    r->set_nonce(nonce);
    r->set_priority(priority);
  });

  auto* status = app.add_subcommand("status", "Print a procedure's status as JSON");
  status->add_option("id", id, "Procedure id")->required();
  status->add_flag("--json", json, "JSON output (the only format)");
  status->callback([&] {
    cmd.what = verb::status;
    cmd.repeatable = true;
    cmd.request.mutable_status()->set_id(id);
  });

  std::string state_filter;
  bool all = false;
  auto* list = app.add_subcommand("list", "Print procedures' statuses as a JSON array");
  list->add_option("--state", state_filter, "Only procedures in this state")
    ->transform(CLI::IsMember(state_names(), CLI::ignore_case));
  list->add_flag("--all", all, "Children too, not only roots");
  list->add_flag("--json", json, "JSON output (the only format)");
  list->callback([&] {
    cmd.what = verb::list;
    cmd.repeatable = true;
    auto* r = cmd.request.mutable_list();
    r->set_all(all);
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
  auto* event =
    app.add_subcommand("event", "Deliver an external event to the procedures waiting for KEY");
  event->add_option("key", key, "Event key")->required();
  event->add_option("--payload-json", payload_json, "The event's payload as JSON");
  event->callback([&] {
    cmd.what = verb::event;
    auto* r = cmd.request.mutable_event();
    r->set_key(key);
    r->set_payload_json(payload_json);
  });

  app.add_subcommand("metrics", "Print the node's metrics (Prometheus text)")->callback([&] {
    cmd.what = verb::metrics;
    cmd.repeatable = true;
    cmd.request.mutable_metrics();
  });

  auto* quarantine = app.add_subcommand(
    "quarantine", "List the trees whose journal records could not be read (JSON array)");
  quarantine->add_flag("--json", json, "JSON output (the only format)");
  quarantine->callback([&] {
    cmd.what = verb::quarantine;
    cmd.repeatable = true;
    cmd.request.mutable_quarantine();
  });

  auto* release =
    app.add_subcommand("release", "Drop a finished procedure's retained result now");
  release->add_option("id", id, "Procedure id")->required();
  release->callback([&] {
    cmd.what = verb::release;
    cmd.request.mutable_release()->set_id(id);
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }

  // CAF 0.17 now and then loses the answer to a request on a new connection (about one call
  // in 1,500 with four CLIs at once: the node handles the request, the answer never arrives,
  // and waiting longer on that connection does not help). A request that is safe to repeat
  // and has had no answer within a few seconds is sent again from a new actor system, i.e.
  // over a new connection; the last attempt waits the full time.
  if (cmd.what == verb::submit && cmd.request.submit().nonce().empty())
    cmd.request.mutable_submit()->set_nonce(random_nonce());
  if (cmd.what == verb::wait && cmd.wait_timeout_s > 0)
    cmd.wait_deadline = std::chrono::steady_clock::now() + std::chrono::seconds{cmd.wait_timeout_s};
  int rc = exit_error;
  // A wait polls until it ends (run_wait); the others get at most quiet_retries more tries.
  auto attempts = cmd.what == verb::wait ? INT_MAX : cmd.repeatable ? quiet_retries + 1 : 1;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    cli_config cfg;
    caf::actor_system sys{cfg};
    rc = run(sys, cmd, cmd.repeatable ? std::optional{quiet_retry_after} : std::nullopt,
             attempt == attempts);
    if (rc != no_answer_yet)
      break;
  }
  std::cout.flush();
  return rc;
}
