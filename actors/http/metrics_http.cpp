#include "actors/http/metrics_http.hpp"

#include <httplib.h>

#include <proctor/wire.pb.h>

#include "actors/base/errors.hpp"
#include "actors/base/rpc.hpp"
#include "actors/http/http_serve.hpp"

namespace proctor {

metrics_http::metrics_http(caf::actor_system& sys, caf::actor executor)
    : sys_(sys), executor_(std::move(executor)) {}

metrics_http::~metrics_http() {
  stop();
}

bool metrics_http::start(const std::string& host, uint16_t port, std::string* error) {
  server_ = std::make_unique<httplib::Server>();
  bind_exclusively(*server_);
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    pb::Request req;
    req.mutable_metrics();
    caf::scoped_actor self{sys_};
    std::string text;
    bool ok = false;
    self->request(executor_, std::chrono::seconds{10}, rpc_atom::value, req.SerializeAsString())
      .receive(
        [&](const std::string& bytes) {
          pb::Response r;
          ok = r.ParseFromString(bytes) && r.code() == pb::Response::OK;
          text = ok ? r.text() : r.error();
        },
        [&](caf::error& e) { text = error_text(sys_, e); });
    res.status = ok ? 200 : 503;
    res.set_content(text, "text/plain; version=0.0.4");
  });
  if (!server_->bind_to_port(host.c_str(), port)) {
    *error = "bind failed (address in use or not local)";
    server_.reset();
    return false;
  }
  return start_listening(server_, thread_, error);
}

void metrics_http::stop() {
  if (server_)
    server_->stop();
  if (thread_.joinable())
    thread_.join();
}

}  // namespace proctor
