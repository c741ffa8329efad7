// Serves the node's metrics in Prometheus text format over HTTP (GET /metrics), or over HTTPS
// with the node's certificate (proctord --metrics-tls; docs/security.md): then a scraper
// shows a client certificate of the node's CA, and the authoriser gives it the reader role
// or refuses it (403), as on the client port.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "actors/base/auth_policy.hpp"
#include "tls/tls_in_use.hpp"
#include "tls/tls_options.hpp"

namespace httplib {
class Server;
}

namespace proctor {

/// /metrics over TLS.
struct metrics_tls {
  tls_options files;  ///< the node's certificate, key and CA (the copies in use)
  /// The context of the files in use, replaced by a reload: each new connection takes it.
  std::shared_ptr<tls_context_slot> context;
  std::shared_ptr<auth_policy_slot> policy;        ///< who may scrape (null: any client of the CA)
  std::shared_ptr<std::atomic<uint64_t>> refused;  ///< counts the scrapes refused
};

class metrics_http {
public:
  metrics_http(caf::actor_system& sys, caf::actor executor);
  ~metrics_http();

  /// Binds host:port and serves on a thread of its own (over TLS with `tls`); false and
  /// `*error` on failure.
  bool start(const std::string& host, uint16_t port, std::string* error,
             const metrics_tls* tls = nullptr);
  void stop();

private:
  caf::actor_system& sys_;
  caf::actor executor_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::shared_ptr<tls_context_slot> context_;  ///< kept for the handshakes' callback
};

}  // namespace proctor
