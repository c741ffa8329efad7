#include "actors/http/metrics_http.hpp"

#include <httplib.h>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <proctor/wire.pb.h>

#include "actors/base/authoriser.hpp"
#include "actors/base/errors.hpp"
#include "actors/base/log_rate.hpp"
#include "actors/base/rpc.hpp"
#include "actors/http/http_serve.hpp"
#include "tls/cert_identity.hpp"

namespace proctor {

namespace {

/// Each new connection takes the context of the TLS files in use now (a reload replaces
/// it): its certificate, and the CA its client's certificate is checked against.
int take_current_context(SSL* ssl, int* /*alert*/, void* arg) {
  auto* slot = static_cast<tls_context_slot*>(arg);
  if (auto ctx = slot->current.load())
    SSL_set_SSL_CTX(ssl, ctx.get());
  return SSL_CLIENT_HELLO_SUCCESS;
}

/// "" if the scraper on `req`'s connection may read the metrics; else why not.
std::string refusal(const httplib::Request& req, const metrics_tls& tls) {
  cert_identity id;
  std::string why;
  if (const X509* cert = req.ssl != nullptr ? SSL_get0_peer_certificate(req.ssl) : nullptr)
    id = identity_of(cert, &why);
  auto policy = tls.policy ? tls.policy->current.load() : nullptr;
  pb::Request metrics;
  metrics.mutable_metrics();
  return authorise(caller::with_certificate(id, policy.get()), metrics);
}

}  // namespace

metrics_http::metrics_http(caf::actor_system& sys, caf::actor executor)
    : sys_(sys), executor_(std::move(executor)) {}

metrics_http::~metrics_http() {
  stop();
}

bool metrics_http::start(const std::string& host, uint16_t port, std::string* error,
                         const metrics_tls* tls) {
  if (tls != nullptr) {
    auto s = std::make_unique<httplib::SSLServer>(tls->files.cert.c_str(), tls->files.key.c_str(),
                                                  tls->files.ca.c_str());
    if (!s->is_valid()) {
      *error = "cannot serve HTTPS with --tls-cert " + tls->files.cert + " and --tls-key "
               + tls->files.key;
      return false;
    }
    if (tls->context) {
      context_ = tls->context;
      SSL_CTX_set_client_hello_cb(s->ssl_context(), take_current_context, context_.get());
    }
    server_ = std::move(s);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  bind_exclusively(*server_);
  std::optional<metrics_tls> checked;
  if (tls != nullptr)
    checked = *tls;
  server_->Get("/metrics", [this, checked](const httplib::Request& hreq, httplib::Response& res) {
    if (checked) {
      if (auto why = refusal(hreq, *checked); !why.empty()) {
        auto n = checked->refused ? ++*checked->refused : 1;
        if (log_nth(n))
          spdlog::warn("metrics: refused a scrape from {}: {} ({} refused so far; logged at a "
                       "falling rate)",
                       hreq.remote_addr, why, n);
        res.status = 403;
        res.set_content(why + "\n", "text/plain");
        return;
      }
    }
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
