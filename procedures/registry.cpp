#include <algorithm>

#include <google/protobuf/util/json_util.h>

#include <proctor/registry.hpp>

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

/// Levenshtein distance, ignoring case: "Demo.Ledger" is as near as "demo.leger".
size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] =
        std::min({row[j] + 1, row[j - 1] + 1, diag + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

// -- type_declaration ---------------------------------------------------------------------------

void type_declaration::add_upgrade(uint32_t from, upgrade_fn f) {
  auto where = "upgrade from version " + std::to_string(from) + " of '" + type_->name + "'";
  if (from == 0 || from >= type_->version)
    throw std::invalid_argument(
      where + ": upgrades go from an older version (1 to " + std::to_string(type_->version - 1)
      + ") to the next; the registered version is " + std::to_string(type_->version));
  if (!f)
    throw std::invalid_argument(where + ": empty function");
  if (!type_->upgrades.emplace(from, std::move(f)).second)
    throw std::invalid_argument(where + " declared twice");
}

void type_declaration::check_data_type(uint32_t from, bool matches) const {
  if (!matches)
    throw std::invalid_argument("upgrade from version " + std::to_string(from) + " of '"
                                + type_->name + "' takes another message than the type's data ("
                                + type_->make()->data().GetTypeName() + ")");
}

// -- registry -----------------------------------------------------------------------------------

procedure_type* registry::insert(procedure_type t) {
  if (t.version == 0)
    throw std::invalid_argument("procedure type '" + one_line(t.name)
                                + "' registered with version 0: versions start at 1 (0 in the "
                                  "journal means the version a procedure was submitted with)");
  if (const auto* taken = find(t.name))
    throw std::logic_error("procedure type '" + one_line(t.name)
                           + "' is already registered (version " + std::to_string(taken->version)
                           + "); each name is registered once");
  auto name = t.name;
  return &types_.emplace(std::move(name), std::move(t)).first->second;
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
    *error = unknown_type_error(type);
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
    // Its parser takes a single value where a list belongs (and has no option not to):
    // refused here, naming the field, rather than run on data the submitter did not mean.
    if (st.ok())
      if (auto why = json_shape_error(args, p->data().GetDescriptor()); !why.empty()) {
        *error = "malformed args JSON for '" + one_line(std::string(type)) + "': " + one_line(why);
        return nullptr;
      }
  }
  if (!st.ok()) {
    std::string why(st.message());
    *error = "malformed args JSON for '" + one_line(std::string(type))
             + "': " + one_line(why.substr(0, why.find('\n')));
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
    *error = unknown_type_error(type);
    return nullptr;
  }
  auto p = t->make();
  if (!p->data().ParseFromString(bytes)) {
    *error = "unparsable data for '" + one_line(std::string(type)) + "'";
    return nullptr;
  }
  return p;
}

std::unique_ptr<procedure> registry::make_from_journal(std::string_view type, uint32_t version,
                                                       const std::string& bytes,
                                                       std::string* error) const {
  const auto* t = find(type);
  if (t == nullptr || version == 0 || version == t->version)
    return make_from_bytes(type, bytes, error);
  auto name = "'" + one_line(std::string(type)) + "'";
  if (auto why = version_problem(*t, version); !why.empty()) {
    *error = "data of " + name + " was " + why;
    return nullptr;
  }
  std::string upgraded = bytes;
  for (auto v = version; v < t->version; ++v) {
    try {
      upgraded = t->upgrades.at(v)(upgraded);
    } catch (const std::exception& e) {
      *error = "upgrade of " + name + " data from version " + std::to_string(v) + " to "
               + std::to_string(v + 1) + " failed: " + one_line(e.what());
      return nullptr;
    } catch (...) {
      *error = "upgrade of " + name + " data from version " + std::to_string(v) + " to "
               + std::to_string(v + 1) + " failed";
      return nullptr;
    }
  }
  auto p = make_from_bytes(type, upgraded, error);
  if (!p)
    *error += " (after the upgrade from version " + std::to_string(version) + ")";
  return p;
}

std::string registry::version_problem(const procedure_type& t, uint32_t version) const {
  if (version == 0 || version == t.version)
    return {};
  auto written = "written by version " + std::to_string(version) + "; this node knows version "
                 + std::to_string(t.version);
  if (version > t.version)
    return written + " (no downgrade)";
  for (auto v = version; v < t.version; ++v)
    if (t.upgrades.count(v) == 0)
      return written + " and has no upgrade from version " + std::to_string(v) + " to "
             + std::to_string(v + 1);
  return {};
}

std::string registry::unknown_type_error(std::string_view type) const {
  auto out = "unknown procedure type '" + one_line(std::string(type)) + "'";
  if (types_.empty())
    return out + " (no types are registered)";
  // A near name is a likely typo: suggest it when it is at most a third of the name away.
  const std::string* best = nullptr;
  size_t best_d = 0;
  for (const auto& [name, t] : types_) {
    auto d = edit_distance(type, name);
    if (best == nullptr || d < best_d) {
      best = &name;
      best_d = d;
    }
  }
  if (best_d <= std::max<size_t>(1, std::min(type.size(), best->size()) / 3))
    return out + " (did you mean '" + *best + "'?)";
  // Otherwise the list, cut short: a node with hundreds of types must keep the line short.
  constexpr size_t max_listed = 12;
  out += " (known types: ";
  size_t n = 0;
  for (const auto& [name, t] : types_) {
    if (n == max_listed) {
      out += ", ... " + std::to_string(types_.size() - n) + " more";
      break;
    }
    out += (n++ == 0 ? "" : ", ") + name;
  }
  return out + ")";
}

std::vector<std::string> registry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : types_)
    out.push_back(name);
  return out;
}

}  // namespace proctor
