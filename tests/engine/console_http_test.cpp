// The web console over real HTTP against a node in this process: its pages come from the
// binary, its API answers what the node holds, changes need the token, and an abort from
// the console rolls the tree back as `proctor abort` does.
#include "actors/console/console_http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/http/ask_executor.hpp"
#include "actors/node/node.hpp"
#include "actors/wire/json/status_json.hpp"
#include "procedures/demo.hpp"

namespace proctor {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class console_http_test : public ::testing::Test {
protected:
  void SetUp() override {
    spdlog::set_level(spdlog::level::warn);
    char tmpl[] = "/tmp/proctor-console-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    register_demo_procedures(types_);
    tune_actor_system(cfg_);
    sys_ = std::make_unique<caf::actor_system>(cfg_);
    node_ = std::make_unique<node>(*sys_, types_);
    node_options o;
    o.data_dir = dir_ + "/data";
    o.workers = 2;
    auto r = node_->start(o);
    ASSERT_TRUE(r) << sys_->render(r.error());
  }

  void TearDown() override {
    if (console_)
      console_->stop();
    console_.reset();
    if (node_)
      node_->stop();
    node_.reset();
    sys_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  /// Serves the console on a free port; a client of it.
  httplib::Client serve(const std::string& token) {
    console_http_options o;
    o.token = token;
    o.node_timeout = 10s;
    console_ = std::make_unique<console_http>(*sys_, node_->executor(), o);
    std::string err;
    port_ = console_->start("127.0.0.1", 0, &err);
    EXPECT_NE(port_, 0) << err;
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(5s);
    c.set_read_timeout(20s);
    return c;
  }

  /// Submits through the executor, as the CLI would.
  uint64_t submit(const std::string& type, const std::string& args) {
    pb::Request req;
    req.mutable_submit()->set_type(type);
    req.mutable_submit()->set_args_json(args);
    req.mutable_submit()->set_nonce("t-" + args);
    auto a = ask_executor(*sys_, node_->executor(), req, 10s);
    EXPECT_TRUE(a.response) << a.failure;
    return a.response ? a.response->id() : 0;
  }

  pb::ProcStatus status(uint64_t id) {
    pb::Request req;
    req.mutable_status()->set_id(id);
    auto a = ask_executor(*sys_, node_->executor(), req, 10s);
    return a.response ? a.response->status() : pb::ProcStatus{};
  }

  template <class Pred>
  bool eventually(Pred p, std::chrono::milliseconds limit = 30s) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (p())
        return true;
      std::this_thread::sleep_for(20ms);
    }
    return p();
  }

  std::string dir_;
  registry types_;
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<node> node_;
  std::unique_ptr<console_http> console_;
  uint16_t port_ = 0;
};

TEST_F(console_http_test, serves_its_pages_from_the_binary) {
  auto c = serve("");
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<script type=\"module\" src=\"console.js\">"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  for (auto path : {"/console.js", "/views.js", "/charts.js", "/console.css", "/favicon.svg"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_FALSE(r->body.empty()) << path;
  }
  auto missing = c.Get("/nothing.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST_F(console_http_test, the_api_answers_json_with_clear_errors) {
  auto c = serve("t0ken");
  auto id = submit("demo.wait_event", R"({"key":"console-k"})");
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::WAITING; }));

  auto list = c.Get("/api/procs?state=WAITING&type=demo.wait_event");
  ASSERT_TRUE(list);
  EXPECT_EQ(list->status, 200);
  EXPECT_EQ(list->get_header_value("Content-Type"), "application/json; charset=utf-8");
  auto procs = json::parse(list->body);
  ASSERT_EQ(procs.size(), 1u) << list->body;
  EXPECT_EQ(procs[0]["id"], id);
  EXPECT_EQ(procs[0]["waiting_for"], "event console-k");
  EXPECT_EQ(json::parse(c.Get("/api/procs?type=demo.ledger")->body).size(), 0u);

  auto one = c.Get("/api/procs/" + std::to_string(id));
  EXPECT_EQ(one->body, status_to_json(status(id)));
  auto tree = json::parse(c.Get("/api/trees/" + std::to_string(id))->body);
  EXPECT_EQ(tree["state"], "WAITING");
  EXPECT_EQ(tree["total"], 0);
  auto hist = json::parse(c.Get("/api/procs/" + std::to_string(id) + "/history")->body);
  EXPECT_EQ(hist["status"]["id"], id);
  ASSERT_FALSE(hist["entries"].empty());
  EXPECT_EQ(hist["entries"][0]["kind"], "submitted");
  EXPECT_TRUE(json::parse(c.Get("/api/locks")->body).is_array());
  auto metrics = json::parse(c.Get("/api/metrics")->body);
  EXPECT_GE(metrics["waiting"].get<double>(), 0);  // a passivated root may not count
  EXPECT_GT(metrics["steps_total"].get<double>(), 0);

  auto bad = c.Get("/api/procs/abc");
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["code"], "BAD_REQUEST");
  auto unknown = c.Get("/api/procs/987654");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(json::parse(unknown->body)["code"], "NOT_FOUND");
  EXPECT_EQ(c.Get("/api/nope")->status, 404);
  EXPECT_EQ(c.Delete("/api/procs/1")->status, 405);
}

TEST_F(console_http_test, an_abort_needs_the_token_and_rolls_the_tree_back) {
  auto c = serve("t0ken");
  auto id = submit("demo.wait_event", R"({"key":"abort-k"})");
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::WAITING; }));
  auto path = "/api/procs/" + std::to_string(id) + "/abort";

  auto none = c.Post(path, "", "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  auto wrong = c.Post(path, {{"Authorization", "Bearer t0kem"}}, "", "application/json");
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(json::parse(wrong->body)["error"], "wrong token");
  EXPECT_EQ(status(id).state(), pb::WAITING);

  auto ok = c.Post(path, {{"Authorization", "Bearer t0ken"}}, "", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(json::parse(ok->body)["accepted"], true);
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::ROLLEDBACK; }))
    << status_to_json(status(id));
  auto again = c.Post(path, {{"Authorization", "Bearer t0ken"}}, "", "application/json");
  EXPECT_EQ(again->status, 409) << again->body;
  auto gone =
    c.Post("/api/procs/987654/bypass", {{"Authorization", "Bearer t0ken"}}, "", "application/json");
  EXPECT_EQ(gone->status, 404) << gone->body;
}

/// Sends `request` as it is over a new connection to 127.0.0.1:`port` and returns the whole
/// response (the request asks the server to close; 10 s at most).
std::string raw_http(uint16_t port, const std::string& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return "socket failed";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0
      && ::send(fd, request.data(), request.size(), MSG_NOSIGNAL)
           == static_cast<ssize_t>(request.size())) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
      out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// `curl -X POST .../abort` sends neither a body nor Content-Length; HTTP/1.1 says such a
// request has no body. cpp-httplib 0.11 waited for one to the end of the connection and
// answered an empty 400, whatever the token.
TEST_F(console_http_test, a_post_without_a_body_or_its_length_is_answered) {
  serve("t0ken");
  auto id = submit("demo.wait_event", R"({"key":"bodiless-k"})");
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::WAITING; }));
  auto post = [&](const std::string& auth) {
    return raw_http(port_, "POST /api/procs/" + std::to_string(id)
                             + "/abort HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + auth
                             + "\r\n");
  };
  auto refused = post("");
  EXPECT_EQ(refused.rfind("HTTP/1.1 401", 0), 0u) << refused;
  EXPECT_NE(refused.find("\"code\""), std::string::npos) << refused;
  auto ok = post("Authorization: Bearer t0ken\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.1 200", 0), 0u) << ok;
  EXPECT_NE(ok.find("\"accepted\":true"), std::string::npos) << ok;
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::ROLLEDBACK; }))
    << status_to_json(status(id));
}

TEST_F(console_http_test, a_bypass_of_a_procedure_not_stuck_needs_force) {
  auto c = serve("t0ken");
  auto id = submit("demo.wait_event", R"({"key":"bypass-k"})");
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::WAITING; }));
  auto path = "/api/procs/" + std::to_string(id) + "/bypass";
  httplib::Headers auth{{"Authorization", "Bearer t0ken"}};

  auto refused = c.Post(path, auth, "", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 409) << refused->body;
  EXPECT_EQ(json::parse(refused->body)["code"], "REFUSED");
  EXPECT_EQ(status(id).state(), pb::WAITING);

  auto forced = c.Post(path, auth, R"({"force":true})", "application/json");
  ASSERT_TRUE(forced);
  EXPECT_EQ(forced->status, 200) << forced->body;
  EXPECT_EQ(json::parse(forced->body)["state"], "SUCCESS");
  // The executor's view of the procedure catches up with the durable bypass a moment later.
  ASSERT_TRUE(eventually([&] { return status(id).state() == pb::SUCCESS; }));
  auto tree = json::parse(c.Get("/api/trees/" + std::to_string(id))->body);
  EXPECT_EQ(tree["state"], "SUCCESS");
  EXPECT_EQ(tree["bypassed"], true);
  auto again = c.Post(path, auth, R"({"force":true})", "application/json");
  EXPECT_EQ(again->status, 409) << again->body;
}

TEST_F(console_http_test, without_a_token_the_console_is_read_only) {
  auto c = serve("");
  auto id = submit("demo.wait_event", R"({"key":"ro-k"})");
  auto info = json::parse(c.Get("/api/console")->body);
  EXPECT_TRUE(info["read_only"].get<bool>());
  auto r = c.Post("/api/procs/" + std::to_string(id) + "/bypass?force=true",
                  {{"Authorization", "Bearer anything"}}, "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(json::parse(r->body)["code"], "READ_ONLY");
  EXPECT_FALSE(status(id).bypassed());
}

TEST_F(console_http_test, a_port_in_use_is_a_clear_error) {
  serve("");
  console_http second{*sys_, node_->executor(), {}};
  std::string err;
  EXPECT_EQ(second.start("127.0.0.1", port_, &err), 0);
  EXPECT_NE(err.find("cannot bind"), std::string::npos) << err;
}

}  // namespace
}  // namespace proctor
