// The metrics Prometheus accepts (issue 34, item 4; docs/architecture.md#metrics): a live
// node of a two-node cluster, after procedures that succeeded, rolled back and wait, serves
// /metrics that `promtool check metrics` finds nothing to complain about. Skipped (with the
// reason) where promtool is not installed (Debian `prometheus`, scripts/setup.sh).
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
using proctor::test::describe;
using proctor::test::eventually;
using proctor::test::free_port;
using proctor::test::node;
using proctor::test::parse_id;
using proctor::test::run_program;
using proctor::test::temp_dir;

fs::path promtool_path() {
  for (const char* p : {"/usr/bin/promtool", "/usr/local/bin/promtool"})
    if (fs::exists(p))
      return p;
  return {};
}

std::string scrape(uint16_t port) {
  httplib::Client c{"127.0.0.1", port};
  c.set_read_timeout(10, 0);
  auto r = c.Get("/metrics");
  return r && r->status == 200 ? r->body : std::string{};
}

/// The sample line of `series` (a name with its labels, as the text writes it), or "".
std::string sample(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos)
    return {};
  auto end = text.find('\n', at + 1);
  return text.substr(at + 1, end - at - 1);
}

TEST(metrics_promtool, a_live_nodes_metrics_pass_promtool_check_metrics) {
  auto promtool = promtool_path();
  if (promtool.empty())
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus; scripts/setup.sh)";
  temp_dir dir;
  auto ledger = dir.path() / "ledger";
  fs::create_directories(ledger);
  uint16_t pa = free_port(), pb = free_port(), metrics_port = free_port();
  auto at = [](uint16_t p) { return "127.0.0.1:" + std::to_string(p); };
  node a{
    dir.path() / "a", pa, {"--name", "a", "--peers", "b=" + at(pb), "--metrics", at(metrics_port)}};
  node b{dir.path() / "b", pb, {"--name", "b", "--peers", "a=" + at(pa)}};
  ASSERT_TRUE(a.start()) << a.log_tail();
  ASSERT_TRUE(b.start()) << b.log_tail();
  // Every kind of sample: a success, a rollback, one waiting, a tree across both nodes.
  auto ledger_args = [&](const std::string& extra) {
    return R"({"steps":2,"ledger_dir":")" + ledger.string() + "\"" + extra + "}";
  };
  std::vector<uint64_t> ids;
  for (auto args : {ledger_args(""), ledger_args(R"(,"fail_at":1)"),
                    ledger_args(R"(,"children":2,"depth":1)")}) {
    auto r = a.ctl({"submit", "demo.ledger", "--args-json", args});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    ids.push_back(*parse_id(r.out));
  }
  ASSERT_EQ(a.ctl({"submit", "demo.wait_event", "--args-json", R"({"key":"never"})"}).exit_code, 0);
  for (auto id : ids)
    a.ctl({"wait", std::to_string(id), "--timeout-s", "60"}, 90s);

  std::string text;
  ASSERT_TRUE(eventually(
    [&] {
      text = scrape(metrics_port);
      return sample(text, R"(proctor_peer_up{peer="b"})") == R"(proctor_peer_up{peer="b"} 1)";
    },
    30s))
    << text;
  auto file = dir.path() / "metrics.txt";
  std::ofstream{file} << text;
  auto r = run_program(promtool, {"check", "metrics"}, 60s, file);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out + r.err, "") << describe(r);
  // The families an operator's dashboard and alerts use (docs/architecture.md#metrics).
  for (const char* series :
       {R"(proctor_peer_up{peer="b"})", R"(proctor_peer_rtt_seconds{peer="b"})",
        R"(proctor_peer_outbox_messages{peer="b"})", R"(proctor_peer_downs_total{peer="b"})",
        "proctor_journal_sync_seconds_count", "proctor_journal_sync_seconds_sum",
        R"(proctor_journal_sync_seconds_bucket{le="+Inf"})"})
    EXPECT_NE(sample(text, series), "") << series << " missing from:\n" << text;
  EXPECT_NE(text.find("\nproctor_build_info{"), std::string::npos) << text;
  EXPECT_NE(text.find("\nproctor_procedure_runtime_seconds_bucket{"), std::string::npos) << text;
  // b stopped: a counts it down.
  EXPECT_EQ(b.stop(), 0);
  EXPECT_TRUE(eventually(
    [&] { return sample(scrape(metrics_port), R"(proctor_peer_up{peer="b"})").ends_with(" 0"); },
    30s))
    << scrape(metrics_port);
  a.kill();
}

}  // namespace
