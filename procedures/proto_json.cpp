// Protobuf renders the message (names, enums, well-known types, bytes, floats exactly as its
// JSON mapping says); this file only turns its quoted 64-bit integers that a double holds
// exactly into numbers, walking the message beside the JSON. nlohmann's ordered_json keeps
// protobuf's field order.
#include "procedures/proto_json.hpp"

#include <charconv>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

namespace proctor {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using json = nlohmann::ordered_json;

constexpr int64_t exact_limit = int64_t{1} << 53;

bool is_64(const FieldDescriptor* f) {
  return f->cpp_type() == FieldDescriptor::CPPTYPE_INT64
         || f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64;
}

/// Well-known types (Timestamp, Duration, Struct, Any, the wrappers) have JSON forms of their
/// own that this file leaves as protobuf wrote them.
bool well_known(const Descriptor* d) {
  return d->file()->package() == "google.protobuf";
}

bool reaches_64(const Descriptor* d, std::unordered_set<const Descriptor*>& seen) {
  if (well_known(d) || !seen.insert(d).second)
    return false;
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (is_64(f))
      return true;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && reaches_64(f->message_type(), seen))
      return true;
  }
  return false;
}

/// Whether a message of type `d` can hold a 64-bit integer anywhere: most results cannot, and
/// keep protobuf's text as it is. Cached per type: descriptors live as long as the process.
bool has_64(const Descriptor* d) {
  static std::mutex mu;
  static std::unordered_map<const Descriptor*, bool> known;
  std::lock_guard lock(mu);
  auto [it, fresh] = known.try_emplace(d, false);
  if (fresh) {
    std::unordered_set<const Descriptor*> seen;
    it->second = reaches_64(d, seen);
  }
  return it->second;
}

/// A quoted 64-bit integer as a number when a double holds it exactly.
void unquote(json& v) {
  if (!v.is_string())
    return;
  const auto& s = v.get_ref<const std::string&>();
  if (!s.empty() && s.front() == '-') {
    int64_t n = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), n);
    if (r.ec == std::errc{} && r.ptr == s.data() + s.size() && n >= -exact_limit)
      v = n;
    return;
  }
  uint64_t n = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), n);
  if (r.ec == std::errc{} && r.ptr == s.data() + s.size()
      && n <= static_cast<uint64_t>(exact_limit))
    v = n;
}

void walk(const Message& m, json& j);

/// The JSON key protobuf writes for a map entry's key.
std::string map_key(const Message& entry) {
  const auto* f = entry.GetDescriptor()->map_key();
  const auto* r = entry.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      return r->GetString(entry, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return r->GetBool(entry, f) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(r->GetInt32(entry, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return std::to_string(r->GetUInt32(entry, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(r->GetInt64(entry, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(r->GetUInt64(entry, f));
    default:
      return {};
  }
}

void walk_map(const Message& m, const FieldDescriptor* f, json& obj) {
  if (!obj.is_object())
    return;
  const auto* value = f->message_type()->map_value();
  bool sixty_four = is_64(value);
  bool nested = value->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE
                && !well_known(value->message_type()) && has_64(value->message_type());
  if (!sixty_four && !nested)
    return;
  const auto* r = m.GetReflection();
  for (int i = 0, n = r->FieldSize(m, f); i < n; ++i) {
    const auto& entry = r->GetRepeatedMessage(m, f, i);
    auto it = obj.find(map_key(entry));
    if (it == obj.end())
      continue;
    if (sixty_four)
      unquote(*it);
    else
      walk(entry.GetReflection()->GetMessage(entry, value), *it);
  }
}

void walk(const Message& m, json& j) {
  if (!j.is_object())
    return;
  const auto* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    bool message = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (!is_64(f) && !(message && !well_known(f->message_type()) && has_64(f->message_type())))
      continue;
    auto it = j.find(f->name());
    if (it == j.end())
      continue;
    if (f->is_map()) {
      walk_map(m, f, *it);
    } else if (f->is_repeated()) {
      if (!it->is_array())
        continue;
      for (int k = 0, n = r->FieldSize(m, f); k < n && k < static_cast<int>(it->size()); ++k) {
        if (message)
          walk(r->GetRepeatedMessage(m, f, k), (*it)[k]);
        else
          unquote((*it)[k]);
      }
    } else if (message) {
      walk(r->GetMessage(m, f), *it);
    } else {
      unquote(*it);
    }
  }
}

}  // namespace

std::string message_to_json(const Message& m, proto_json_options o) {
  google::protobuf::util::JsonPrintOptions p;
  p.preserve_proto_field_names = true;
  p.always_print_primitive_fields = o.all_fields;
  std::string text;
  auto st = google::protobuf::util::MessageToJsonString(m, &text, p);
  if (!st.ok())
    throw std::runtime_error("cannot render " + m.GetDescriptor()->full_name()
                             + " as JSON: " + std::string(st.message()));
  if (well_known(m.GetDescriptor()) || !has_64(m.GetDescriptor()))
    return text;
  auto j = json::parse(text);
  walk(m, j);
  return j.dump(-1, ' ', false, json::error_handler_t::strict);
}

}  // namespace proctor
