// How the CLI's JSON is written: nlohmann::ordered_json values (keys in insertion order),
// dumped on one line with nlohmann's escaping and UTF-8 repair, plus the two things the
// library does not do: DEL escaped like the other control characters, and JSON texts
// embedded verbatim (a procedure's result, whose numbers and spacing are its author's).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace proctor {

using ordered_json = nlohmann::ordered_json;

class json_writer {
public:
  /// A stand-in for `text`, which must be one valid JSON value (is_valid_json) and must
  /// outlive this writer: put it into a value, and dump() writes `text` in its place.
  ordered_json raw(std::string_view text);

  /// `j` on one line. Control characters (DEL too) are escaped; bytes of a string that are
  /// not UTF-8 become U+FFFD (one per maximal ill-formed subsequence, as Unicode recommends).
  std::string dump(const ordered_json& j) const;

private:
  std::vector<std::string_view> raw_;
};

/// Builds an object member by member, keys in the order added: json_members{}("id", 5)...
/// The keys are the caller's own and distinct, so they are appended without the search for
/// an existing key that ordered_json's operator[] and initializer lists make (per 100k
/// statuses: 32 ms here, 270 ms from initializer lists; /tmp micro benchmark, loaded host).
class json_members {
public:
  explicit json_members(size_t n) { object_.get_ref<ordered_json::object_t&>().reserve(n); }

  json_members& operator()(const char* key, ordered_json value) {
    object_.get_ref<ordered_json::object_t&>().emplace_back(key, std::move(value));
    return *this;
  }

  ordered_json take() { return std::move(object_); }

private:
  ordered_json object_ = ordered_json::object();
};

/// A string as a JSON string value, through nlohmann's serializer (as json_writer::dump).
std::string dump_string(std::string_view s);

}  // namespace proctor
