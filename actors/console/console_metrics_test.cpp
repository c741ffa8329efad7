// The console's metrics object: one meaning of failed (docs/metrics.md), the same as the
// Prometheus counters' sum.
#include "actors/console/console_metrics.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

TEST(console_metrics, failures_are_the_procedures_that_ended_failed_or_rolled_back) {
  auto j = nlohmann::json::parse(
    proctor::metrics_to_json("proctor_procedures_failed_total{type=\"a\"} 2\n"
                             "proctor_procedures_rolledback_total{type=\"a\"} 3\n"
                             "proctor_procedures_rolledback_total{type=\"b\"} 1\n"
                             "proctor_undo_failures_total 350\n"
                             "proctor_procedures_succeeded_total{type=\"a\"} 9\n",
                             1));
  EXPECT_EQ(j["failures_total"], 6);
  EXPECT_EQ(j["metrics"]["proctor_undo_failures_total"], 350);
}

}  // namespace
