#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
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
#include "actors/node/node_flags.hpp"
#include "actors/node/node_flags_check.hpp"
#include "actors/node/node_identity.hpp"
#include "actors/node/node_restore.hpp"
#include "actors/node/node_security.hpp"
#include "actors/node/replica_node.hpp"
#include "actors/node/standby.hpp"
#include "actors/wire/endpoint.hpp"
#include "tls/caf_tls.hpp"
#include "tls/tls_in_use.hpp"

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
  node_flags f;
  add_node_flags(app, &f);
  if (auto why = parse_command_line(app, argc, argv); why) {
    if (!why->empty())
      std::cerr << program << ": " << *why << "\n";
    return why->empty() ? 0 : 64;
  }
  auto logger = spdlog::stderr_color_mt(program);
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(f.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  std::vector<replica_member> group;
  if (auto why = check_flag_combinations(f, &group); !why.empty()) {
    std::cerr << program << ": " << why << "\n";
    return 64;
  }
  auto listen_ep = parse_endpoint(f.listen, true);
  if (!listen_ep) {
    std::cerr << program << ": --listen wants HOST:PORT, got '" << f.listen << "'\n";
    return 64;
  }
  if (auto why = check_tls_options(f.tls); !why.empty()) {
    std::cerr << program << ": " << why << "\n";
    return 64;
  }
  // Its own certificate, and who has which role (docs/security.md): read now, and again on
  // SIGHUP.
  auto policy = std::make_shared<auth_policy_slot>();
  if (auto why = start_security(f, policy.get()); !why.empty()) {
    std::cerr << program << ": " << why << "\n";
    return 64;
  }
  if (auto why = check_cluster_options(&f.cluster, f.name, !group.empty(), listen_ep->host);
      !why.empty()) {
    std::cerr << program << ": " << why << "\n";
    return 64;
  }
  auto metrics_ep = parse_endpoint(f.metrics_addr, true);
  if (!f.metrics_addr.empty() && !metrics_ep) {
    std::cerr << program << ": --metrics wants HOST:PORT, got '" << f.metrics_addr << "'\n";
    return 64;
  }

  auto http_ep = parse_endpoint(console_address(f.http_addr), true);
  if (!f.http_addr.empty() && !http_ep) {
    std::cerr << program << ": --http wants HOST:PORT, got '" << f.http_addr << "'\n";
    return 64;
  }
  std::string token_error;
  auto console_token = load_console_token(f.http_token, f.http_token_file, &token_error);
  if (!console_token) {
    std::cerr << program << ": " << token_error << "\n";
    return 64;
  }
  if (auto why = check_read_token(f, *console_token, *policy); !why.empty()) {
    std::cerr << program << ": " << why << "\n";
    return 64;
  }
  if (f.http_addr.empty() && !console_token->empty()) {
    std::cerr << program << ": --http-token and --http-token-file need --http\n";
    return 64;
  }

  std::map<std::string, peer_address> peers;
  uint64_t group_id_floor = 0;  // the cluster group's for this name (a joining node)
  if (std::string err; int code = read_peers(f, &peers, &group_id_floor, &err)) {
    std::cerr << program << ": " << err << "\n";
    return code;
  }

  if (auto why = data_dir_mismatch(f.data_dir, !group.empty()); !why.empty()) {
    std::cerr << program << ": " << why << "\n";
    return 1;
  }

  // Signals are taken synchronously by this thread; block them before CAF starts threads.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  const sigset_t stop_sigs = sigs;
  sigaddset(&sigs, SIGHUP);  // a reload (docs/security.md), never a stop
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  // The node uses copies of its TLS files, replaced only by a reload that found the new
  // ones good (tls/tls_in_use.hpp); everything below takes the copies' paths.
  std::unique_ptr<tls_in_use> tls_files;
  if (f.tls.enabled()) {
    std::string why;
    tls_files = tls_in_use::make(f.tls, &why);
    if (!tls_files) {
      std::cerr << program << ": " << why << "\n";
      return 1;
    }
    f.tls = tls_files->options();
  }
  const auto own_identity = [&f](const tls_options& t) {
    return f.name.empty() ? std::string{} : check_own_identity(t.cert, f.name, f.replica);
  };
  // SIGHUP (this thread) and `proctor tls reload` (the executor's): one at a time. What they
  // use outlives the actor system below.
  std::mutex reload_mutex;
  // Refusals at every door of this process (client port, HTTP, /metrics over TLS), one count.
  auto refused = std::make_shared<std::atomic<uint64_t>>(0);
  const auto reload = [&](const char* by, std::string* text = nullptr) {
    std::lock_guard<std::mutex> g(reload_mutex);
    std::string done;
    auto why = reload_security(by, tls_files.get(), own_identity, f.auth_policy, *policy, &done);
    if (text != nullptr)
      *text = why.empty() ? done : why;
    return why.empty();
  };

  daemon_config cfg;
  configure_tls(cfg, f.tls);
  int rc = 0;
  {
    caf::actor_system sys{cfg};
    node n{sys, types};
    // The data directory: this process's at once, or (--standby) once its holder is gone;
    // the actor system and the registry are ready meanwhile.
    standby_options so;
    so.data_dir = f.data_dir;
    if (f.fence_after_ms > 0)
      so.fence_after = std::chrono::milliseconds{f.fence_after_ms};
    so.stop_requested = [&stop_sigs] { return signal_pending(stop_sigs); };
    so.tls = f.tls;
    if (f.standby) {
      // What a standby can check before it waits, so that a wrong --name is refused now and
      // not when the active process dies, leaving the node with no process at all.
      if (auto id = stored_identity(f.data_dir, f.name); !id) {
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
      if (!f.metrics_addr.empty()) {
        http = std::make_unique<metrics_http>(sys, target);
        std::string err;
        std::optional<metrics_tls> mt;
        if (f.metrics_tls)
          mt = metrics_tls{f.tls, tls_files->context(), policy, refused};
        if (!http->start(metrics_ep->host, metrics_ep->port, &err, mt ? &*mt : nullptr)) {
          std::cerr << program << ": cannot serve metrics on " << f.metrics_addr << ": " << err
                    << "\n";
          return false;
        }
      }
      if (!f.http_addr.empty()) {
        console_http_options co;
        co.token = *console_token;
        co.policy = policy;
        co.refused = refused;
        co.read_token_required = f.http_read_token_required;
        co.max_args_bytes = f.max_args;
        console = std::make_unique<console_http>(sys, target, co);
        std::string err;
        if (console->start(http_ep->host, http_ep->port, &err) == 0) {
          std::cerr << program << ": cannot serve the web console on " << f.http_addr << ": " << err
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
    replica_restore restore;
    if (!group.empty()) {
      // A replica: its store first, its --listen address served by a refusing front, then
      // the wait until it leads (docs/replication.md).
      std::error_code ec;
      std::filesystem::create_directories(f.data_dir, ec);
      if (auto id = settle_identity(f.data_dir, f.name); !id) {
        std::cerr << program << ": " << error_text(sys, id.error()) << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
      if (std::string err; !plan_replica_restore(f, &restore, &err)) {
        std::cerr << program << ": --restore-from " << f.restore_from << ": " << err << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
      replica_setup rs;
      rs.replica = f.replica;
      rs.group = group;
      rs.node_name = f.name;
      rs.data_dir = f.data_dir;
      rs.max_frame_bytes = client_frame_limit(f.max_args);
      rs.auth_policy = policy;
      rs.audit_submits = f.audit_submits;
      rs.refused_requests = refused;
      rs.argv = argv;
      rs.election_timeout_ms = f.election_timeout_ms;
      rs.join = f.join;
      rs.recover = f.recover_group;
      rs.tls = f.tls;
      rs.tls_reload = tls_files ? tls_files->context() : nullptr;
      rs.http_address = f.http_addr;
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
      if (!rn->wait_to_lead(sigs, [&reload] { reload("SIGHUP", nullptr); })) {
        spdlog::info("replica {}: stopped before it led", f.replica);
#ifdef PROCTOR_HAVE_HTTPLIB
        stop_http();
#endif
        rn.reset();
        spdlog::shutdown();
        std::_Exit(0);
      }
      // A restore goes through the replicated store: entries of the Raft log, which every
      // replica added later receives (node_restore.hpp).
      if (std::string err; !finish_replica_restore(f, restore, *rn->store(), &err)) {
        std::cerr << program << ": --restore-from " << f.restore_from << ": " << err << "\n";
        spdlog::critical("--restore-from {}: {}", f.restore_from, err);
        rn.reset();
        spdlog::shutdown();
        std::_Exit(1);
      }
    }
    if (!rn && !f.restore_from.empty()) {
      if (std::string err; !restore_node_journal(f, &err)) {
        std::cerr << program << ": --restore-from " << f.restore_from << ": " << err << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
    }
    auto dir = rn ? standby_outcome{} : take_directory(so, f.standby);
    if (!rn && !dir.lock) {
      if (!dir.error.empty()) {
        std::cerr << program << ": " << dir.error << "\n";
        spdlog::shutdown();
        std::_Exit(1);
      }
      spdlog::info("standby on {}: stopped before taking over", f.data_dir);
      spdlog::shutdown();
      return 0;
    }
    node_options opts;
    opts.data_dir = f.data_dir;
    opts.workers = f.workers;
    opts.executor.result_ttl = std::chrono::seconds{f.result_ttl_s};
    opts.executor.history_keep_records = f.history_keep_records;
    opts.executor.max_args_bytes = f.max_args;
    opts.executor.passivate_after = std::chrono::milliseconds{f.passivate_after_ms};
    opts.executor.compact_after = f.compact_after;
    opts.executor.stuck_after = std::chrono::seconds{f.stuck_after_s};
    opts.executor.audit_submits = f.audit_submits;
    opts.executor.audit_keep = std::chrono::hours{24 * f.audit_keep_days};
    std::vector<caf::actor> services;
    for (const auto& [service, spawn] : node_opts.services) {
      services.push_back(spawn(sys));
      opts.services[service] = services.back();
    }
    opts.name = f.name;
    opts.auth_policy = policy;
    opts.refused_requests = refused;
    opts.reload_security = [&reload](std::string* text) {
      return reload("proctor tls reload", text);
    };
    opts.lock = dir.lock;
    opts.id_floor = group_id_floor;
    opts.ask_id_floor = floor_of_seeds(f.cluster, f.name, f.tls);  // a node run as replicas
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
    if (f.cluster.enabled()) {
      member = std::make_unique<cluster_member>(sys);
      opts.cluster_member = member->actor();
    }
    caf::actor transport;
    if (!peers.empty() || f.cluster.enabled()) {
      peer_transport_config pc;
      pc.self_name = f.name;
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
      std::cerr << program << ": cannot listen on " << f.listen << ": "
                << error_text(sys, p.error()) << "\n";
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
      spdlog::info("took over as the active process of {} in {} ms (epoch {})", f.data_dir,
                   who.takeover_ms, dir.lock->epoch());
    }
    if (std::string err; dir.lock && !dir.lock->publish(who, &err))
      spdlog::warn("{} (standbys and operators see an older holder)", err);
    spdlog::info("{}{} listening on {}:{} with {} worker(s), data in {}{}", program,
                 f.name.empty() ? std::string{} : " " + f.name, listen_ep->host, *p, f.workers,
                 f.data_dir,
                 peers.empty() ? std::string{} : ", " + std::to_string(peers.size()) + " peer(s)");
#ifdef PROCTOR_HAVE_HTTPLIB
    if (!rn && !serve_http(n.executor())) {
      n.stop();
      spdlog::shutdown();
      std::_Exit(1);
    }
#else
    if (!f.metrics_addr.empty() || !f.http_addr.empty())
      spdlog::warn("--metrics and --http ignored: built without cpp-httplib");
#endif
    if (member) {
      // The node serves: its member of the cluster group opens (docs/cluster-group.md).
      auto cs = member_setup(f.cluster, n, f.data_dir, who.listen, listen_ep->host, f.tls);
      cs.tls_reload = tls_files ? tls_files->context() : nullptr;
      if (rn)  // peers reach it at every replica's address, this one first
        cs.peer_address = [r = rn.get()] { return r->peer_addresses(); };
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
    for (;;) {
      if (rn)
        sigwait(&sigs, &sig);
      else
        sig = wait_for_signal_unless_fenced(sigs, *dir.lock);
      if (sig != SIGHUP)
        break;
      reload("SIGHUP");
    }
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
