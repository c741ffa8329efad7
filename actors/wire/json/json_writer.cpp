#include "actors/wire/json/json_writer.hpp"

#include <cstdlib>

namespace proctor {

namespace {

// nlohmann has no raw JSON value. A raw text is stood in for by an empty binary value whose
// subtype is its index, which nlohmann dumps as {"bytes":[],"subtype":N}. No other value
// dumps to that: the CLI's JSON holds no binary values and no object with those keys, and
// inside a dumped string every quote is escaped.
constexpr std::string_view stand_in = R"({"bytes":[],"subtype":)";

std::string plain_dump(const ordered_json& j) {
  auto out = j.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  // nlohmann leaves DEL (0x7F) as is; a raw DEL can only be inside a string.
  for (auto at = out.find('\x7f'); at != std::string::npos; at = out.find('\x7f', at + 6))
    out.replace(at, 1, "\\u007f");
  return out;
}

}  // namespace

ordered_json json_writer::raw(std::string_view text) {
  raw_.push_back(text);
  return ordered_json::binary({}, raw_.size() - 1);
}

std::string json_writer::dump(const ordered_json& j) const {
  auto text = plain_dump(j);
  if (raw_.empty())
    return text;
  std::string out;
  out.reserve(text.size());
  size_t from = 0;
  for (auto at = text.find(stand_in); at != std::string::npos; at = text.find(stand_in, from)) {
    char* end = nullptr;
    auto index = std::strtoull(text.c_str() + at + stand_in.size(), &end, 10);
    out.append(text, from, at - from);
    out += raw_.at(index);
    from = static_cast<size_t>(end - text.c_str()) + 1;  // past the '}'
  }
  out.append(text, from, std::string::npos);
  return out;
}

std::string dump_string(std::string_view s) {
  return plain_dump(ordered_json(s));
}

}  // namespace proctor
