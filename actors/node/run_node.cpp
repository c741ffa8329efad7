#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <proctor/run_node.hpp>

#include "actors/base/errors.hpp"
#include "actors/cluster/client_server.hpp"
#include "actors/cluster/peer_transport.hpp"
#include "actors/executor/executor.hpp"
#include "actors/node/node.hpp"
#include "actors/node/node_cluster_options.hpp"
#include "actors/node/node_command_line.hpp"
#include "actors/node/node_identity.hpp"
#include "actors/node/replica_node.hpp"
#include "actors/node/standby.hpp"
#include "actors/wire/endpoint.hpp"
#include "actors/wire/wall_clock.hpp"
#include "persistence/journal_backup.hpp"
#include "tls/caf_tls.hpp"

#ifdef PROCTOR_HAVE_HTTPLIB
#include "actors/console/console_http.hpp"
#include "actors/http/metrics_http.hpp"
#endif
#include "actors/console/console_auth.hpp"

namespace proctor {
namespace {

class daemon_config : public caf::actor_system_config {
public:
  daemon_config() {
    load<caf::io::middleman>();
    tune_actor_system(*this);
  }
};

}  // namespace

int run_node(int argc, char** argv, registry& types, const run_node_options& node_opts) {
  const std::string& program = node_opts.program;
  CLI::App app{program + ": " + node_opts.description};
  std::string data_dir, listen, log_level = "info", metrics_addr, name, peers_text, peers_file;
  size_t workers = 8;
  int result_ttl_s = 900;
  size_t max_args = 1 << 20;
  int64_t passivate_after_ms = 1000;
  uint64_t compact_after = executor_config{}.compact_after;
  int64_t stuck_after_s = 60;
  bool standby = false;
  int64_t fence_after_ms = 0;
  app.add_option("--data-dir", data_dir, "Directory of the node's RocksDB journal")->required();
  app.add_option("--listen", listen,
                 "HOST:PORT the node serves on (port 0: any); with --replica, its entry in "
                 "--replicas");
  app.add_option("--name", name,
                 "This node's name among its peers (fixed by the data directory on first use)");
  app.add_option("--peers", peers_text,
                 "The other nodes: NAME=HOST:PORT,... (their --listen addresses; a node with "
                 "a standby: NAME=HOST:PORT|HOST:PORT)");
  app.add_option("--peers-file", peers_file,
                 "A file of NAME=HOST:PORT lines ('#' comments), read with --peers");
  app.add_option("--workers", workers, "Run slots: steps that run at once")
    ->check(CLI::Range(1, 4096));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--metrics", metrics_addr, "HOST:PORT to serve Prometheus metrics on");
  std::string http_addr, http_token, http_token_file;  // docs/web-console.md
  app.add_option("--http", http_addr,
                 "HOST:PORT to serve the web console and its JSON API on (PORT alone: "
                 "127.0.0.1:PORT)");
  app.add_option("--http-token", http_token,
                 "The token the console's changes (abort, bypass) must carry; without one "
                 "the console is read-only");
  app.add_option("--http-token-file", http_token_file,
                 "A file holding --http-token (so it is not on the command line)");
  app.add_option("--result-ttl-s", result_ttl_s, "Seconds a finished tree's result is kept")
    ->check(CLI::Range(1, 365 * 24 * 3600));
  uint64_t history_keep_records = executor_config{}.history_keep_records;
  app
    .add_option("--history-keep-records", history_keep_records,
                "Journal records of the most recently ended trees whose whole history is kept "
                "with their result (older ones keep their summary only; 0: none)")
    ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 40));
  app.add_option("--max-args-bytes", max_args, "Largest args JSON a submit may carry")
    ->check(CLI::Range(size_t{64}, size_t{1} << 30));
  // --hibernate-after-ms: the option's old name, still accepted.
  app
    .add_option("--passivate-after-ms,--hibernate-after-ms", passivate_after_ms,
                "A tree whose every procedure has only waited this long passivates: it gives "
                "up its actors until woken (-1: never)")
    ->check(CLI::Range(int64_t{-1}, int64_t{24} * 3600 * 1000));
  app
    .add_option("--compact-after", compact_after,
                "A tree whose journal holds this many records is compacted into one record "
                "(0: never; a type's compact_after overrides it)")
    ->check(CLI::Validator(
      [](const std::string& v) -> std::string {
        return v == "1" ? "a tree holds at least 2 records to compact (0 turns compaction off)"
                        : "";
      },
      "0 or at least 2"))
    ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 40));
  app
    .add_option("--stuck-after-s", stuck_after_s,
                "A procedure waiting or retrying in one state this long is stuck: `proctor "
                "bypass` needs no --force for it (0: at once)")
    ->check(CLI::Range(int64_t{0}, int64_t{365} * 24 * 3600));
  app.add_flag("--standby", standby,
               "Wait for the data directory's lock while another process holds it, following "
               "its journal, and take over as soon as that process is gone (docs/standby.md)");
  app
    .add_option("--fence-after-ms", fence_after_ms,
                "With --standby: kill (SIGKILL) an active process on this host that has not "
                "answered for this long, to take over (0: never)")
    ->check(CLI::Range(int64_t{0}, int64_t{24} * 3600 * 1000));
  std::string replica, replicas_text;  // docs/replication.md
  unsigned election_timeout_ms = 1000;
  bool join = false;
  app.add_flag("--join", join,
               "With --replica and an empty data directory: join the existing group as a new "
               "replica (`proctor replicas add` on its leader) instead of founding it");
  std::string restore_from;
  app
    .add_option("--restore-from", restore_from,
                "Restore the backup in this directory (`proctor backup DIR`) into an empty "
                "--data-dir, as a new incarnation of the node, and start on it "
                "(docs/operations.md, \"Backups\")")
    ->configurable(false);  // once, by hand: never from a configuration file (issue 47.8)
  bool recover_group = false;
  app
    .add_flag("--recover-group", recover_group,
              "With --replica: the group lost its majority for good; make it the replicas in "
              "--replicas (survivors only, usually this one alone) and carry on. Once, on the "
              "survivor with the longest log, every other replica stopped "
              "(docs/replication.md)")
    ->configurable(false);
  app.add_option("--replica", replica,
                 "Run as this replica of a replica group (one of --replicas): the node "
                 "survives the loss of a minority of its replicas");
  app.add_option("--replicas", replicas_text,
                 "The node's replicas: NAME=HOST:PORT/RAFT_PORT,... (HOST:PORT each one's "
                 "--listen, RAFT_PORT its Raft port on that host)");
  app
    .add_option("--election-timeout-ms", election_timeout_ms,
                "With --replica: a leader that hears from no majority this long steps down; "
                "a follower that hears no leader 1-2 times this long starts an election")
    ->check(CLI::Range(100u, 60'000u));
  cluster_options cluster;  // docs/cluster-group.md
  add_cluster_options(app, &cluster);
  tls_options tls;  // docs/tls.md
  app.add_option("--tls-cert", tls.cert, "PEM certificate this node presents (mutual TLS)");
  app.add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", tls.ca, "PEM CA every client's and peer's certificate must chain to");
  // docs/command-line.md#configuration-file: every option above, by its long name.
  app.set_config("--config", "",
                 "A TOML file of options, KEY = VALUE with each option's long name (e.g. "
                 "workers = 4); the command line overrides it");
  app.allow_config_extras(false);
  if (auto why = parse_command_line(app, argc, argv); why) {
    if (!why->empty())
      std::cerr << program << ": " << *why << "\n";
    return why->empty() ? 0 : 64;
  }
  auto logger = spdlog::stderr_color_mt(program);
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  std::vector<replica_member> group;
  if (!replica.empty() || !replicas_text.empty()) {
    std::string err;
    if (replica.empty() || replicas_text.empty()) {
      std::cerr << program << ": --replica and --replicas go together\n";
      return 64;
    }
    if (!parse_replica_group(replicas_text, &group, &err)) {
      std::cerr << program << ": --replicas: " << err << "\n";
      return 64;
    }
    auto* me = find_replica(group, replica);
    if (me == nullptr) {
      std::cerr << program << ": --replica " << replica << " is not one of --replicas\n";
      return 64;
    }
    if (name.empty()) {
      std::cerr << program << ": --replica needs --name (the node the replicas are)\n";
      return 64;
    }
    if (standby) {
      std::cerr << program
                << ": --standby and --replica do not go together (a replica "
                   "group needs no standby: any replica takes over)\n";
      return 64;
    }
    auto own = me->client.host + ":" + std::to_string(me->client.port);
    if (listen.empty())
      listen = own;
    else if (auto ep = parse_endpoint(listen, false);
             ep && ep->host + ":" + std::to_string(ep->port) != own) {
      std::cerr << program << ": --listen " << listen << " is not replica " << replica
                << "'s address in --replicas (" << own << ")\n";
      return 64;
    }
  }
  if (join && group.empty()) {
    std::cerr << program << ": --join goes with --replica and --replicas\n";
    return 64;
  }
  if (!restore_from.empty() && (!group.empty() || standby)) {
    std::cerr << program
              << ": --restore-from starts a plain node (not --replica or --standby): restore "
                 "it as one, then add replicas (docs/operations.md, \"Backups\")\n";
    return 64;
  }
  if (recover_group && (group.empty() || join)) {
    std::cerr << program << ": --recover-group goes with --replica and --replicas, not --join\n";
    return 64;
  }
  if (listen.empty()) {
    std::cerr << program
              << ": --listen is required (HOST:PORT; with --replica it may be left "
                 "to --replicas)\n";
    return 64;
  }
  auto listen_ep = parse_endpoint(listen, true);
  if (!listen_ep) {
    std::cerr << program << ": --listen wants HOST:PORT, got '" << listen << "'\n";
    return 64;
  }
  if (auto why = check_tls_options(tls); !why.empty()) {
    std::cerr << program << ": " << why << "\n";
    return 64;
  }
  if (auto why = check_cluster_options(&cluster, name, !group.empty(), listen_ep->host);
      !why.empty()) {
    std::cerr << program << ": " << why << "\n";
    return 64;
  }
  auto metrics_ep = parse_endpoint(metrics_addr, true);
  if (!metrics_addr.empty() && !metrics_ep) {
    std::cerr << program << ": --metrics wants HOST:PORT, got '" << metrics_addr << "'\n";
    return 64;
  }

  auto http_ep = parse_endpoint(console_address(http_addr), true);
  if (!http_addr.empty() && !http_ep) {
    std::cerr << program << ": --http wants HOST:PORT, got '" << http_addr << "'\n";
    return 64;
  }
  std::string token_error;
  auto console_token = load_console_token(http_token, http_token_file, &token_error);
  if (!console_token) {
    std::cerr << program << ": " << token_error << "\n";
    return 64;
  }
  if (http_addr.empty() && !console_token->empty()) {
    std::cerr << program << ": --http-token and --http-token-file need --http\n";
    return 64;
  }

  std::map<std::string, peer_address> peers;
  uint64_t group_id_floor = 0;  // the cluster group's for this name (a joining node)
  {
    std::string text = peers_text, err;
    if (!peers_file.empty()) {
      std::ifstream in(peers_file);
      if (!in) {
        std::cerr << program << ": cannot read --peers-file " << peers_file << "\n";
        return 64;
      }
      std::stringstream ss;
      ss << in.rdbuf();
      text += "\n" + ss.str();
    }
    if (!parse_peers(text, name, &peers, &err)) {
      std::cerr << program << ": --peers: " << err << "\n";
      return 64;
    }
    if (!add_cluster_peers(cluster, data_dir, name, tls, &peers, &group_id_floor, &err)) {
      std::cerr << program << ": " << err << "\n";
      return 1;
    }
    if (!peers.empty() && name.empty()) {
      // A data directory named before knows its name; one never named cannot have peers.
      std::ifstream node_file(data_dir + "/NODE");
      if (!node_file) {
        std::cerr << program << ": --peers needs --name (this node's name among them)\n";
        return 64;
      }
    }
  }

  // Signals are taken synchronously by this thread; block them before CAF starts threads.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  daemon_config cfg;
  configure_tls(cfg, tls);
  int rc = 0;
  {
    caf::actor_system sys{cfg};
    node n{sys, types};
    // The data directory: this process's at once, or (--standby) once its holder is gone;
    // the actor system and the registry are ready meanwhile.
    standby_options so;
    so.data_dir = data_dir;
    if (fence_after_ms > 0)
      so.fence_after = std::chrono::milliseconds{fence_after_ms};
    so.stop_requested = [&sigs] { return signal_pending(sigs); };
    so.tls = tls;
    if (standby) {
      // What a standby can check before it waits, so that a wrong --name is refused now and
      // not when the active process dies, leaving the node with no process at all.
      if (auto id = stored_identity(data_dir, name); !id) {
        std::cerr << program << ": " << error_text(sys, id.error()) << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
    }
#ifdef PROCTOR_HAVE_HTTPLIB
    // --metrics and --http, served by `target`: the executor, or a replica's front, which
    // serves them from the replica's start, leading or not (a follower answers /metrics
    // itself and names the leader's HTTP address to the API: docs/http-api.md).
    std::unique_ptr<metrics_http> http;
    std::unique_ptr<console_http> console;
    auto serve_http = [&](const caf::actor& target) {
      if (!metrics_addr.empty()) {
        http = std::make_unique<metrics_http>(sys, target);
        std::string err;
        if (!http->start(metrics_ep->host, metrics_ep->port, &err)) {
          std::cerr << program << ": cannot serve metrics on " << metrics_addr << ": " << err
                    << "\n";
          return false;
        }
      }
      if (!http_addr.empty()) {
        console_http_options co;
        co.token = *console_token;
        co.max_args_bytes = max_args;
        console = std::make_unique<console_http>(sys, target, co);
        std::string err;
        if (console->start(http_ep->host, http_ep->port, &err) == 0) {
          std::cerr << program << ": cannot serve the web console on " << http_addr << ": " << err
                    << "\n";
          if (http)
            http->stop();
          return false;
        }
      }
      return true;
    };
    auto stop_http = [&] {
      if (console)
        console->stop();
      if (http)
        http->stop();
    };
#endif
    std::unique_ptr<replica_node> rn;
    if (!group.empty()) {
      // A replica: its store first, its --listen address served by a refusing front, then
      // the wait until it leads (docs/replication.md).
      std::error_code ec;
      std::filesystem::create_directories(data_dir, ec);
      if (auto id = settle_identity(data_dir, name); !id) {
        std::cerr << program << ": " << error_text(sys, id.error()) << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
      replica_setup rs;
      rs.replica = replica;
      rs.group = group;
      rs.node_name = name;
      rs.data_dir = data_dir;
      rs.max_frame_bytes = client_frame_limit(max_args);
      rs.argv = argv;
      rs.election_timeout_ms = election_timeout_ms;
      rs.join = join;
      rs.recover = recover_group;
      rs.tls = tls;
      rs.http_address = http_addr;
      std::string err;
      rn = replica_node::open(sys, std::move(rs), &err);
      if (!rn) {
        std::cerr << program << ": " << err << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
#ifdef PROCTOR_HAVE_HTTPLIB
      if (!serve_http(rn->front())) {
        rn.reset();
        spdlog::shutdown();
        std::_Exit(1);
      }
#endif
      if (!rn->wait_to_lead(sigs)) {
        spdlog::info("replica {}: stopped before it led", replica);
#ifdef PROCTOR_HAVE_HTTPLIB
        stop_http();
#endif
        rn.reset();
        spdlog::shutdown();
        std::_Exit(0);
      }
    }
    if (!restore_from.empty()) {
      restore_report rr;
      std::string err;
      std::error_code ec;
      std::filesystem::create_directories(data_dir, ec);
      if (!restore_backup(restore_from, data_dir, name, &rr, &err)) {
        std::cerr << program << ": --restore-from " << restore_from << ": " << err << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
      if (rr.already)
        spdlog::info("{} was already restored from the backup in {}: starting on it", data_dir,
                     restore_from);
      else
        spdlog::warn("restored node {} from the backup in {} (taken at {}, incarnation {:016x}, "
                     "LSN {}): {} record(s), {} tree(s); a new incarnation, its ids from {}; "
                     "what the old one did after the backup is not here",
                     name.empty() ? "(unnamed)" : name, restore_from, utc_text(rr.from.taken_at_ms),
                     rr.from.incarnation, rr.from.lsn, rr.records, rr.trees, rr.next_id);
    }
    auto dir = rn ? standby_outcome{} : take_directory(so, standby);
    if (!rn && !dir.lock) {
      if (!dir.error.empty()) {
        std::cerr << program << ": " << dir.error << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
      spdlog::info("standby on {}: stopped before taking over", data_dir);
      spdlog::shutdown();
      return 0;
    }
    node_options opts;
    opts.data_dir = data_dir;
    opts.workers = workers;
    opts.executor.result_ttl = std::chrono::seconds{result_ttl_s};
    opts.executor.history_keep_records = history_keep_records;
    opts.executor.max_args_bytes = max_args;
    opts.executor.passivate_after = std::chrono::milliseconds{passivate_after_ms};
    opts.executor.compact_after = compact_after;
    opts.executor.stuck_after = std::chrono::seconds{stuck_after_s};
    std::vector<caf::actor> services;
    for (const auto& [service, spawn] : node_opts.services) {
      services.push_back(spawn(sys));
      opts.services[service] = services.back();
    }
    opts.name = name;
    opts.lock = dir.lock;
    opts.id_floor = group_id_floor;
    if (rn) {
      opts.store = rn->store();
      opts.epoch = rn->store()->term();
      opts.on_journal_fatal = [r = rn.get()](const std::string& why) {
        if (r->retired())
          spdlog::warn("replica: a journal write failed while shutting down: {}", why);
        else
          r->step_down("its journal failed a write (" + why + ")");
      };
    }
    std::unique_ptr<cluster_member> member;
    std::atomic<bool> member_refused{false};
    if (cluster.enabled()) {
      member = std::make_unique<cluster_member>(sys);
      opts.cluster_member = member->actor();
    }
    caf::actor transport;
    if (!peers.empty() || cluster.enabled()) {
      peer_transport_config pc;
      pc.self_name = name;
      pc.peers = peers;
      transport = spawn_peer_transport(sys, std::move(pc));
      opts.transport = transport;
      opts.ids_from_peers = !peers.empty();
      for (const auto& [peer, addr] : peers)
        opts.peer_names.push_back(peer);
    }
    auto started = n.start(opts);
    if (!started) {
      std::cerr << program << ": " << error_text(sys, started.error()) << "\n";
      spdlog::shutdown();
      std::_Exit(1);
    }
    caf::expected<uint16_t> p = uint16_t{0};
    if (rn) {
      rn->lead(n.executor());
      p = rn->port();
    } else {
      p = n.serve_clients(listen_ep->host, listen_ep->port);
    }
    if (!p) {
      std::cerr << program << ": cannot listen on " << listen << ": " << error_text(sys, p.error())
                << "\n";
      n.stop();
      spdlog::shutdown();
      std::_Exit(1);
    }
    auto takeover = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - dir.taken_at);
    active_info who;
    who.listen = listen_ep->host + ":" + std::to_string(*p);
    if (dir.waited) {
      who.takeover_ms = std::max<int64_t>(1, takeover.count());
      n.note_takeover(std::chrono::milliseconds{who.takeover_ms});
      spdlog::info("took over as the active process of {} in {} ms (epoch {})", data_dir,
                   who.takeover_ms, dir.lock->epoch());
    }
    if (std::string err; dir.lock && !dir.lock->publish(who, &err))
      spdlog::warn("{} (standbys and operators see an older holder)", err);
    spdlog::info("{}{} listening on {}:{} with {} worker(s), data in {}{}", program,
                 name.empty() ? std::string{} : " " + name, listen_ep->host, *p, workers, data_dir,
                 peers.empty() ? std::string{} : ", " + std::to_string(peers.size()) + " peer(s)");
#ifdef PROCTOR_HAVE_HTTPLIB
    if (!rn && !serve_http(n.executor())) {
      n.stop();
      spdlog::shutdown();
      std::_Exit(1);
    }
#else
    if (!metrics_addr.empty() || !http_addr.empty())
      spdlog::warn("--metrics and --http ignored: built without cpp-httplib");
#endif
    if (member) {
      // The node serves: its member of the cluster group opens (docs/cluster-group.md).
      auto cs = member_setup(cluster, n, data_dir, who.listen, listen_ep->host, tls);
      cs.on_refused = [&member_refused](const std::string& why) {
        spdlog::critical("{}: stopping", why);
        member_refused = true;
        kill(getpid(), SIGTERM);  // the main thread waits for it (sigwait)
      };
      if (std::string err; !member->start(std::move(cs), &err)) {
        std::cerr << program << ": " << err << "\n";
        member.reset();
        n.stop();
        spdlog::shutdown();
        std::_Exit(1);
      }
    }
    int sig = 0;
    if (rn)
      sigwait(&sigs, &sig);
    else
      sig = wait_for_signal_unless_fenced(sigs, *dir.lock);
    spdlog::info("signal {}: shutting down", sig);
    if (member_refused)
      rc = 1;
    // Peers hear that this node leaves (they show it as "left", not as failed); not a
    // replica (another one takes over) and not a fenced process (it is not the node now).
    if (transport && !rn && sig != 0) {
      caf::scoped_actor self{sys};
      self->request(transport, std::chrono::seconds{1}, peer_leaving_atom::value, uint32_t{500})
        .receive([](bool) {}, [](caf::error&) {});
    }
    if (rn)
      rn->retire();
#ifdef PROCTOR_HAVE_HTTPLIB
    stop_http();
#endif
    member.reset();
    n.stop();
    for (const auto& service : services)
      caf::anon_send_exit(service, caf::exit_reason::user_shutdown);
    if (transport)
      caf::anon_send_exit(transport, caf::exit_reason::user_shutdown);
  }
  spdlog::shutdown();
  return rc;
}

}  // namespace proctor
