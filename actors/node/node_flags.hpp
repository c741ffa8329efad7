// proctord's options (docs/command-line.md): what run_node reads from its command line and
// --config file, each with its default, and their declaration to CLI11. The checks that
// need several of them together are node_flags_check.hpp's; the cluster group's options are
// node_cluster_options.hpp's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "actors/executor/executor.hpp"
#include "actors/node/node_cluster_options.hpp"
#include "replication/raft_group.hpp"
#include "tls/tls_options.hpp"

namespace proctor {

struct node_flags {
  std::string data_dir, listen, log_level = "info", metrics_addr, name, peers_text, peers_file;
  size_t workers = 8;
  int result_ttl_s = 900;
  size_t max_args = 1 << 20;
  int64_t passivate_after_ms = 1000;
  uint64_t compact_after = executor_config{}.compact_after;
  int64_t stuck_after_s = 60;
  bool standby = false;
  int64_t fence_after_ms = 0;
  std::string http_addr, http_token, http_token_file;  // docs/web-console.md
  std::string auth_policy;                             // docs/security.md: who has which role
  bool http_read_token_required = false;
  bool audit_submits = false;  // docs/security.md, "Audit"
  bool metrics_tls = false;    // --metrics over HTTPS with the node's certificate
  int audit_keep_days = 90;
  uint64_t history_keep_records = executor_config{}.history_keep_records;
  std::string replica, replicas_text;  // docs/replication.md
  unsigned election_timeout_ms = raft_store_options{}.election_timeout_ms;
  bool join = false;
  std::string restore_from;
  bool recover_group = false;
  cluster_options cluster;  // docs/cluster-group.md
  tls_options tls;          // docs/tls.md
};

/// Declares every option of `f` to `app` (with its help text and checks), and --config.
void add_node_flags(CLI::App& app, node_flags* f);

}  // namespace proctor
