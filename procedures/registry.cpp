#include "procedures/registry.hpp"

#include <google/protobuf/util/json_util.h>

#include "procedures/flat_json.hpp"

namespace proctor {

namespace {

/// Error texts are one line: control characters (newlines above all) become spaces.
std::string one_line(std::string s) {
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x20)
      c = ' ';
  return s;
}

} // namespace

bool registry::add(procedure_type t) {
  auto name = t.name;
  return types_.emplace(std::move(name), std::move(t)).second;
}

const procedure_type* registry::find(std::string_view name) const {
  auto i = types_.find(name);
  return i == types_.end() ? nullptr : &i->second;
}

std::unique_ptr<procedure> registry::make_from_json(std::string_view type,
                                                    const std::string& args_json,
                                                    std::string* error) const {
  const auto* t = find(type);
  if (t == nullptr) {
    *error = "unknown procedure type '" + one_line(std::string(type)) + "'";
    return nullptr;
  }
  auto p = t->make();
  std::string_view args = args_json.empty() ? std::string_view("{}") : args_json;
  // The fast path takes the flat objects nearly all submits send; anything else, including
  // every error, goes to protobuf's parser, which it leaves a cleared message.
  google::protobuf::util::Status st;
  if (!parse_flat_json(args, &p->data())) {
    google::protobuf::util::JsonParseOptions opts;
    opts.ignore_unknown_fields = false;
    st = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(args.data(), args.size()), &p->data(), opts);
  }
  if (!st.ok()) {
    std::string why(st.message());
    *error = "malformed args JSON for '" + one_line(std::string(type)) + "': "
             + one_line(why.substr(0, why.find('\n')));
    return nullptr;
  }
  try {
    if (auto why = p->validate(); !why.empty()) {
      *error = "invalid args for '" + std::string(type) + "': " + one_line(why);
      return nullptr;
    }
  } catch (const std::exception& e) {
    *error = "invalid args for '" + std::string(type) + "': " + one_line(e.what());
    return nullptr;
  }
  return p;
}

std::unique_ptr<procedure> registry::make_from_bytes(std::string_view type,
                                                     const std::string& bytes,
                                                     std::string* error) const {
  const auto* t = find(type);
  if (t == nullptr) {
    *error = "unknown procedure type '" + std::string(type) + "'";
    return nullptr;
  }
  auto p = t->make();
  if (!p->data().ParseFromString(bytes)) {
    *error = "unparsable data for '" + std::string(type) + "'";
    return nullptr;
  }
  return p;
}

std::vector<std::string> registry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : types_)
    out.push_back(name);
  return out;
}

} // namespace proctor
