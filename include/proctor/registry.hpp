// Procedure types by stable name and version. Recovery recreates a procedure from the type
// name stored in its journal records, so a name, once used, must keep meaning the same type.
// A type's version says which code wrote its journaled data; a type that changes its data
// declares the upgrades from older versions with it:
//
//   types.add<copy_file>("example.copy_file", /*version=*/3)
//     .upgrade(1, [](const std::string& v1) { return v1_to_v2(v1); })  // bytes to bytes
//     .upgrade(2, [](example::CopyData& d) { d.set_mode(0644); })        // parsed, in place
//     .child_only();                                                     // spawned only
//
// Its policies go the same way (policy.hpp):
//
//   types.add<order>("shop.order")
//     .retry({.max_attempts = 3})                                     // a failing step
//     .supervision({.strategy = proctor::restart_strategy::one_for_all})  // its children
//     .on_node_loss(proctor::node_loss_policy::fail_after(std::chrono::seconds{30}))
//     .max_running(10)                                                // steps at once
//     .rate(100, std::chrono::minutes{1});                            // starts per minute
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <proctor/policy.hpp>
#include <proctor/procedure.hpp>

namespace proctor {

/// Turns a procedure's data as serialized by version v of its type into version v + 1's.
/// Throws on data it cannot upgrade (recovery then quarantines the tree).
using upgrade_fn = std::function<std::string(const std::string&)>;

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
  /// Upgrades of journaled data, by the version each upgrades from (v to v + 1). Data of an
  /// older version is upgraded step by step when it is loaded; data of a newer version, or
  /// of an older one with a gap in this chain, is never run (its tree is quarantined).
  std::map<uint32_t, upgrade_fn> upgrades{};
  /// Only a parent procedure may spawn it: a client's submit of it as a root is refused.
  bool child_only = false;
  /// What a procedure of this type does while a child it placed on another node cannot be
  /// reached.
  node_loss_policy node_loss{};
  /// How many of its steps may run at once and how fast its procedures may start
  /// (type_limits); an operator's `proctor limits set` overrides it on a live node.
  type_limits limits{};
  /// A tree whose root is of this type compacts its journal into one record once it holds
  /// this many records (0: the node's --compact-after decides; docs/flow-control.md).
  uint64_t compact_after = 0;
};

/// What `registry::add<T>` returns: the type just registered, to declare its upgrades and
/// flags in the same statement (a name already taken throws instead, see registry::add).
/// Declaring an upgrade that cannot apply (from version 0, from the registered version or
/// later, twice from one version, of another data message) throws std::invalid_argument:
/// a mistake in the program, found when the node starts.
class type_declaration {
public:
  explicit type_declaration(procedure_type* t) noexcept : type_(t) {}

  /// Declares how data of version `from` becomes version `from + 1`. `f` is either
  /// `std::string(const std::string&)` (serialized to serialized: for changes a parse cannot
  /// bridge, such as a field's type) or `void(Data&)` (the type's data message, parsed from
  /// the old bytes, changed in place: for added or renamed fields).
  template <class F>
  type_declaration& upgrade(uint32_t from, F f) {
    if (type_ == nullptr)
      return *this;
    if constexpr (std::is_invocable_r_v<std::string, F, const std::string&>) {
      add_upgrade(from, upgrade_fn(std::move(f)));
    } else {
      using data_t = typename upgrade_arg<decltype(std::function{f})>::type;
      static_assert(std::is_base_of_v<google::protobuf::Message, data_t>,
                    "an upgrade takes the serialized data (const std::string&) or the type's "
                    "data message (Data&)");
      check_data_type(from, dynamic_cast<data_t*>(&type_->make()->data()) != nullptr);
      add_upgrade(from, [make = type_->make, f = std::move(f)](const std::string& bytes) {
        auto p = make();
        auto& d = static_cast<data_t&>(p->data());
        if (!d.ParseFromString(bytes))
          throw std::runtime_error("unparsable data");
        f(d);
        return d.SerializeAsString();
      });
    }
    return *this;
  }

  /// Declares the type child-only: only a parent procedure can spawn it.
  type_declaration& child_only(bool yes = true) {
    if (type_ != nullptr)
      type_->child_only = yes;
    return *this;
  }

  /// Declares the type's steps and undos nonblocking (procedure_type::nonblocking): no I/O,
  /// no sleep, microseconds each. A step of such a type that needs no lock runs on its
  /// procedure's actor without waiting for a run slot.
  type_declaration& nonblocking(bool yes = true) {
    if (type_ != nullptr)
      type_->nonblocking = yes;
    return *this;
  }

  /// How a failing step of this type is retried before its failure stands (retry_policy;
  /// the default: no retry before the point of no return, forever past it).
  type_declaration& retry(const retry_policy& p) {
    if (type_ != nullptr)
      type_->retry = p;
    return *this;
  }

  /// How a procedure of this type supervises its children, and how a root of this type is
  /// supervised: restart strategy, intensity and back-off (supervision_policy).
  type_declaration& supervision(const supervision_policy& p) {
    if (type_ != nullptr)
      type_->supervision = p;
    return *this;
  }

  /// What procedures of this type do while a child they placed on another node cannot be
  /// reached: wait (the default), or fail their tree after a deadline.
  type_declaration& on_node_loss(node_loss_policy p) {
    if (type_ != nullptr)
      type_->node_loss = p;
    return *this;
  }

  /// At most `n` steps of procedures of this type run at once on a node (0: no limit);
  /// the others wait RUNNABLE for one to end (type_limits).
  type_declaration& max_running(uint32_t n) {
    if (type_ != nullptr)
      type_->limits.max_running = n;
    return *this;
  }

  /// At most `n` procedures of this type start (run their first step) per `per` on a node,
  /// in bursts of up to `n` (a token bucket; 0: no limit). `per` must be positive: a
  /// mistake in the program throws std::invalid_argument when the node starts.
  type_declaration& rate(uint32_t n, std::chrono::milliseconds per) {
    if (type_ == nullptr)
      return *this;
    if (per.count() <= 0)
      throw std::invalid_argument("procedure type '" + type_->name
                                  + "': rate(n, per) needs a positive period");
    type_->limits.rate = n;
    type_->limits.per = per;
    return *this;
  }

  /// A tree rooted in a procedure of this type compacts its journal into one record each
  /// time it holds `records` records (a loop that runs for weeks keeps a bounded journal;
  /// docs/flow-control.md, "Self-compacting trees"). Overrides the node's --compact-after.
  /// `records` below 2 throws std::invalid_argument: a mistake in the program, found when
  /// the type is registered.
  type_declaration& compact_after(uint64_t records) {
    if (type_ == nullptr)
      return *this;
    if (records < 2)
      throw std::invalid_argument("procedure type '" + type_->name
                                  + "': compact_after(records) needs at least 2 records");
    type_->compact_after = records;
    return *this;
  }

  /// True: registry::add throws rather than return a declaration of nothing. Kept so that
  /// `if (types.add<T>(...))` and `assert(types.add<T>(...))` still compile.
  explicit operator bool() const noexcept { return type_ != nullptr; }

private:
  template <class Sig>
  struct upgrade_arg;
  template <class R, class A>
  struct upgrade_arg<std::function<R(A)>> {
    using type = std::remove_cvref_t<A>;
  };

  void add_upgrade(uint32_t from, upgrade_fn f);
  void check_data_type(uint32_t from, bool matches) const;

  procedure_type* type_;
};

class registry {
public:
  /// Registers `T` (default-constructible, derived from `procedure`) under `name`.
  /// Registering a name twice is a mistake in the program, found when the node starts:
  /// throws std::logic_error naming the type ("procedure type 'acme.part' is already
  /// registered (version 1); each name is registered once"), and nothing chained on the
  /// call (upgrades, flags) is declared. A `version` of 0 throws std::invalid_argument (a
  /// std::logic_error too): version 0 in the journal means "the version the procedure was
  /// submitted with". Its policies are declared on what it returns (`.retry(...)`,
  /// `.supervision(...)`, `.on_node_loss(...)`); `sup` and `retry` are the older positional
  /// form of the first two, kept for code written before the builder.
  template <class T>
  type_declaration add(std::string name, uint32_t version = 1, supervision_policy sup = {},
                       retry_policy retry = {}) {
    procedure_type t;
    t.name = std::move(name);
    t.version = version;
    t.make = [] { return std::unique_ptr<procedure>(new T()); };
    t.supervision = sup;
    t.retry = retry;
    t.declares_locks = !std::is_same_v<decltype(&T::locks), lock_set (procedure::*)() const>;
    return type_declaration(insert(std::move(t)));
  }

  /// Registers `t`. Throws as add<T>() does: std::logic_error if its name is taken,
  /// std::invalid_argument if its version is 0.
  type_declaration add(procedure_type t) { return type_declaration(insert(std::move(t))); }

  /// The type registered under `name`, or nullptr.
  const procedure_type* find(std::string_view name) const;

  /// A new procedure of `type` with its data parsed from `args_json` ("" = {}) and validated.
  /// On error returns nullptr and sets `*error` to a one-line reason.
  std::unique_ptr<procedure> make_from_json(std::string_view type, const std::string& args_json,
                                            std::string* error) const;

  /// A procedure of `type` with its data parsed from serialized bytes of the registered
  /// version (a spawn's, or a test's).
  std::unique_ptr<procedure> make_from_bytes(std::string_view type, const std::string& bytes,
                                             std::string* error) const;

  /// A procedure of `type` from journaled data written by `version` of the type (0: the
  /// registered one), upgraded to the registered version. Every procedure made from the
  /// journal is made here. On error (unknown type, a newer version, an older one without
  /// an upgrade path, an upgrade that throws, data that does not parse) returns nullptr and
  /// sets `*error` to a one-line reason.
  std::unique_ptr<procedure> make_from_journal(std::string_view type, uint32_t version,
                                               const std::string& bytes, std::string* error) const;

  /// "" if data written by `version` of `type` can be upgraded to the registered version
  /// (without running the upgrades), else why not, as a phrase that follows "... was":
  /// "written by version 3; this node knows version 2 (no downgrade)".
  std::string version_problem(const procedure_type& t, uint32_t version) const;

  /// Why `type` is not known here, with the nearest registered name when one is close and
  /// the registered names otherwise: "unknown procedure type 'demo.leger' (did you mean
  /// 'demo.ledger'?)".
  std::string unknown_type_error(std::string_view type) const;

  /// Registered type names, sorted.
  std::vector<std::string> names() const;

private:
  /// The type added; throws (never returns nullptr) on a taken name or version 0.
  procedure_type* insert(procedure_type t);

  std::map<std::string, procedure_type, std::less<>> types_;
};

}  // namespace proctor
