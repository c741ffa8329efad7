// Internal: what the node's two HTTP servers (metrics_http, console_http) do alike with
// cpp-httplib: the socket options they bind with, and starting the listening loop so that
// stop() can end it.
#pragma once

#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace proctor {

/// Binds with SO_REUSEADDR only. httplib's default also sets SO_REUSEPORT, which lets a
/// second process bind the same port and take part of the connections; SO_REUSEADDR alone
/// lets a restart bind without waiting for TIME_WAIT.
void bind_exclusively(httplib::Server& server);

/// Runs the listening loop of `server` (bound already) on `thread` and returns once it
/// runs: httplib's stop() does nothing before the loop has begun, and the loop would then
/// run for ever, so a stop right after a start hung. False, with `*error`, if the loop did
/// not begin within 10 s; the thread is then left to end with the process, owning the
/// server.
bool start_listening(std::unique_ptr<httplib::Server>& server, std::thread& thread,
                     std::string* error);

}  // namespace proctor
