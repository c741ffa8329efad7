// The CLI tests' fixture (cli_test.cpp, cli_actions_test.cpp): a node in a temp dir with a
// ledger dir beside it, the one-line error contract, and a bare HTTP GET.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "actors/wire/json/status_json.hpp"
#include "tests/process/process_harness.hpp"

namespace proctor::test::cli_support {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using google::protobuf::Value;
using proctor::test::bin_path;
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::field;
using proctor::test::free_port;
using proctor::test::id_of;
using proctor::test::lines;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::parse_json;
using proctor::test::run_proctor;
using proctor::test::run_program;
using proctor::test::run_result;
using proctor::test::state_of;
using proctor::test::temp_dir;
using proctor::test::trim;
using clock_type = std::chrono::steady_clock;

/// Checks the contract for a command the node answered with an error: exit 1, nothing on
/// stdout, one line `error: …` on stderr.
inline void expect_one_line_error(const run_result& r, int code = 1) {
  EXPECT_EQ(r.exit_code, code) << describe(r);
  EXPECT_EQ(r.out, "") << describe(r);
  auto ls = lines(r.err);
  ASSERT_EQ(ls.size(), 1u) << describe(r);
  EXPECT_EQ(ls[0].rfind("error: ", 0), 0u) << ls[0];
}

/// A node in a temp dir with a ledger dir beside it.
struct fixture {
  temp_dir dir;
  fs::path ledger = dir.path() / "ledger";
  node n;
  explicit fixture(std::vector<std::string> extra = {})
      : n{dir.path() / "data", 0, std::move(extra)} {
    fs::create_directories(ledger);
  }
  std::string ledger_args(const std::string& extra = "") const {
    return R"({"steps":3,"ledger_dir":")" + ledger.string() + "\"" + extra + "}";
  }
  /// Submits and returns the id (0 after a failure, which is reported).
  uint64_t submit(const std::string& type, const std::string& args) {
    auto r = n.ctl({"submit", type, "--args-json", args}, 30s);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    auto id = parse_id(r.out);
    EXPECT_TRUE(id) << describe(r);
    return id.value_or(0);
  }
  std::optional<Value> status(uint64_t id) {
    auto r = n.ctl({"status", std::to_string(id), "--json"}, 10s);
    if (r.exit_code != 0)
      return std::nullopt;
    return parse_json(r.out);
  }
  /// True once procedure `id` is in `state` (polled for up to 30 s).
  bool reaches(uint64_t id, const std::string& state) {
    return eventually(
      [&] {
        auto s = status(id);
        return s && state_of(*s) == state;
      },
      30s, 20ms);
  }
};

/// HTTP GET of `path` on 127.0.0.1:`port`: the status code and the body; nullopt if no
/// complete answer came within `limit`.
inline std::optional<std::pair<int, std::string>> http_get(uint16_t port, const std::string& path,
                                                           std::chrono::milliseconds limit = 5s) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return std::nullopt;
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } guard{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return std::nullopt;
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  for (size_t sent = 0; sent < req.size();) {
    auto n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0)
      return std::nullopt;
    sent += static_cast<size_t>(n);
  }
  std::string resp;
  auto deadline = clock_type::now() + limit;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0)
      return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      continue;
    auto n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0)
      return std::nullopt;
    if (n == 0)
      break;
    resp.append(buf, static_cast<size_t>(n));
  }
  std::smatch m;
  if (!std::regex_search(resp, m, std::regex{R"(^HTTP/1\.[01] (\d{3}) )"}))
    return std::nullopt;
  auto body_at = resp.find("\r\n\r\n");
  if (body_at == std::string::npos)
    return std::nullopt;
  auto headers = resp.substr(0, body_at);
  auto body = resp.substr(body_at + 4);
  std::smatch cl;
  if (std::regex_search(headers, cl, std::regex{R"(\r\n[Cc]ontent-[Ll]ength: *(\d+))"}))
    if (body.size() != std::stoull(cl[1]))
      return std::nullopt;
  return std::pair{std::stoi(m[1]), body};
}

}  // namespace proctor::test::cli_support
