#include "actors/console/console_http.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <httplib.h>
#include <spdlog/spdlog.h>

#include "actors/base/audit.hpp"
#include "actors/console/api_internal.hpp"
#include "actors/console/console_api.hpp"
#include "actors/console/embedded_files.hpp"
#include "actors/http/http_serve.hpp"
#include "actors/wire/wall_clock.hpp"

namespace proctor {

namespace {

/// Threads serving requests: long-polls hold one each (at most max_waits of them), the
/// others are for the console's pages and quick calls.
constexpr size_t min_threads = 8;

std::string content_type(std::string_view name) {
  auto ends = [name](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html"))
    return "text/html; charset=utf-8";
  if (ends(".js"))
    return "text/javascript; charset=utf-8";
  if (ends(".css"))
    return "text/css; charset=utf-8";
  if (ends(".svg"))
    return "image/svg+xml";
  return "application/octet-stream";
}

/// Headers every answer carries: nothing is sniffed, framed or sent elsewhere, and the
/// pages run only their own scripts and styles.
void secure(httplib::Response& res) {
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; "
                 "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
}

void serve_file(const httplib::Request& req, httplib::Response& res) {
  if (req.method != "GET" && req.method != "HEAD") {
    res.status = 405;
    res.set_header("Allow", "GET");
    res.set_content("405 method not allowed\n", "text/plain; charset=utf-8");
    return;
  }
  std::string_view name = req.path;
  if (name == "/")
    name = "/index.html";
  name.remove_prefix(1);
  for (const auto& f : console_files())
    if (f.name == name) {
      res.set_content(f.data.data(), f.data.size(), content_type(f.name).c_str());
      res.set_header("Cache-Control", "no-cache");
      return;
    }
  res.status = 404;
  res.set_content("404 not found: " + req.path + "\n", "text/plain; charset=utf-8");
}

}  // namespace

console_http::console_http(caf::actor_system& sys, caf::actor executor, console_http_options opts)
    : sys_(sys), executor_(std::move(executor)), opts_(std::move(opts)) {}

console_http::~console_http() {
  stop();
}

uint16_t console_http::start(const std::string& host, uint16_t port, std::string* error) {
  server_ = std::make_unique<httplib::Server>();
  const size_t max_body_bytes = 2 * opts_.max_args_bytes + 64 * 1024;
  server_->set_payload_max_length(max_body_bytes);
  const auto threads = min_threads + static_cast<size_t>(std::max(opts_.max_waits, 0));
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  bind_exclusively(*server_);
  auto answer = [this](const httplib::Request& req, std::string body, httplib::Response& res) {
    secure(res);
    if (!is_api_path(req.path))
      return serve_file(req, res);
    console_request cr;
    cr.method = req.method;
    cr.path = req.path;
    cr.params = req.params;
    cr.body = std::move(body);
    auto policy = opts_.policy ? opts_.policy->current.load() : nullptr;
    auto who = http_caller(req.get_header_value("Authorization"), opts_.token, policy.get(),
                           opts_.read_token_required, &cr.auth);
    if (who.granted == role::none) {  // --http-read-token-required, and no token that does
      auto refused = api_detail::check_change_allowed(cr);
      auto reply = refused ? std::move(*refused)
                           : console_error(403, "PERMISSION_DENIED", "this token has no role");
      res.status = reply.status;
      for (auto& [k, v] : reply.headers)
        res.set_header(k.c_str(), v);
      res.set_content(reply.body, reply.content_type.c_str());
      return;
    }
    auto ask = [this, who, from = "http " + req.remote_addr](const pb::Request& asked) {
      // The same authoriser as the client port's (actors/base/authoriser.hpp): a refusal is
      // the node's PERMISSION_DENIED, a 403.
      if (auto why = authorise(who, asked); !why.empty()) {
        if (opts_.refused)
          ++*opts_.refused;
        executor_answer refused;
        refused.response.emplace();
        refused.response->set_code(pb::Response::PERMISSION_DENIED);
        refused.response->set_error(why);
        return refused;
      }
      // Who asked, for the node's audit (actors/base/audit.hpp), and the types its caller is
      // limited to, for the executor (authoriser.hpp): this door says both, on a copy of the
      // requests audited only (a read, or a submit's args, is not copied for nothing; every
      // act checked against types is audited).
      std::optional<pb::Request> stamped;
      if (asked.has_actor() || audited(asked, true) || !asked.only_types().empty()) {
        stamped = asked;
        set_actor(*stamped, who, from, true, false);
        stamp_types(*stamped, who, false);
      }
      const pb::Request& r = stamped ? *stamped : asked;
      auto bound = opts_.node_timeout;
      if (r.has_wait())
        bound += std::chrono::milliseconds{r.wait().timeout_ms()};
      if (r.has_task())
        bound += std::chrono::milliseconds{r.task().wait_ms()};
      return ask_executor(sys_, executor_, r, bound);
    };
    console_api_options api;
    api.max_args_bytes = opts_.max_args_bytes;
    api.max_wait = opts_.max_wait;
    api.waits = &waits_;
    api.max_waits = opts_.max_waits;
    auto reply = handle_console_api(cr, ask, wall_ms(), api);
    res.status = reply.status;
    for (auto& [k, v] : reply.headers)
      res.set_header(k.c_str(), v);
    res.set_header("Cache-Control", "no-store");
    res.set_content(reply.body, reply.content_type.c_str());
    if (req.method != "GET" && req.method != "HEAD") {
      // Changes made through the console are an operator's acts: logged like the CLI's are
      // by the executor, with where they came from.
      if (reply.status < 400)
        spdlog::info("console: {} {} from {}: done", req.method, req.path, req.remote_addr);
      else
        spdlog::warn("console: {} {} from {}: {} {}", req.method, req.path, req.remote_addr,
                     reply.status, reply.body);
    }
  };
  auto handle = [answer](const httplib::Request& req, httplib::Response& res) {
    answer(req, req.body, res);
  };
  // Requests that may carry a body read it here, not in cpp-httplib 0.11: it takes a request
  // with neither Content-Length nor chunked encoding (`curl -X POST .../abort`) to have a
  // body that runs to the end of the connection, and answers an empty 400 once it times out,
  // whereas HTTP/1.1 (RFC 9112, 6.3) says such a request has no body.
  auto handle_body = [answer, max_body_bytes](const httplib::Request& req, httplib::Response& res,
                                              const httplib::ContentReader& read) {
    std::string body;
    if (req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
      // A Content-Length past the bound is refused unread (cpp-httplib's reader then calls
      // nothing and reports failure: the handler must not take that for an empty body).
      bool too_large =
        std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > max_body_bytes;
      bool read_all = !too_large && read([&](const char* data, size_t n) {
        if (body.size() + n > max_body_bytes) {
          too_large = true;
          return false;
        }
        body.append(data, n);
        return true;
      });
      if (!read_all) {
        secure(res);
        auto r = too_large
                   ? console_error(413, "PAYLOAD_TOO_LARGE",
                                   "the body exceeds " + std::to_string(max_body_bytes) + " bytes")
                   : console_error(400, "BAD_REQUEST", "the body could not be read");
        res.status = r.status;
        res.set_content(r.body, "application/json; charset=utf-8");
        res.set_header("Connection", "close");  // what is left of the body is not read
        return;
      }
    }
    answer(req, std::move(body), res);
  };
  server_->Get(".*", handle);
  server_->Post(".*", handle_body);
  server_->Put(".*", handle_body);
  server_->Delete(".*", handle);
  server_->Patch(".*", handle_body);
  server_->set_exception_handler(
    [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      spdlog::error("console: {} {}: {}", req.method, req.path, what);
      auto r = console_error(500, "INTERNAL", what);
      res.status = r.status;
      res.set_content(r.body, "application/json; charset=utf-8");
    });
  int bound = 0;
  if (port == 0)
    bound = server_->bind_to_any_port(host.c_str());
  else
    bound = server_->bind_to_port(host.c_str(), port) ? port : -1;
  if (bound <= 0) {
    *error = "cannot bind " + host + ":" + std::to_string(port)
             + " (address in use, or not an address of this host)";
    server_.reset();
    return 0;
  }
  if (!start_listening(server_, thread_, error))
    return 0;
  bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
  if (!loopback)
    spdlog::warn("web console on {}, not a loopback address: it is plain HTTP, so its pages, "
                 "its API and the token of every change cross the network unencrypted",
                 host);
  spdlog::info("web console on http://{}:{}/{}", host, bound,
               opts_.token.empty() ? " (read-only: no --http-token)" : "");
  return static_cast<uint16_t>(bound);
}

void console_http::stop() {
  if (server_)
    server_->stop();
  if (thread_.joinable())
    thread_.join();
}

}  // namespace proctor
