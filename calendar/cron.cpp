#include "calendar/cron.hpp"

#include <array>
#include <cctype>
#include <chrono>
#include <vector>

#include "calendar/printable.hpp"

namespace proctor::calendar {

namespace {

struct field_def {
  const char* name;
  int lo, hi;
  const char* const* names;  ///< names of lo..hi (nullptr: none)
  int names_base;
};

constexpr const char* month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr const char* day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

constexpr field_def second_f{"second", 0, 59, nullptr, 0};
constexpr field_def minute_f{"minute", 0, 59, nullptr, 0};
constexpr field_def hour_f{"hour", 0, 23, nullptr, 0};
constexpr field_def day_f{"day-of-month", 1, 31, nullptr, 0};
constexpr field_def month_f{"month", 1, 12, month_names, 1};
constexpr field_def weekday_f{"day-of-week", 0, 7, day_names, 0};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// A value of field `f` (a number or a name), or -1 after setting `err`.
int value_of(const field_def& f, std::string_view v, std::string* err) {
  if (v.empty()) {
    *err = "a value is missing";
    return -1;
  }
  if (std::isdigit(static_cast<unsigned char>(v[0]))) {
    if (v.size() > 4) {
      *err = std::string(v) + " is out of " + std::to_string(f.lo) + "-" + std::to_string(f.hi);
      return -1;
    }
    int n = 0;
    for (char c : v) {
      if (!std::isdigit(static_cast<unsigned char>(c))) {
        *err = "'" + std::string(v) + "' is not a number";
        return -1;
      }
      n = n * 10 + (c - '0');
    }
    if (n < f.lo || n > f.hi) {
      *err = std::to_string(n) + " is out of " + std::to_string(f.lo) + "-" + std::to_string(f.hi);
      return -1;
    }
    return n;
  }
  if (f.names != nullptr) {
    auto l = lower(v);
    int count = f.names == month_names ? 12 : 7;
    for (int i = 0; i < count; ++i)
      if (l == f.names[i])
        return i + f.names_base;
  }
  *err = "'" + std::string(v) + "' is not a " + f.name
         + (f.names != nullptr ? " number or name" : " number");
  return -1;
}

/// Parses one field into `bits` (indexed by value); false after setting `err`.
template <size_t N>
bool parse_field(const field_def& f, std::string_view text, std::bitset<N>& bits, bool* star,
                 std::string* err) {
  *star = !text.empty() && text[0] == '*';
  size_t pos = 0;
  while (true) {
    auto comma = text.find(',', pos);
    auto item =
      text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (item.empty()) {
      *err = "an empty list item";
      return false;
    }
    auto slash = item.find('/');
    auto base = item.substr(0, slash);
    int step = 1;
    if (slash != std::string_view::npos) {
      auto s = item.substr(slash + 1);
      if (s.empty() || s.size() > 4
          || s.find_first_not_of("0123456789") != std::string_view::npos) {
        *err = "step '" + std::string(s) + "' is not a number";
        return false;
      }
      step = std::stoi(std::string(s));
      if (step < 1 || step > f.hi - f.lo + 1) {
        *err = "step " + std::to_string(step) + " is out of 1-" + std::to_string(f.hi - f.lo + 1);
        return false;
      }
    }
    int a = 0, b = 0;
    if (base == "*") {
      a = f.lo;
      b = f.hi;
    } else {
      auto dash = base.find('-');
      a = value_of(f, base.substr(0, dash), err);
      if (a < 0)
        return false;
      if (dash != std::string_view::npos) {
        b = value_of(f, base.substr(dash + 1), err);
        if (b < 0)
          return false;
        if (b < a) {
          *err = "range " + std::string(base) + " runs backwards";
          return false;
        }
      } else {
        b = slash != std::string_view::npos ? f.hi : a;  // a/n: from a to the field's end
      }
    }
    for (int v = a; v <= b; v += step)
      bits.set(static_cast<size_t>(&f == &weekday_f && v == 7 ? 0 : v));
    if (comma == std::string_view::npos)
      return true;
    pos = comma + 1;
  }
}

std::string_view macro(std::string_view t) {
  if (t == "@yearly" || t == "@annually")
    return "0 0 1 1 *";
  if (t == "@monthly")
    return "0 0 1 * *";
  if (t == "@weekly")
    return "0 0 * * 0";
  if (t == "@daily" || t == "@midnight")
    return "0 0 * * *";
  if (t == "@hourly")
    return "0 * * * *";
  return {};
}

/// The first set bit at or after `from`, or -1.
template <size_t N>
int next_bit(const std::bitset<N>& b, int from) {
  for (int i = from; i < static_cast<int>(N); ++i)
    if (b.test(static_cast<size_t>(i)))
      return i;
  return -1;
}

bool day_ok(const cron_spec& s, const std::chrono::year_month_day& ymd,
            const std::chrono::weekday& wd) {
  bool dom = s.days.test(static_cast<unsigned>(ymd.day()));
  bool dow = s.weekdays.test(wd.c_encoding());
  if (s.days_star || s.weekdays_star)
    return dom && dow;
  return dom || dow;
}

cron_parse parse(std::string_view text);

}  // namespace

cron_parse parse_cron(std::string_view text) {
  auto r = parse(text);
  r.error = printable(r.error);
  return r;
}

namespace {

cron_parse parse(std::string_view text) {
  cron_parse out;
  auto quoted = "cron \"" + std::string(text.substr(0, 64)) + (text.size() > 64 ? "...\"" : "\"");
  if (text.size() > 1024) {
    out.error = quoted + ": longer than 1024 characters";
    return out;
  }
  std::string_view body = text;
  while (!body.empty() && std::isspace(static_cast<unsigned char>(body.front())))
    body.remove_prefix(1);
  while (!body.empty() && std::isspace(static_cast<unsigned char>(body.back())))
    body.remove_suffix(1);
  std::string macro_text;
  if (!body.empty() && body[0] == '@') {
    auto m = macro(lower(body));
    if (m.empty()) {
      out.error = quoted
                  + ": unknown macro (@yearly, @annually, @monthly, @weekly, @daily, "
                    "@midnight, @hourly)";
      return out;
    }
    macro_text = std::string(m);
    body = macro_text;
  }
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i])))
      ++i;
    size_t j = i;
    while (j < body.size() && !std::isspace(static_cast<unsigned char>(body[j])))
      ++j;
    if (j > i)
      fields.push_back(body.substr(i, j - i));
    i = j;
  }
  if (fields.size() != 5 && fields.size() != 6) {
    out.error = quoted + ": " + std::to_string(fields.size())
                + " fields; give 5 (minute hour day-of-month month day-of-week) or 6 (a "
                  "seconds field first)";
    return out;
  }
  cron_spec s;
  s.has_seconds = fields.size() == 6;
  size_t k = 0;
  std::string err;
  bool star = false;
  auto fail = [&](const field_def& f, std::string_view t) {
    out.error = quoted + ": " + f.name + " field '" + std::string(t) + "': " + err;
    return out;
  };
  if (s.has_seconds) {
    if (!parse_field(second_f, fields[k], s.seconds, &star, &err))
      return fail(second_f, fields[k]);
    ++k;
  } else {
    s.seconds.set(0);
  }
  if (!parse_field(minute_f, fields[k], s.minutes, &star, &err))
    return fail(minute_f, fields[k]);
  ++k;
  if (!parse_field(hour_f, fields[k], s.hours, &star, &err))
    return fail(hour_f, fields[k]);
  ++k;
  if (!parse_field(day_f, fields[k], s.days, &s.days_star, &err))
    return fail(day_f, fields[k]);
  ++k;
  if (!parse_field(month_f, fields[k], s.months, &star, &err))
    return fail(month_f, fields[k]);
  ++k;
  std::bitset<8> wd;
  if (!parse_field(weekday_f, fields[k], wd, &s.weekdays_star, &err))
    return fail(weekday_f, fields[k]);
  for (size_t d = 0; d < 7; ++d)
    s.weekdays.set(d, wd.test(d));
  out.spec = s;
  return out;
}

}  // namespace

bool cron_matches(const cron_spec& s, int64_t utc_ms) {
  using namespace std::chrono;
  auto secs = sys_seconds{seconds{utc_ms >= 0 ? utc_ms / 1000 : (utc_ms - 999) / 1000}};
  auto day = floor<days>(secs);
  year_month_day ymd{day};
  auto sod = (secs - day).count();
  return s.months.test(static_cast<unsigned>(ymd.month())) && day_ok(s, ymd, weekday{day})
         && s.hours.test(static_cast<size_t>(sod / 3600))
         && s.minutes.test(static_cast<size_t>(sod / 60 % 60))
         && s.seconds.test(static_cast<size_t>(sod % 60));
}

std::optional<int64_t> cron_next(const cron_spec& s, int64_t after_ms) {
  using namespace std::chrono;
  int64_t t = (after_ms >= 0 ? after_ms / 1000 : (after_ms - 999) / 1000) + 1;
  const int64_t limit = t + int64_t{8} * 366 * 86400;
  while (t < limit) {
    sys_seconds secs{seconds{t}};
    auto day = floor<days>(secs);
    int64_t day_start = duration_cast<seconds>(day.time_since_epoch()).count();
    year_month_day ymd{day};
    if (!s.months.test(static_cast<unsigned>(ymd.month()))) {
      auto first_next = sys_days{(ymd.year() / ymd.month() / 1) + months{1}};
      t = duration_cast<seconds>(first_next.time_since_epoch()).count();
      continue;
    }
    if (!day_ok(s, ymd, weekday{day})) {
      t = day_start + 86400;
      continue;
    }
    int64_t sod = t - day_start;
    int h = next_bit(s.hours, static_cast<int>(sod / 3600));
    if (h < 0) {
      t = day_start + 86400;
      continue;
    }
    if (h != sod / 3600) {
      t = day_start + int64_t{h} * 3600;
      continue;
    }
    int m = next_bit(s.minutes, static_cast<int>(sod / 60 % 60));
    if (m < 0) {
      t = day_start + int64_t{h + 1} * 3600;
      continue;
    }
    if (m != sod / 60 % 60) {
      t = day_start + int64_t{h} * 3600 + int64_t{m} * 60;
      continue;
    }
    int sec = next_bit(s.seconds, static_cast<int>(sod % 60));
    if (sec < 0) {
      t = day_start + int64_t{h} * 3600 + int64_t{m + 1} * 60;
      continue;
    }
    return (day_start + int64_t{h} * 3600 + int64_t{m} * 60 + sec) * 1000;
  }
  return std::nullopt;
}

std::optional<int64_t> cron_next(const cron_spec& s, const time_zone& z, int64_t after_ms) {
  if (z.is_utc())
    return cron_next(s, after_ms);
  // The UTC search runs on local seconds (the calendar arithmetic is the same); a local time
  // fires at z.fire_instant, which never decreases as the local time grows, so the first
  // matching local time from first_local_after on is the answer. The loop is a guard: it
  // goes round again only if a zone's transitions defeat that.
  int64_t after_s = after_ms >= 0 ? after_ms / 1000 : (after_ms - 999) / 1000;
  int64_t cursor = z.first_local_after(after_s) - 1;
  while (true) {
    auto local = cron_next(s, cursor * 1000);
    if (!local)
      return std::nullopt;
    int64_t at = z.fire_instant(*local / 1000);
    if (at > after_s)
      return at * 1000;
    cursor = *local / 1000;
  }
}

}  // namespace proctor::calendar
