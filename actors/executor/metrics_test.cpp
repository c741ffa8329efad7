#include "actors/executor/metrics.hpp"

#include <chrono>
#include <string>

#include <gtest/gtest.h>

namespace proctor {
namespace {

/// The line of `text` that starts with `prefix` followed by a space, without the prefix.
std::string value_of(const std::string& text, const std::string& prefix) {
  auto at = text.find("\n" + prefix + " ");
  if (at == std::string::npos)
    return "<missing>";
  auto begin = at + prefix.size() + 2;
  return text.substr(begin, text.find('\n', begin) - begin);
}

std::string render(const type_metrics& m, executor_gauges g = {}, journal_stats j = {}) {
  return m.render(step_scheduler_stats{}, j, g);
}

TEST(metrics, counts_per_type_and_the_runtime_histogram) {
  type_metrics m;
  m.submitted("demo.ledger");
  m.submitted("demo.ledger");
  m.ended("demo.ledger", proc_state::success, std::chrono::milliseconds{7});
  m.ended("demo.ledger", proc_state::rolledback, std::chrono::milliseconds{400'000});
  m.ended("demo.ledger", proc_state::failed);  // no runtime: not observed
  m.no_progress("demo.ledger");
  auto text = render(m);
  const std::string t = R"({type="demo.ledger"})";
  EXPECT_EQ(value_of(text, "proctor_procedures_submitted_total" + t), "2") << text;
  EXPECT_EQ(value_of(text, "proctor_procedures_succeeded_total" + t), "1");
  EXPECT_EQ(value_of(text, "proctor_procedures_failed_total" + t), "1");
  EXPECT_EQ(value_of(text, "proctor_procedures_rolledback_total" + t), "1");
  EXPECT_EQ(value_of(text, "proctor_procedures_no_progress_total" + t), "1");
  EXPECT_EQ(value_of(text, "proctor_procedure_runtime_seconds_count" + t), "2");
  EXPECT_EQ(value_of(text, "proctor_procedure_runtime_seconds_sum" + t), "400.007");
  const std::string b = R"(proctor_procedure_runtime_seconds_bucket{type="demo.ledger",le=)";
  EXPECT_EQ(value_of(text, b + R"("0.005"})"), "0");
  EXPECT_EQ(value_of(text, b + R"("0.01"})"), "1");
  EXPECT_EQ(value_of(text, b + R"("300"})"), "1");
  EXPECT_EQ(value_of(text, b + R"("+Inf"})"), "2");
  // A FAILED one retried that then succeeds is not counted a second time as an end.
  m.ended_after_retry("demo.ledger", proc_state::success);
  text = render(m);
  EXPECT_EQ(value_of(text, "proctor_procedures_succeeded_total" + t), "1") << text;
  EXPECT_EQ(value_of(text, "proctor_procedures_failed_total" + t), "1");
  EXPECT_EQ(
    value_of(text,
             R"(proctor_procedures_retry_outcomes_total{state="SUCCESS",type="demo.ledger"})"),
    "1");
  EXPECT_NE(text.find("# TYPE proctor_procedure_runtime_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("# HELP proctor_procedures_submitted_total Procedures submitted or "
                      "spawned.\n# TYPE proctor_procedures_submitted_total counter\n"),
            std::string::npos);
}

TEST(metrics, a_type_name_is_escaped_as_a_label_value) {
  type_metrics m;
  m.submitted("we\"ird\\type\n");
  auto text = render(m);
  EXPECT_EQ(value_of(text, R"(proctor_procedures_submitted_total{type="we\"ird\\type\n"})"), "1")
    << text;
}

TEST(metrics, gauges_and_node_counters_keep_their_digits) {
  type_metrics m;
  executor_gauges g;
  g.active_since_ms = 1'764'090'215'123;
  g.takeover_ms = 1500;
  g.undos = 3;
  g.retries = 4;
  g.resubmits = 5;
  journal_stats j;
  j.fsync_us_last = 1'234'567;
  j.records = 12'345'678'901;
  auto text = render(m, g, j);
  EXPECT_EQ(value_of(text, "proctor_active_since_seconds"), "1764090215.123") << text;
  EXPECT_EQ(value_of(text, "proctor_takeover_seconds"), "1.5");
  EXPECT_EQ(value_of(text, "proctor_journal_last_sync_seconds"), "1.234567");
  EXPECT_EQ(value_of(text, "proctor_journal_records_total"), "12345678901");
  EXPECT_EQ(value_of(text, "proctor_undos_total"), "3");
  EXPECT_NE(text.find("# TYPE proctor_undos_total counter\n"), std::string::npos);
  EXPECT_EQ(value_of(text, "proctor_retries_total"), "4");
  EXPECT_EQ(value_of(text, "proctor_resubmits_total"), "5");
  EXPECT_NE(text.find("# TYPE proctor_resubmits_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE proctor_queue_depth gauge\nproctor_queue_depth 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("# HELP proctor_journal_slow_writes_total Synced writes over 10 ms.\n"),
            std::string::npos);
}

TEST(metrics, schedules_are_labelled_by_name) {
  type_metrics m;
  executor_gauges g;
  g.schedules.push_back(schedule_sample{"nightly", 7, 0, 2, 3, 1'764'090'215'000, false});
  g.schedules.push_back(schedule_sample{"sweep", 1, 0, 0, 0, 0, true});
  auto text = render(m, g, {});
  EXPECT_EQ(value_of(text, "proctor_schedules"), "2") << text;
  EXPECT_EQ(value_of(text, R"(proctor_schedule_firings_total{schedule="nightly"})"), "7");
  EXPECT_EQ(value_of(text, R"(proctor_schedule_skipped_total{schedule="nightly"})"), "2");
  EXPECT_EQ(value_of(text, R"(proctor_schedule_missed_total{schedule="nightly"})"), "3");
  EXPECT_EQ(value_of(text, R"(proctor_schedule_next_fire_timestamp_seconds{schedule="nightly"})"),
            "1764090215");
  EXPECT_EQ(value_of(text, R"(proctor_schedule_paused{schedule="sweep"})"), "1");
  EXPECT_NE(text.find("# TYPE proctor_schedule_missed_total counter\n"), std::string::npos);
}

TEST(metrics, journal_syncs_are_a_histogram_in_seconds) {
  type_metrics m;
  journal_stats j;
  j.sync_buckets[0] = 4;   // up to 100 us
  j.sync_buckets[6] = 2;   // over 5 ms, up to 10 ms
  j.sync_buckets[12] = 1;  // over 1 s
  j.fsync_us_total = 1'500'000;
  auto text = render(m, {}, j);
  const std::string b = R"(proctor_journal_sync_seconds_bucket{le=)";
  EXPECT_EQ(value_of(text, b + R"("0.0001"})"), "4") << text;
  EXPECT_EQ(value_of(text, b + R"("0.005"})"), "4");
  EXPECT_EQ(value_of(text, b + R"("0.01"})"), "6");
  EXPECT_EQ(value_of(text, b + R"("1"})"), "6");
  EXPECT_EQ(value_of(text, b + R"("+Inf"})"), "7");
  EXPECT_EQ(value_of(text, "proctor_journal_sync_seconds_count"), "7");
  EXPECT_EQ(value_of(text, "proctor_journal_sync_seconds_sum"), "1.5");
  EXPECT_NE(text.find("# TYPE proctor_journal_sync_seconds histogram\n"), std::string::npos);
  EXPECT_EQ(text.find("_us"), std::string::npos) << "a unit that is not a base unit: " << text;
  EXPECT_EQ(text.find("_ms"), std::string::npos) << "a unit that is not a base unit: " << text;
}

TEST(metrics, each_peer_has_its_link_and_outbox_and_the_build_its_version) {
  type_metrics m;
  executor_gauges g;
  EXPECT_EQ(render(m, g).find("proctor_peer_up"), std::string::npos) << "no peers, no samples";
  g.peers = {peer_sample{"b", true, 1500, 3, 2}, peer_sample{"c", false, 0, 7, 1}};
  auto text = render(m, g);
  EXPECT_EQ(value_of(text, R"(proctor_peer_up{peer="b"})"), "1") << text;
  EXPECT_EQ(value_of(text, R"(proctor_peer_up{peer="c"})"), "0");
  EXPECT_EQ(value_of(text, R"(proctor_peer_rtt_seconds{peer="b"})"), "0.0015");
  EXPECT_EQ(value_of(text, R"(proctor_peer_outbox_messages{peer="c"})"), "7");
  EXPECT_EQ(value_of(text, R"(proctor_peer_downs_total{peer="b"})"), "2");
  EXPECT_NE(text.find("# TYPE proctor_peer_downs_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("\nproctor_build_info{version=\""), std::string::npos) << text;
}

TEST(metrics, the_process_has_the_families_every_prometheus_client_exposes) {
  type_metrics m;
  executor_gauges g;
  auto text = render(m, g);
  auto number = [&](const char* name) {
    auto v = value_of(text, name);
    EXPECT_NE(v, "<missing>") << text;
    return v == "<missing>" ? -1.0 : std::stod(v);
  };
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter\n"), std::string::npos);
  // Burn some CPU so that the counter cannot be 0 by accident of the clock tick.
  volatile uint64_t spin = 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  while (std::chrono::steady_clock::now() < until)
    spin = spin + 1;
  text = render(m, g);
  EXPECT_GT(number("process_cpu_seconds_total"), 0.0);
  EXPECT_GT(number("process_resident_memory_bytes"), 1e6);
  EXPECT_GE(number("process_virtual_memory_bytes"), number("process_resident_memory_bytes"));
  EXPECT_GE(number("process_threads"), 1.0);
  EXPECT_GE(number("process_open_fds"), 3.0);  // stdin, stdout, stderr at least
  EXPECT_GE(number("process_max_fds"), number("process_open_fds"));
  // Started this run: within the last hour, not in the future (to the clock tick).
  double now =
    std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  double start = number("process_start_time_seconds");
  EXPECT_LE(start, now + 1);
  EXPECT_GT(start, now - 3600);
}

}  // namespace
}  // namespace proctor
