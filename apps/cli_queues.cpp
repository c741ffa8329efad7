// `proctor queues [--json]`: the node's task queues for external workers (docs/workers.md).
#include <cstdio>
#include <iostream>
#include <memory>

#include "actors/wire/json/views_json.hpp"
#include "actors/wire/wall_clock.hpp"
#include "apps/cli_operators.hpp"

namespace proctor::cli {

namespace {

std::string queues_text(const google::protobuf::RepeatedPtrField<pb::QueueInfo>& xs) {
  if (xs.empty())
    return "no task queues (no task dispatched and no worker polled since the node started)\n";
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-32s %7s %7s %7s %9s %10s %9s %7s %9s\n", "QUEUE", "DEPTH",
                "LEASED", "POLLERS", "OLDEST", "DISPATCHED", "COMPLETED", "FAILED", "TIMED-OUT");
  out += line;
  const auto now = wall_ms();
  for (const auto& q : xs) {
    std::snprintf(
      line, sizeof line, "%-32s %7llu %7llu %7llu %9s %10llu %9llu %7llu %9llu\n", q.name().c_str(),
      static_cast<unsigned long long>(q.depth()), static_cast<unsigned long long>(q.leased()),
      static_cast<unsigned long long>(q.pollers()),
      q.depth() == 0 ? "-" : human_ms(q.oldest_age_ms()).c_str(),
      static_cast<unsigned long long>(q.dispatched()),
      static_cast<unsigned long long>(q.completed()), static_cast<unsigned long long>(q.failed()),
      static_cast<unsigned long long>(q.timed_out()));
    out += line;
    if (q.max_leased() > 0 || q.rate() > 0) {
      out += "    limits (proctor limits set queue:" + q.name() + "):";
      if (q.max_leased() > 0)
        out += " at most " + std::to_string(q.max_leased()) + " leased";
      if (q.rate() > 0)
        out += std::string(q.max_leased() > 0 ? "," : "") + " at most " + std::to_string(q.rate())
               + " per " + period_ms_text(q.per_ms());
      out += "; " + std::to_string(q.throttled()) + " poll(s) held back since the node started\n";
    }
    for (const auto& w : q.workers())
      out += "    worker " + w.worker() + ": last poll " + human_ms(now - w.at_ms()) + " ago\n";
  }
  return out;
}

}  // namespace

void add_queues_command(CLI::App& app, runner* run) {
  auto json = std::make_shared<bool>(false);
  auto* q = app.add_subcommand("queues", "Print the task queues external workers poll: depth, "
                                         "leases, pollers, totals and each worker's last poll");
  q->add_flag("--json", *json, "One JSON object");
  q->callback([json, run] {
    *run = [json](const caller& call) {
      pb::Request req;
      req.mutable_task()->set_op(pb::TaskRequest::QUEUES);
      auto got = ask(call, req);
      if (auto* rc = std::get_if<int>(&got))
        return *rc;
      const auto& qs = std::get<pb::Response>(got).task().queues();
      std::cout << (*json ? queues_to_json(qs) + "\n" : queues_text(qs));
      return exit_ok;
    };
  });
}

}  // namespace proctor::cli
