// Internal: the executor's recurring schedules (executor_schedules.cpp: their changes;
// executor_schedule_firing.cpp: their firings; executor_schedules_cluster.cpp: the cluster
// group's schedules and who fires them; the three own this part).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>

#include <proctor/journal.pb.h>

#include "calendar/cron.hpp"

namespace proctor::exec_detail {

struct schedules_part {
  struct schedule_entry {
    uint64_t lsn = 0;          ///< of its last record (deleted when the next is written)
    pb::Schedule rec;          ///< as last journaled (a tombstone: rec.deleted())
    calendar::cron_spec cron;  ///< rec.cron() parsed
    calendar::time_zone zone;  ///< rec.zone() looked up: the cron's fields are its local time
    /// A cluster schedule (rec.from_cluster()): how far the owners of its slot decided it,
    /// as the group last said; fire times up to it are not this node's to decide.
    int64_t cluster_until = 0;
    int64_t reported_until = 0;  ///< the progress this node last proposed to the group
    /// It fired here at the last look (a cluster schedule whose slot this node holds): when
    /// that begins, its catch-up policy decides what came before.
    bool fires_here = false;
  };
  std::map<std::string, schedule_entry> by_name;  ///< by name
  /// The roots the schedules submitted that are in their recent runs, to their schedule.
  std::unordered_map<uint64_t, std::string> runs;
  /// Changes and firings of schedules, journaled one at a time in the order they came (each
  /// reads the schedule as the one before left it).
  std::deque<std::function<void()>> ops;
  bool busy = false;
  bool live = false;     ///< recovery's catch-up is done: ticks fire
  int64_t timer_ms = 0;  ///< the armed tick's deadline (0: none)
  /// The cluster group's schedules as last published (a ClusterState's bytes), and whether
  /// an operation to bring this node's records in line with them is queued.
  std::string cluster;
  bool reconcile_queued = false;
};

}  // namespace proctor::exec_detail
