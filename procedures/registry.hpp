// Procedure types by stable name and version. Recovery recreates a procedure from the type
// name stored in its journal records, so a name, once used, must keep meaning the same type.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "procedures/policy.hpp"
#include "procedures/procedure.hpp"

namespace proctor {

struct procedure_type {
  std::string name;
  uint32_t version = 1;
  std::function<std::unique_ptr<procedure>()> make;
  supervision_policy supervision;
  retry_policy retry;
  /// The type's steps and undos never block and finish in microseconds (no I/O, no sleep):
  /// they run on the procedure actor's own thread when their turn comes, saving the hand-off
  /// to a worker thread. Leave false for anything that touches a disk or the network.
  bool nonblocking = false;
  /// False when the type keeps procedure::locks() (no locks): recovery then need not build
  /// each procedure of the type to ask. add<T>() finds out; true is always safe.
  bool declares_locks = true;
};

class registry {
public:
  /// Registers `T` (default-constructible, derived from `procedure`) under `name`.
  /// Returns false if the name is taken.
  template <class T>
  bool add(std::string name, uint32_t version = 1, supervision_policy sup = {},
           retry_policy retry = {}) {
    procedure_type t;
    t.name = std::move(name);
    t.version = version;
    t.make = [] { return std::unique_ptr<procedure>(new T()); };
    t.supervision = sup;
    t.retry = retry;
    t.declares_locks = !std::is_same_v<decltype(&T::locks), lock_set (procedure::*)() const>;
    return add(std::move(t));
  }

  bool add(procedure_type t);

  /// The type registered under `name`, or nullptr.
  const procedure_type* find(std::string_view name) const;

  /// A new procedure of `type` with its data parsed from `args_json` ("" = {}) and validated.
  /// On error returns nullptr and sets `*error` to a one-line reason.
  std::unique_ptr<procedure> make_from_json(std::string_view type, const std::string& args_json,
                                            std::string* error) const;

  /// A procedure of `type` with its data parsed from serialized bytes (the journal's copy).
  std::unique_ptr<procedure> make_from_bytes(std::string_view type, const std::string& bytes,
                                             std::string* error) const;

  /// Registered type names, sorted.
  std::vector<std::string> names() const;

private:
  std::map<std::string, procedure_type, std::less<>> types_;
};

} // namespace proctor
