// The web console (docs/web-console.md): `proctord --http HOST:PORT` serves its pages, built into
// the binary (actors/console/, actors/console/embedded_files.hpp), and the HTTP/JSON API
// (docs/http-api.md, actors/console/console_api.hpp) on threads of its own. Each API call is one
// request to the executor, as a CLI command is, waited for at most `node_timeout` (then 503).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <caf/all.hpp>

#include "actors/base/auth_policy.hpp"

namespace httplib {
class Server;
}

namespace proctor {

struct console_http_options {
  /// The token POSTs must carry ("Authorization: Bearer TOKEN"); "" makes the console
  /// read-only.
  std::string token;
  /// The --auth-policy in force (its tokens and their roles; null or empty: none).
  std::shared_ptr<auth_policy_slot> policy;
  /// Counts the requests the authoriser refused (proctor_refused_requests_total; null: none).
  std::shared_ptr<std::atomic<uint64_t>> refused;
  /// --http-read-token-required: reads need a token too.
  bool read_token_required = false;
  /// Bound on the node's answer to one API call (a `?wait=` long-poll: its wait plus this).
  std::chrono::milliseconds node_timeout{10'000};
  /// The node's --max-args-bytes: the largest args a submit may carry; request bodies are
  /// bounded by twice this plus 64 KiB (args in a JSON string may be escaped), more is a 413.
  size_t max_args_bytes = size_t{1} << 20;
  /// The longest a `?wait=` long-poll is held, and how many may be held at once.
  std::chrono::milliseconds max_wait{60'000};
  int max_waits = 16;
};

class console_http {
public:
  console_http(caf::actor_system& sys, caf::actor executor, console_http_options opts);
  ~console_http();
  console_http(const console_http&) = delete;
  console_http& operator=(const console_http&) = delete;

  /// Binds host:port (port 0: any free one) and serves until stop(); the port it listens
  /// on, or 0 and `*error`.
  uint16_t start(const std::string& host, uint16_t port, std::string* error);

  /// Stops serving and joins the server's threads (requests in progress finish first).
  void stop();

private:
  caf::actor_system& sys_;
  caf::actor executor_;
  console_http_options opts_;
  std::atomic<int> waits_{0};
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace proctor
