// Cron expressions (docs/flow-control.md, "Recurring schedules"): parsed once, then asked for
// the first fire time after a given instant. No dependency on the rest of Proctor.
//
// Supported: five fields (minute hour day-of-month month day-of-week), or six with a leading
// seconds field; in each field `*`, a value, a range `a-b`, a step `*/n`, `a-b/n` or `a/n`
// (a to the field's end), and lists of these separated by commas; month names jan..dec and
// day names sun..sat (any case); day of week 0-7 with 0 and 7 both Sunday; the macros
// @yearly (@annually), @monthly, @weekly, @daily (@midnight) and @hourly. Days follow the
// usual (Vixie) rule: when both day fields are restricted (neither begins with `*`) a day
// matches if either matches, else both must. Not supported: `L`, `W`, `#`, `?`, @reboot.
// Times are milliseconds since the epoch. cron_matches and the two-argument cron_next read
// the fields in UTC; the cron_next with a time_zone (calendar/zone.hpp) reads them in that
// zone's local wall-clock time, with zone.hpp's rules for the local times a daylight-saving
// change skips or repeats, and takes the UTC path itself for UTC.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "calendar/zone.hpp"

namespace proctor::calendar {

/// A parsed cron expression.
struct cron_spec {
  std::bitset<60> seconds;  ///< only bit 0 unless the expression has a seconds field
  std::bitset<60> minutes;
  std::bitset<24> hours;
  std::bitset<32> days;        ///< 1..31
  std::bitset<13> months;      ///< 1..12
  std::bitset<7> weekdays;     ///< 0..6, Sunday 0
  bool days_star = false;      ///< the day-of-month field began with `*`
  bool weekdays_star = false;  ///< the day-of-week field began with `*`
  bool has_seconds = false;    ///< six fields
};

/// The result of parse_cron: a spec, or why the text is not one (one line, naming the field).
struct cron_parse {
  std::optional<cron_spec> spec;
  std::string error;
};

/// Parses `text` (at most 1024 characters).
cron_parse parse_cron(std::string_view text);

/// True if the second `utc_ms` falls in (its milliseconds ignored).
bool cron_matches(const cron_spec& s, int64_t utc_ms);

/// The first fire time strictly after `after_ms` (whole seconds), or nullopt if there is none
/// within the next 8 years (e.g. "0 0 30 2 *": February 30th).
std::optional<int64_t> cron_next(const cron_spec& s, int64_t after_ms);

/// The first fire time strictly after `after_ms` (UTC, whole seconds) of `s` read in zone
/// `z`: the fields match a local wall-clock time, which fires at z.fire_instant (a time in a
/// spring-forward gap at the gap's end, once; a time in a fall-back overlap at its first
/// occurrence only). For UTC the same as cron_next(s, after_ms). Nullopt if no local time
/// matches within the next 8 years.
std::optional<int64_t> cron_next(const cron_spec& s, const time_zone& z, int64_t after_ms);

}  // namespace proctor::calendar
