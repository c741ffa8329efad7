// proctord's web console options (docs/web-console.md) on a real process: the token from
// a file, mistakes on the command line refused with exit 64, and a change through the API
// that the CLI then sees. The page itself is tested in a browser (console_browser_test.py).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "tests/process/process_harness.hpp"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using proctor::test::bin_path;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::field;
using proctor::test::free_port;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::run_program;
using proctor::test::state_of;
using proctor::test::temp_dir;

TEST(console_process, command_line_mistakes_are_refused) {
  temp_dir dir;
  auto data = (dir.path() / "data").string();
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"--data-dir", data, "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_program(bin_path("proctord"), args, 30s);
  };
  auto no_http = run({"--http-token", "abc"});
  EXPECT_EQ(no_http.exit_code, 64) << describe(no_http);
  EXPECT_NE(no_http.err.find("need --http"), std::string::npos) << describe(no_http);
  auto both = run({"--http", "0", "--http-token", "a", "--http-token-file", "/x"});
  EXPECT_EQ(both.exit_code, 64) << describe(both);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << describe(both);
  auto unreadable = run({"--http", "0", "--http-token-file", "/nonexistent/token"});
  EXPECT_EQ(unreadable.exit_code, 64) << describe(unreadable);
  EXPECT_NE(unreadable.err.find("cannot read --http-token-file"), std::string::npos);
  auto bad = run({"--http", "127.0.0.1:http"});
  EXPECT_EQ(bad.exit_code, 64) << describe(bad);
  EXPECT_NE(bad.err.find("--http wants HOST:PORT"), std::string::npos) << describe(bad);
}

TEST(console_process, an_abort_through_the_api_is_what_the_cli_sees) {
  temp_dir dir;
  auto token_file = dir.path() / "token";
  std::ofstream(token_file) << "file-t0ken\n";
  uint16_t http_port = free_port();
  node n{dir.path() / "data",
         0,
         {"--http", std::to_string(http_port), "--http-token-file", token_file.string()}};
  ASSERT_TRUE(n.start()) << n.log_tail();
  auto r = n.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"proc-k"})"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  auto id = std::to_string(parse_id(r.out).value_or(0));
  ASSERT_TRUE(eventually(
    [&] {
      auto v = parse_json(n.ctl({"status", id}, 10s).out);
      return v && field(*v, "waiting_for").string_value() == "event proc-k";
    },
    30s))
    << n.log_tail();

  httplib::Client c("127.0.0.1", http_port);  // a bare port: 127.0.0.1
  c.set_connection_timeout(5s);
  c.set_read_timeout(20s);
  auto status = c.Get("/api/procs/" + id);
  ASSERT_TRUE(status) << n.log_tail();
  EXPECT_EQ(status->status, 200);
  EXPECT_EQ(status->body + "\n", n.ctl({"status", id, "--json"}).out);

  auto refused = c.Post("/api/procs/" + id + "/abort", {{"Authorization", "Bearer nope"}}, "",
                        "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  auto ok = c.Post("/api/procs/" + id + "/abort", {{"Authorization", "Bearer file-t0ken"}}, "",
                   "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto w = n.ctl({"wait", id, "--timeout-s", "60"});
  EXPECT_EQ(w.exit_code, 1) << describe(w);
  auto v = parse_json(w.out);
  ASSERT_TRUE(v) << describe(w);
  EXPECT_EQ(state_of(*v), "ROLLEDBACK");
  EXPECT_NE(n.log_tail(50).find("console: POST /api/procs/" + id + "/abort"), std::string::npos)
    << n.log_tail(50);
}

}  // namespace
