// libFuzzer target for the cron parser (calendar/cron.hpp): any text is parsed; a refusal is
// one line naming why; an expression it takes is asked for its next fire times after an
// instant from the input, in a zone from the input (calendar/zone.hpp), and each must be
// later than the one before and be a fire time: in UTC, match the expression (cron_matches);
// in another zone, have a local time that matches and happens first then, or end a
// spring-forward gap in which a local time matches. Nothing between it and the instant before
// it may be a fire time (checked second by second over the first hour, then minute by minute
// for expressions without seconds: to the fire time in UTC, over two days in a zone).
//   input: 8 bytes (little endian): the instant in ms, folded into 1970..2200, and, the
//   value divided by that span, the zone (index into `zones`; 0 is UTC); then the text.
//
// Built with -DPROCTOR_FUZZ_SEEDS_MAIN instead, this file is a tool that writes the seed
// corpus into a directory.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "calendar/cron.hpp"
#include "calendar/zone.hpp"

using namespace proctor::calendar;

namespace {

/// UTC and zones with changes of one hour either way, of 30 minutes (Lord Howe) and of two
/// hours (Troll), offsets of 30 and 45 minutes, a change at midnight (Havana, Santiago) and
/// a negative daylight-saving time (Dublin).
constexpr const char* zones[] = {"UTC",
                                 "America/New_York",
                                 "Europe/Berlin",
                                 "Asia/Kolkata",
                                 "Australia/Lord_Howe",
                                 "America/Havana",
                                 "America/Santiago",
                                 "Pacific/Chatham",
                                 "Antarctica/Troll",
                                 "Europe/Dublin"};
constexpr uint64_t zone_count = sizeof zones / sizeof zones[0];
const int64_t span = int64_t{230} * 365 * 86400 * 1000;  // 1970 .. ~2200

/// True if UTC second `t` is a fire time of `s` in `z` (not UTC), by zone.hpp's rules: a
/// matching local time fires at its first occurrence; one in a gap fires at the gap's end.
bool fires_at(const cron_spec& s, const time_zone& z, int64_t t) {
  int64_t l = z.local_of(t);
  if (z.fire_instant(l) == t && cron_matches(s, l * 1000))
    return true;
  for (int64_t g = z.local_of(t - 1) + 1; g < l; ++g)  // the gap t ends, if any
    if (cron_matches(s, g * 1000))
      return true;
  return false;
}

[[noreturn]] void fail(const char* what, std::string_view text, int64_t t) {
  std::fprintf(stderr, "cron_fuzzer: %s: \"%.*s\" at %lld\n", what, static_cast<int>(text.size()),
               text.data(), static_cast<long long>(t));
  std::abort();
}

int zoned(const cron_spec& s, const time_zone& z, std::string_view text, int64_t after) {
  int64_t prev = after;
  for (int i = 0; i < 3; ++i) {
    auto n = cron_next(s, z, prev);
    if (!n)
      break;
    if (*n <= prev || *n % 1000 != 0)
      fail("zoned next not after the instant, or not a whole second", text, prev);
    if (!fires_at(s, z, *n / 1000))
      fail("zoned next is not a fire time", text, prev);
    int64_t t = prev / 1000 + 1;
    for (int k = 0; t < *n / 1000 && k < 3600; ++t, ++k)
      if (fires_at(s, z, t))
        fail("a second before zoned next is a fire time", text, t * 1000);
    if (!s.has_seconds)
      for (int k = 0; t < *n / 1000 && k < 2 * 1440; t += 60 - t % 60, ++k)
        if (t % 60 == 0 && fires_at(s, z, t))
          fail("a minute before zoned next is a fire time", text, t * 1000);
    prev = *n;
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8)
    return 0;
  uint64_t raw = 0;
  std::memcpy(&raw, data, 8);
  int64_t after = static_cast<int64_t>(raw % static_cast<uint64_t>(span));
  const char* zone_name = zones[raw / static_cast<uint64_t>(span) % zone_count];
  std::string_view text(reinterpret_cast<const char*>(data + 8), size - 8);
  auto p = parse_cron(text);
  if (!p.spec) {
    if (p.error.empty() || p.error.find('\n') != std::string::npos)
      fail("a refusal that is not one line", text, after);
    return 0;
  }
  if (!p.error.empty())
    fail("an error beside a spec", text, after);
  auto found = find_zone(zone_name);
  if (!found.zone)
    fail(found.error.c_str(), text, after);
  if (!found.zone->is_utc())
    return zoned(*p.spec, *found.zone, text, after);
  int64_t prev = after;
  for (int i = 0; i < 3; ++i) {
    auto n = cron_next(*p.spec, prev);
    if (!n)
      break;
    if (*n <= prev || *n % 1000 != 0)
      fail("next not after the instant, or not a whole second", text, prev);
    if (!cron_matches(*p.spec, *n))
      fail("next does not match", text, prev);
    int64_t t = (prev / 1000 + 1) * 1000;
    for (int k = 0; t < *n && k < 3600; t += 1000, ++k)
      if (cron_matches(*p.spec, t))
        fail("a second before next matches", text, t);
    if (!p.spec->has_seconds)
      for (t -= t % 60'000; t < *n; t += 60'000)
        if (t > prev && cron_matches(*p.spec, t))
          fail("a minute before next matches", text, t);
    prev = *n;
  }
  return 0;
}

#ifdef PROCTOR_FUZZ_SEEDS_MAIN

#include "tests/fuzz/seed_main.hpp"

namespace {

std::string at(uint64_t ms, const std::string& text, uint64_t zone = 0) {
  ms += zone * static_cast<uint64_t>(span);
  std::string out(8, '\0');
  std::memcpy(out.data(), &ms, 8);
  return out + text;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t now = 1'795'000'000'000;  // 2026-11
  return proctor::fuzz::write_seeds(
    argc, argv, "cron_fuzzer",
    {{"every-5-min", at(now, "*/5 * * * *")},
     {"weekdays", at(now, "0 9-17/2 * * mon-fri")},
     {"names", at(now, "30 8,20 1,15 jan,JUL *")},
     {"dom-or-dow", at(now, "0 0 13 * fri")},
     {"seconds", at(now, "*/7 13 * * * *")},
     {"leap", at(now, "0 0 29 2 *")},
     {"never", at(now, "0 0 30 2 *")},
     {"macro", at(now, "@weekly")},
     {"bad", at(now, "61 * * * *")},
     {"a-step", at(now, "5/15 * * * *")},
     // In zones, from just before a change (2027-03-14 07:00 UTC: New York springs forward;
     // 2026-10-25 01:00 UTC: Berlin falls back; 2026-10-03 15:30 UTC: Lord Howe, 30 min).
     {"ny-spring", at(1'805'007'000'000, "30 2 * * *", 1)},
     {"ny-every-minute", at(1'805'007'000'000 - 120'000, "* * * * *", 1)},
     {"berlin-fall", at(1'792'886'400'000, "30 2 * * *", 2)},
     {"berlin-every-second", at(1'792'889'990'000, "* * * * * *", 2)},
     {"kolkata", at(now, "0 9 * * mon-fri", 3)},
     {"lord-howe", at(1'791'041'400'000 - 120'000, "*/7 * * * *", 4)},
     {"havana-midnight", at(now, "@daily", 5)}});
}
#endif
