#include "actors/node/node_flags.hpp"

namespace proctor {

void add_node_flags(CLI::App& app, node_flags* f) {
  app.add_option("--data-dir", f->data_dir, "Directory of the node's RocksDB journal")->required();
  app.add_option("--listen", f->listen,
                 "HOST:PORT the node serves on (port 0: any); with --replica, its entry in "
                 "--replicas");
  app.add_option("--name", f->name,
                 "This node's name among its peers (fixed by the data directory on first use)");
  app.add_option("--peers", f->peers_text,
                 "The other nodes: NAME=HOST:PORT,... (their --listen addresses; a node with "
                 "a standby: NAME=HOST:PORT|HOST:PORT)");
  app.add_option("--peers-file", f->peers_file,
                 "A file of NAME=HOST:PORT lines ('#' comments), read with --peers");
  app.add_option("--workers", f->workers, "Run slots: steps that run at once")
    ->check(CLI::Range(1, 4096));
  app.add_option("--log-level", f->log_level, "trace, debug, info, warn, error, critical, off")
    ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--metrics", f->metrics_addr, "HOST:PORT to serve Prometheus metrics on");
  app.add_flag("--metrics-tls", f->metrics_tls,
               "Serve --metrics over HTTPS with the node's certificate: scrapers show a client "
               "certificate of --tls-ca with the reader role (docs/security.md)");
  app.add_option("--http", f->http_addr,
                 "HOST:PORT to serve the web console and its JSON API on (PORT alone: "
                 "127.0.0.1:PORT)");
  app.add_option("--http-token", f->http_token,
                 "The token the console's changes (abort, bypass) must carry; without one "
                 "the console is read-only");
  app.add_option("--http-token-file", f->http_token_file,
                 "A file holding --http-token (so it is not on the command line)");
  app.add_option("--auth-policy", f->auth_policy,
                 "A TOML file giving client certificates, node certificates used as clients "
                 "and HTTP tokens their roles (docs/security.md); read again on SIGHUP");
  app.add_flag("--http-read-token-required", f->http_read_token_required,
               "The HTTP API's reads need a token too (of --http-token or the policy's)");
  app.add_flag("--audit-submits", f->audit_submits,
               "Journal each submit with who sent it, as the other acts are (docs/security.md, "
               "\"Audit\"); set it on every node alike");
  app
    .add_option("--audit-keep-days", f->audit_keep_days,
                "Days an audit record is kept (at most the newest 100,000 are)")
    ->check(CLI::Range(1, 3650));
  app.add_option("--result-ttl-s", f->result_ttl_s, "Seconds a finished tree's result is kept")
    ->check(CLI::Range(1, 365 * 24 * 3600));
  app
    .add_option("--history-keep-records", f->history_keep_records,
                "Journal records of the most recently ended trees whose whole history is kept "
                "with their result (older ones keep their summary only; 0: none)")
    ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 40));
  app.add_option("--max-args-bytes", f->max_args, "Largest args JSON a submit may carry")
    ->check(CLI::Range(size_t{64}, size_t{1} << 30));
  // --hibernate-after-ms: the option's old name, still accepted.
  app
    .add_option("--passivate-after-ms,--hibernate-after-ms", f->passivate_after_ms,
                "A tree whose every procedure has only waited this long passivates: it gives "
                "up its actors until woken (-1: never)")
    ->check(CLI::Range(int64_t{-1}, int64_t{24} * 3600 * 1000));
  app
    .add_option("--compact-after", f->compact_after,
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
    .add_option("--stuck-after-s", f->stuck_after_s,
                "A procedure waiting or retrying in one state this long is stuck: `proctor "
                "bypass` needs no --force for it (0: at once)")
    ->check(CLI::Range(int64_t{0}, int64_t{365} * 24 * 3600));
  app.add_flag("--standby", f->standby,
               "Wait for the data directory's lock while another process holds it, following "
               "its journal, and take over as soon as that process is gone (docs/standby.md)");
  app
    .add_option("--fence-after-ms", f->fence_after_ms,
                "With --standby: kill (SIGKILL) an active process on this host that has not "
                "answered for this long, to take over (0: never)")
    ->check(CLI::Range(int64_t{0}, int64_t{24} * 3600 * 1000));
  app.add_flag("--join", f->join,
               "With --replica and an empty data directory: join the existing group as a new "
               "replica (`proctor replicas add` on its leader) instead of founding it");
  app
    .add_option("--restore-from", f->restore_from,
                "Restore the backup in this directory (`proctor backup DIR`) into an empty "
                "--data-dir, as a new incarnation of the node, and start on it "
                "(docs/operations.md, \"Backups\")")
    ->configurable(false);  // once, by hand: never from a configuration file (issue 47.8)
  app
    .add_flag("--recover-group", f->recover_group,
              "With --replica: the group lost its majority for good; make it the replicas in "
              "--replicas (survivors only, usually this one alone) and carry on. Once, on the "
              "survivor with the longest log, every other replica stopped "
              "(docs/replication.md)")
    ->configurable(false);
  app.add_option("--replica", f->replica,
                 "Run as this replica of a replica group (one of --replicas): the node "
                 "survives the loss of a minority of its replicas");
  app.add_option("--replicas", f->replicas_text,
                 "The node's replicas: NAME=HOST:PORT/RAFT_PORT,... (HOST:PORT each one's "
                 "--listen, RAFT_PORT its Raft port on that host)");
  app
    .add_option("--election-timeout-ms", f->election_timeout_ms,
                "With --replica: a leader that hears from no majority this long steps down; "
                "a follower that hears no leader 1-2 times this long starts an election")
    ->check(CLI::Range(100u, 60'000u));
  add_cluster_options(app, &f->cluster);  // docs/cluster-group.md
  // docs/tls.md
  app.add_option("--tls-cert", f->tls.cert, "PEM certificate this node presents (mutual TLS)");
  app.add_option("--tls-key", f->tls.key, "PEM private key of --tls-cert");
  app.add_option("--tls-ca", f->tls.ca,
                 "PEM CA every client's and peer's certificate must chain to");
  app.add_flag("--tls-check-host", f->tls.check_host,
               "Require a node this one dials (peer links, calls, Raft) to present a "
               "certificate carrying the host dialled (IP or DNS subjectAltName)");
  // docs/command-line.md#configuration-file: every option above, by its long name.
  app.set_config("--config", "",
                 "A TOML file of options, KEY = VALUE with each option's long name (e.g. "
                 "workers = 4); the command line overrides it");
  app.allow_config_extras(false);
}

}  // namespace proctor
