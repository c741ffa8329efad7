#include "procedures/flat_json.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <simdjson.h>

namespace proctor {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

/// Duplicates are found with one bit per field index; larger messages take the slow path.
constexpr int max_fields = 64;

/// Texts up to this size are parsed by the thread's own parser, which keeps its buffers.
constexpr size_t kept_parser_bytes = 64 * 1024;

/// The content of the JSON string `s`, if it has no escapes or control characters.
/// simdjson has checked its UTF-8 and found its closing quote, which is the first quote
/// unless a backslash comes before.
bool plain_string(simdjson::ondemand::raw_json_string s, std::string_view* out) {
  const char* begin = s.raw();
  const char* end = begin;
  while (*end != '"') {
    if (*end == '\\' || static_cast<unsigned char>(*end) < 0x20)
      return false;
    ++end;
  }
  *out = std::string_view(begin, static_cast<size_t>(end - begin));
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

/// Reads `v`, the value of field `f`, into `*msg`.
bool read_value(simdjson::ondemand::value v, Message* msg, const Reflection* r,
                const FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64: {
      auto token = v.raw_json_token();
      if (token.substr(0, 2) == "-0")
        return false;  // protobuf refuses -0 for integers; simdjson would give 0
      if (token[0] == '-') {
        int64_t i = 0;
        if (v.get_int64().get(i))
          return false;
        return set_integer(msg, r, f, true, 0 - static_cast<uint64_t>(i));
      }
      uint64_t u = 0;
      return !v.get_uint64().get(u) && set_integer(msg, r, f, false, u);
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool b = false;
      if (v.get_bool().get(b))
        return false;
      r->SetBool(msg, f, b);
      return true;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      simdjson::ondemand::raw_json_string raw;
      std::string_view text;
      if (f->type() != FieldDescriptor::TYPE_STRING || v.get_raw_json_string().get(raw)
          || !plain_string(raw, &text))
        return false;  // bytes are base64 in JSON
      r->SetString(msg, f, std::string(text));
      return true;
    }
    default:
      return false;  // floating point, enums, messages
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

bool parse_object(simdjson::ondemand::parser& parser, simdjson::padded_string_view text,
                  Message* msg) {
  const auto* d = msg->GetDescriptor();
  // Well-known types have their own JSON forms (a Duration is a string, a Struct any object).
  if (d->file()->syntax() != FileDescriptor::SYNTAX_PROTO3
      || d->file()->package() == "google.protobuf" || d->field_count() > max_fields)
    return false;
  const auto* r = msg->GetReflection();
  simdjson::ondemand::document doc;
  simdjson::ondemand::object object;
  if (parser.iterate(text).get(doc) || doc.get_object().get(object))
    return false;
  uint64_t seen = 0;
  for (auto member : object) {
    simdjson::ondemand::field field;
    std::string_view name;
    if (std::move(member).get(field) || !plain_string(field.key(), &name))
      return false;
    const auto* f = find_field(d, name);
    if (f == nullptr || f->is_repeated() || f->real_containing_oneof() != nullptr)
      return false;
    auto bit = uint64_t{1} << f->index();
    if ((seen & bit) != 0)
      return false;
    seen |= bit;
    if (!read_value(field.value(), msg, r, f))
      return false;
  }
  // Nothing may follow the object ("{}{}"): the iterator must be past the last token.
  return doc.current_location().error() == simdjson::OUT_OF_BOUNDS;
}

/// What a JSON value is, for a message about it.
const char* json_kind(simdjson::dom::element v) {
  switch (v.type()) {
    case simdjson::dom::element_type::ARRAY:
      return "a list (JSON array)";
    case simdjson::dom::element_type::OBJECT:
      return "an object";
    case simdjson::dom::element_type::STRING:
      return "a string";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return "a number";
    case simdjson::dom::element_type::BOOL:
      return "a boolean";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

/// Messages whose JSON form is their own (a Struct is any object, a Duration a string):
/// nothing of theirs is checked.
bool well_known(const Descriptor* d) {
  return d->file()->package() == "google.protobuf";
}

std::string check_object(simdjson::dom::object object, const Descriptor* d,
                         const std::string& path);

/// One value of field `f` (of a repeated field: one element) at `path`.
std::string check_single(simdjson::dom::element v, const FieldDescriptor* f,
                         const std::string& path) {
  if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || well_known(f->message_type()))
    return {};
  simdjson::dom::object object;
  if (v.get_object().get(object))
    return {};  // not an object: protobuf's parser refuses it already
  return check_object(object, f->message_type(), path);
}

std::string check_field(simdjson::dom::element v, const FieldDescriptor* f,
                        const std::string& path) {
  if (v.is_null())
    return {};  // the field's default, for a list or map an empty one
  if (f->is_map()) {
    simdjson::dom::object object;
    if (v.get_object().get(object))
      return "field '" + path + "' takes a map (a JSON object), not " + json_kind(v);
    const auto* value_field = f->message_type()->map_value();
    for (auto member : object) {
      auto why = check_single(member.value, value_field, path + "." + std::string(member.key));
      if (!why.empty())
        return why;
    }
    return {};
  }
  if (f->is_repeated()) {
    simdjson::dom::array array;
    if (v.get_array().get(array))
      return "field '" + path + "' takes a list (a JSON array), not " + json_kind(v);
    size_t i = 0;
    for (auto element : array) {
      auto at = path + "[" + std::to_string(i++) + "]";
      if (element.is_array())
        return "field '" + path + "' takes a list of values, not a list of lists (" + at
               + " is a list)";
      auto why = check_single(element, f, at);
      if (!why.empty())
        return why;
    }
    return {};
  }
  return check_single(v, f, path);
}

std::string check_object(simdjson::dom::object object, const Descriptor* d,
                         const std::string& path) {
  for (auto member : object) {
    const auto* f = find_field(d, member.key);
    if (f == nullptr)
      continue;  // protobuf's parser accepted it: an unknown name would have been refused
    auto name = path.empty() ? std::string(member.key) : path + "." + std::string(member.key);
    auto why = check_field(member.value, f, name);
    if (!why.empty())
      return why;
  }
  return {};
}

}  // namespace

std::string json_shape_error(std::string_view text, const Descriptor* d) {
  if (well_known(d))
    return {};
  simdjson::dom::parser parser;
  simdjson::padded_string copy(text);
  simdjson::dom::object object;
  if (parser.parse(copy).get_object().get(object))
    return {};  // not an object: protobuf's parser has the say
  return check_object(object, d, "");
}

bool parse_flat_json(std::string_view text, Message* msg) {
  msg->Clear();
  // simdjson reads up to SIMDJSON_PADDING bytes past the text, so it parses a padded copy.
  // A parser and a copy keep their buffers for the next text: one of each per thread for
  // the common small texts; a large text gets its own, not to hold that memory for good.
  bool ok = false;
  if (text.size() <= kept_parser_bytes) {
    thread_local simdjson::ondemand::parser parser;
    thread_local std::string copy;
    copy.reserve(text.size() + simdjson::SIMDJSON_PADDING);
    copy.assign(text);
    simdjson::padded_string_view padded(copy.data(), copy.size(), copy.capacity());
    ok = parse_object(parser, padded, msg);
  } else {
    simdjson::ondemand::parser parser;
    simdjson::padded_string copy(text);
    ok = parse_object(parser, copy, msg);
  }
  if (ok)
    return true;
  msg->Clear();
  return false;
}

}  // namespace proctor
