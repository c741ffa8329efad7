#include "actors/executor/tree_types.hpp"

namespace proctor {

namespace {

/// "" if data of `version` loads as `t`'s registered version, else why not.
std::string blob_problem(const registry& types, const procedure_type& t, const proc_image& p,
                         uint32_t version, const std::string& data) {
  if (version == 0 || version == t.version)
    return {};  // loaded as it is, as before versions were checked
  auto who = "procedure " + std::to_string(p.id) + " of type " + t.name;
  if (auto why = types.version_problem(t, version); !why.empty())
    return who + " was " + why;
  std::string err;
  if (!types.make_from_journal(t.name, version, data, &err))
    return who + ": " + err;
  return {};
}

}  // namespace

std::string tree_type_problem(const registry& types, const tree_image& t) {
  const procedure_type* type = nullptr;
  for (const auto& [id, p] : t.procs) {
    // Trees are mostly of one or two types: ask the registry only when the type changes.
    if (type == nullptr || type->name != p.type)
      type = types.find(p.type);
    if (type == nullptr)
      return "procedure " + std::to_string(id) + ": " + types.unknown_type_error(p.type);
    if (!is_final(p.status))
      if (auto why = blob_problem(types, *type, p, p.data_version, p.data); !why.empty())
        return why;
    for (const auto& s : p.steps)
      if (!s.undone && !s.no_return)
        if (auto why = blob_problem(types, *type, p, s.data_version, s.data); !why.empty())
          return why;
  }
  return {};
}

}  // namespace proctor
