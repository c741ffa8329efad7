// Serves the node's metrics in Prometheus text format over HTTP (GET /metrics).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include <caf/all.hpp>

namespace httplib {
class Server;
}

namespace proctor {

class metrics_http {
public:
  metrics_http(caf::actor_system& sys, caf::actor executor);
  ~metrics_http();

  /// Binds host:port and serves on a thread of its own; false and `*error` on failure.
  bool start(const std::string& host, uint16_t port, std::string* error);
  void stop();

private:
  caf::actor_system& sys_;
  caf::actor executor_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace proctor
