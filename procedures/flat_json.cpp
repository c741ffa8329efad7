#include "procedures/flat_json.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include <google/protobuf/descriptor.h>

namespace proctor {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

/// Duplicates are found with one bit per field index; larger messages take the slow path.
constexpr int max_fields = 64;

/// JSON's whitespace only: protobuf also skips \v and \f, which then take the slow path.
void skip_ws(std::string_view& s) {
  while (!s.empty() && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r'))
    s.remove_prefix(1);
}

bool consume(std::string_view& s, char c) {
  if (s.empty() || s[0] != c)
    return false;
  s.remove_prefix(1);
  return true;
}

bool consume(std::string_view& s, std::string_view word) {
  if (s.substr(0, word.size()) != word)
    return false;
  s.remove_prefix(word.size());
  return true;
}

/// Length of the well-formed UTF-8 sequence of two to four bytes at the start of `s`, or 0
/// (overlong forms, surrogates and code points above U+10FFFF are not well-formed).
size_t utf8_sequence(std::string_view s) {
  auto byte = [&](size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0u; };
  auto cont = [&](size_t i) { return (byte(i) & 0xC0) == 0x80; };
  unsigned b0 = byte(0);
  unsigned b1 = byte(1);
  if (b0 >= 0xC2 && b0 <= 0xDF)
    return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if ((b0 == 0xE0 && b1 < 0xA0) || (b0 == 0xED && b1 > 0x9F))
      return 0;
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if ((b0 == 0xF0 && b1 < 0x90) || (b0 == 0xF4 && b1 > 0x8F))
      return 0;
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

/// A JSON string without escapes or control characters; `*out` views its content in `s`.
bool read_plain_string(std::string_view& s, std::string_view* out) {
  if (!consume(s, '"'))
    return false;
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c == '"') {
      *out = s.substr(0, i);
      s.remove_prefix(i + 1);
      return true;
    }
    if (c < 0x20 || c == '\\')
      return false;
    if (c < 0x80) {
      ++i;
    } else if (auto n = utf8_sequence(s.substr(i)); n > 0) {
      i += n;
    } else {
      return false;
    }
  }
  return false;
}

/// An integer literal -?(0|[1-9][0-9]*) whose magnitude fits 64 bits; "-0" is refused.
/// A fraction or exponent after it is left in `s`, for the caller to refuse.
bool read_integer(std::string_view& s, bool* negative, uint64_t* magnitude) {
  *negative = consume(s, '-');
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    auto d = static_cast<uint64_t>(s[i] - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10)
      return false;
    v = v * 10 + d;
  }
  if (i == 0 || (s[0] == '0' && (i > 1 || *negative)))
    return false;
  s.remove_prefix(i);
  *negative = *negative && v != 0;
  *magnitude = v;
  return true;
}

/// Sets the integer field `f` if the value is within its type's range.
bool set_integer(Message* msg, const Reflection* r, const FieldDescriptor* f, bool negative,
                 uint64_t magnitude) {
  // Two's complement negation; the conversions to signed types are modular (C++20).
  uint64_t bits = negative ? 0 - magnitude : magnitude;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      if (magnitude > (negative ? uint64_t{1} << 31 : (uint64_t{1} << 31) - 1))
        return false;
      r->SetInt32(msg, f, static_cast<int32_t>(bits));
      return true;
    case FieldDescriptor::CPPTYPE_INT64:
      if (magnitude > (negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1))
        return false;
      r->SetInt64(msg, f, static_cast<int64_t>(bits));
      return true;
    case FieldDescriptor::CPPTYPE_UINT32:
      if (negative || magnitude > std::numeric_limits<uint32_t>::max())
        return false;
      r->SetUInt32(msg, f, static_cast<uint32_t>(magnitude));
      return true;
    case FieldDescriptor::CPPTYPE_UINT64:
      if (negative)
        return false;
      r->SetUInt64(msg, f, magnitude);
      return true;
    default:
      return false;
  }
}

/// Reads the value of field `f` from `s` into `*msg`.
bool read_value(std::string_view& s, Message* msg, const Reflection* r,
                const FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      bool negative = false;
      uint64_t magnitude = 0;
      return read_integer(s, &negative, &magnitude) && set_integer(msg, r, f, negative, magnitude);
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (consume(s, "true")) {
        r->SetBool(msg, f, true);
        return true;
      }
      if (consume(s, "false")) {
        r->SetBool(msg, f, false);
        return true;
      }
      return false;
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string_view v;
      if (f->type() != FieldDescriptor::TYPE_STRING || !read_plain_string(s, &v))
        return false; // bytes are base64 in JSON
      r->SetString(msg, f, std::string(v));
      return true;
    }
    default:
      return false; // floating point, enums, messages
  }
}

/// The field `name` denotes by json_name or proto name, or nullptr if none or ambiguous.
const FieldDescriptor* find_field(const Descriptor* d, std::string_view name) {
  const FieldDescriptor* found = nullptr;
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->json_name() == name || f->name() == name) {
      if (found != nullptr)
        return nullptr;
      found = f;
    }
  }
  return found;
}

bool parse_object(std::string_view s, Message* msg) {
  const auto* d = msg->GetDescriptor();
  // Well-known types have their own JSON forms (a Duration is a string, a Struct any object).
  if (d->file()->syntax() != FileDescriptor::SYNTAX_PROTO3
      || d->file()->package() == "google.protobuf" || d->field_count() > max_fields)
    return false;
  const auto* r = msg->GetReflection();
  skip_ws(s);
  if (!consume(s, '{'))
    return false;
  skip_ws(s);
  if (!consume(s, '}')) {
    uint64_t seen = 0;
    for (;;) {
      std::string_view name;
      if (!read_plain_string(s, &name))
        return false;
      const auto* f = find_field(d, name);
      if (f == nullptr || f->is_repeated() || f->real_containing_oneof() != nullptr)
        return false;
      auto bit = uint64_t{1} << f->index();
      if ((seen & bit) != 0)
        return false;
      seen |= bit;
      skip_ws(s);
      if (!consume(s, ':'))
        return false;
      skip_ws(s);
      if (!read_value(s, msg, r, f))
        return false;
      skip_ws(s);
      if (consume(s, '}'))
        break;
      if (!consume(s, ','))
        return false;
      skip_ws(s);
    }
  }
  skip_ws(s);
  return s.empty();
}

} // namespace

bool parse_flat_json(std::string_view text, Message* msg) {
  msg->Clear();
  if (parse_object(text, msg))
    return true;
  msg->Clear();
  return false;
}

} // namespace proctor
