#include "calendar/zone.hpp"

#include <chrono>
#include <exception>

#include <date/tz.h>

#include "calendar/printable.hpp"

namespace proctor::calendar {

namespace {

int64_t count(date::sys_seconds t) {
  return t.time_since_epoch().count();
}

date::local_seconds local(int64_t local_s) {
  return date::local_seconds{std::chrono::seconds{local_s}};
}

/// IANA names are at most a few dozen characters: a longer one is quoted cut short.
constexpr size_t shown_bound = 64;
constexpr size_t name_bound = 255;

}  // namespace

std::string_view time_zone::name() const {
  return tz_ == nullptr ? std::string_view{"UTC"} : std::string_view{tz_->name()};
}

int64_t time_zone::local_of(int64_t utc_s) const {
  if (tz_ == nullptr)
    return utc_s;
  auto info = tz_->get_info(date::sys_seconds{std::chrono::seconds{utc_s}});
  return utc_s + info.offset.count();
}

int64_t time_zone::fire_instant(int64_t local_s) const {
  if (tz_ == nullptr)
    return local_s;
  auto li = tz_->get_info(local(local_s));
  if (li.result == date::local_info::nonexistent)
    return count(li.second.begin);           // the gap's end: the first instant after it
  return local_s - li.first.offset.count();  // once, or the first of two
}

int64_t time_zone::first_local_after(int64_t utc_s) const {
  int64_t l = local_of(utc_s);
  if (tz_ == nullptr)
    return l + 1;
  auto li = tz_->get_info(local(l));
  if (li.result == date::local_info::ambiguous && utc_s >= count(li.second.begin))
    return count(li.second.begin) + li.first.offset.count();  // the overlap's local end
  return l + 1;
}

zone_lookup find_zone(std::string_view name) {
  zone_lookup out;
  if (name.empty() || name == "UTC" || name == "Etc/UTC") {
    out.zone = time_zone{};
    return out;
  }
  auto quoted = "time zone '" + printable(name.substr(0, shown_bound))
                + (name.size() > shown_bound ? "...'" : "'");
  try {
    date::get_tzdb();
  } catch (const std::exception& e) {
    out.error = quoted + ": the time zone database could not be read (" + printable(e.what())
                + "; Debian's package tzdata installs it)";
    return out;
  }
  try {
    if (name.size() <= name_bound)
      out.zone = time_zone{date::locate_zone(name)};
  } catch (const std::exception&) {
    // locate_zone's only failure left: the name is not in the database.
  }
  if (!out.zone)
    out.error = quoted + ": unknown (an IANA name such as Europe/Berlin, or UTC)";
  return out;
}

}  // namespace proctor::calendar
