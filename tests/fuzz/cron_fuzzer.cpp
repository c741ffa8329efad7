// libFuzzer target for the cron parser (calendar/cron.hpp): any text is parsed; a refusal is
// one line naming why; an expression it takes is asked for its next fire times after an
// instant from the input, and each must be later than the one before, match the expression
// (cron_matches) and have nothing matching between it and the instant before it (checked
// second by second over the first hour, then minute by minute for expressions without
// seconds).
//   input: 8 bytes of instant (little endian, ms, folded into 1970..2200), then the text.
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

using namespace proctor::calendar;

namespace {

[[noreturn]] void fail(const char* what, std::string_view text, int64_t t) {
  std::fprintf(stderr, "cron_fuzzer: %s: \"%.*s\" at %lld\n", what, static_cast<int>(text.size()),
               text.data(), static_cast<long long>(t));
  std::abort();
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
  const int64_t span = int64_t{230} * 365 * 86400 * 1000;  // 1970 .. ~2200
  int64_t after = static_cast<int64_t>(raw % static_cast<uint64_t>(span));
  std::string_view text(reinterpret_cast<const char*>(data + 8), size - 8);
  auto p = parse_cron(text);
  if (!p.spec) {
    if (p.error.empty() || p.error.find('\n') != std::string::npos)
      fail("a refusal that is not one line", text, after);
    return 0;
  }
  if (!p.error.empty())
    fail("an error beside a spec", text, after);
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

std::string at(uint64_t ms, const std::string& text) {
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
     {"a-step", at(now, "5/15 * * * *")}});
}
#endif
