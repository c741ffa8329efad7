// One-line error text for calendar/: what a user typed, with control characters as \xNN, so
// that an error quoting it stays one line whatever the text held.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace proctor::calendar {

/// `s` with bytes below 0x20 and 0x7f as \xNN.
inline std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace proctor::calendar
