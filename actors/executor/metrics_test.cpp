#include "actors/executor/metrics.hpp"

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
  EXPECT_EQ(value_of(text, "proctor_procedure_runtime_ms_count" + t), "2");
  EXPECT_EQ(value_of(text, "proctor_procedure_runtime_ms_sum" + t), "400007");
  const std::string b = R"(proctor_procedure_runtime_ms_bucket{type="demo.ledger",le=)";
  EXPECT_EQ(value_of(text, b + R"("5"})"), "0");
  EXPECT_EQ(value_of(text, b + R"("10"})"), "1");
  EXPECT_EQ(value_of(text, b + R"("300000"})"), "1");
  EXPECT_EQ(value_of(text, b + R"("+Inf"})"), "2");
  EXPECT_NE(text.find("# TYPE proctor_procedure_runtime_ms histogram\n"), std::string::npos);
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
  journal_stats j;
  j.fsync_us_max = 1'234'567;
  j.records = 12'345'678'901;
  auto text = render(m, g, j);
  EXPECT_EQ(value_of(text, "proctor_active_since_seconds"), "1764090215.123") << text;
  EXPECT_EQ(value_of(text, "proctor_takeover_seconds"), "1.5");
  EXPECT_EQ(value_of(text, "proctor_journal_max_fsync_us"), "1234567");
  EXPECT_EQ(value_of(text, "proctor_journal_records_total"), "12345678901");
  EXPECT_EQ(value_of(text, "proctor_undos_total"), "3");
  EXPECT_NE(text.find("# TYPE proctor_undos_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE proctor_queue_depth gauge\nproctor_queue_depth 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("# HELP proctor_journal_slow_writes_total Synced writes over 10 ms.\n"),
            std::string::npos);
}

}  // namespace
}  // namespace proctor
