#include "actors/http/http_serve.hpp"

#include <chrono>

#include <httplib.h>

namespace proctor {

void bind_exclusively(httplib::Server& server) {
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

bool start_listening(std::unique_ptr<httplib::Server>& server, std::thread& thread,
                     std::string* error) {
  auto* s = server.get();
  thread = std::thread([s] { s->listen_after_bind(); });
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds{10};
  while (!s->is_running() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  if (s->is_running())
    return true;
  *error = "the HTTP server did not start listening within 10 s";
  s->stop();
  thread.detach();
  (void)server.release();  // owned by that thread now
  return false;
}

}  // namespace proctor
