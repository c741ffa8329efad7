// Time zones for recurring schedules (docs/flow-control.md, "Recurring schedules"): a cron's
// fields are read in a schedule's zone, UTC or an IANA zone ("Europe/Berlin") of the
// system's time zone database (/usr/share/zoneinfo, Debian's tzdata, read through Howard
// Hinnant's date library). A zone maps a local wall-clock time to the one instant a schedule
// fires at it:
//   - a local time that happens once fires at that instant;
//   - a local time that does not happen (in a spring-forward gap: 02:30 on the day clocks go
//     from 02:00 to 03:00) fires at the first instant after the gap (03:00 new time), as Vixie
//     cron does; every local time of one gap fires at that same instant, so once;
//   - a local time that happens twice (in a fall-back overlap: 01:30 on the day clocks go
//     from 02:00 back to 01:00) fires at its first occurrence only.
// UTC (the names "", "UTC" and "Etc/UTC", and a default-constructed time_zone) needs no
// database: its local time is UTC time, and cron_next takes its own fast path for it.
// Times here are whole seconds since the epoch: UTC seconds, or "local seconds" (a local
// wall-clock time counted as if it were UTC, the form cron_matches and cron_next read).
// A limit of the database reader (libdate-tz built with USE_OS_TZDB): it ignores the rule a
// zone file gives for times after its last listed change (tzdata lists them up to 2037), so
// later times keep that change's offset (standard time in a zone with daylight saving).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace date {
class time_zone;
}  // namespace date

namespace proctor::calendar {

struct zone_lookup;

/// UTC, or a zone of the system's database. Cheap to copy; the database outlives it.
class time_zone {
public:
  /// UTC.
  time_zone() = default;

  /// True for UTC (no database involved).
  bool is_utc() const { return tz_ == nullptr; }

  /// "UTC", or the zone's IANA name.
  std::string_view name() const;

  /// The local wall-clock time at UTC second `utc_s`.
  int64_t local_of(int64_t utc_s) const;

  /// The UTC second local second `local_s` fires at, by the rules above.
  int64_t fire_instant(int64_t local_s) const;

  /// The first local second whose fire instant is after UTC second `utc_s`: the local time
  /// of `utc_s` plus one, or, if `utc_s` is in the second pass of a fall-back overlap, the
  /// first local second after the overlap (the overlap's times fired on its first pass).
  int64_t first_local_after(int64_t utc_s) const;

private:
  friend zone_lookup find_zone(std::string_view name);
  explicit time_zone(const date::time_zone* tz) : tz_(tz) {}

  const date::time_zone* tz_ = nullptr;
};

/// The result of find_zone: a zone, or why the name is not one (one line).
struct zone_lookup {
  std::optional<time_zone> zone;
  std::string error;
};

/// The zone named `name`: "", "UTC" and "Etc/UTC" are UTC; anything else must be an IANA
/// name in the system's database, else the error reads "time zone 'Mars/Base': unknown (an
/// IANA name such as Europe/Berlin, or UTC)". Loads the database on first use (thread-safe).
zone_lookup find_zone(std::string_view name);

}  // namespace proctor::calendar
