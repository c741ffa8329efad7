// A procedure written as a state machine over a protobuf enum: one step handler and one
// rollback handler per state, the data an author-defined protobuf message.
//
//   class create_table : public proctor::state_machine<pb::CreateTableData, pb::CreateTableState> {
//   public:
//     create_table() {
//       on(pb::CT_WRITE_META, &create_table::write_meta, &create_table::undo_meta);
//       on(pb::CT_OPEN_REGIONS, &create_table::open_regions, &create_table::close_regions);
//       on_no_rollback(pb::CT_PUBLISH, &create_table::publish);  // point of no return
//     }
//     ...
//   };
#pragma once

#include <algorithm>
#include <functional>
#include <type_traits>
#include <vector>

#include <proctor/procedure.hpp>

namespace proctor {

template <class Data, class Enum>
class state_machine : public procedure {
public:
  static_assert(std::is_base_of_v<google::protobuf::Message, Data>,
                "Data must be a protobuf message");
  using step_fn = std::function<outcome(Data&, context&)>;
  using undo_fn = std::function<void(Data&, context&)>;

  google::protobuf::Message& data() final { return data_; }
  const Data& typed_data() const noexcept { return data_; }
  Data& typed_data() noexcept { return data_; }

  int32_t initial_state() const final { return handlers_.empty() ? 0 : handlers_.front().state; }

  outcome execute(int32_t state, context& ctx) final {
    const auto* h = find(state);
    if (h == nullptr)
      throw std::logic_error("no step handler for state " + std::to_string(state));
    return h->step(*this, data_, ctx);
  }

  void rollback(int32_t state, context& ctx) final {
    const auto* h = find(state);
    if (h != nullptr && h->undo)
      h->undo(*this, data_, ctx);
  }

  bool rollback_supported(int32_t state) const final {
    const auto* h = find(state);
    return h == nullptr || static_cast<bool>(h->undo);
  }

  bool never_blocks(int32_t state, bool /*undo*/) const override {
    return std::find(nonblocking_.begin(), nonblocking_.end(), state) != nonblocking_.end();
  }

  std::string state_name(int32_t state) const override {
    const auto* d = google::protobuf::GetEnumDescriptor<Enum>();
    if (const auto* v = d->FindValueByNumber(state))
      return v->name();
    return std::to_string(state);
  }

protected:
  /// Declares the handlers of `s`. The lowest-numbered declared state is the initial one
  /// (protobuf enums keep 0 for UNSPECIFIED, so number the first real state 1).
  void on(Enum s, step_fn step, undo_fn undo) {
    undo_at undo_here;
    if (undo)
      undo_here = [f = std::move(undo)](state_machine&, Data& d, context& c) { f(d, c); };
    declare(
      s, [f = std::move(step)](state_machine&, Data& d, context& c) { return f(d, c); },
      std::move(undo_here));
  }

  /// Declares `s` with no rollback: a point of no return.
  void on_no_rollback(Enum s, step_fn step) { on(s, std::move(step), nullptr); }

  /// Declares that the step and the undo of `s` never block and finish in microseconds (no
  /// I/O, no sleep: a state that only computes, spawns, waits or joins), so they run on the
  /// procedure's actor instead of a worker thread (procedure::never_blocks).
  void nonblocking(Enum s) {
    auto state = static_cast<int32_t>(s);
    if (std::find(nonblocking_.begin(), nonblocking_.end(), state) == nonblocking_.end())
      nonblocking_.push_back(state);
  }

  /// Member-function forms of `on` / `on_no_rollback`.
  /// These capture only the member pointer and are handed the instance when called: small
  /// enough for std::function to hold without allocating (every procedure actor's start
  /// constructs its instance, and with it these), and right for a copied instance too.
  template <class Self>
  void on(Enum s, outcome (Self::*step)(Data&, context&), void (Self::*undo)(Data&, context&)) {
    undo_at undo_here;
    if (undo != nullptr)
      undo_here = [undo](state_machine& m, Data& d, context& c) {
        (static_cast<Self&>(m).*undo)(d, c);
      };
    declare(
      s,
      [step](state_machine& m, Data& d, context& c) { return (static_cast<Self&>(m).*step)(d, c); },
      std::move(undo_here));
  }
  template <class Self>
  void on_no_rollback(Enum s, outcome (Self::*step)(Data&, context&)) {
    on<Self>(s, step, nullptr);  // no undo: a point of no return
  }

  /// Outcome helpers typed by the enum.
  static outcome next(Enum s) { return outcome::next(static_cast<int32_t>(s)); }
  static outcome yield(Enum s) { return outcome::yield(static_cast<int32_t>(s)); }
  static outcome spawn(std::vector<child_spec> c, Enum s) {
    return outcome::spawn(std::move(c), static_cast<int32_t>(s));
  }
  static outcome suspend(std::string key, Enum s,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) {
    return outcome::suspend(std::move(key), static_cast<int32_t>(s), timeout);
  }
  static outcome call(std::string service, std::string request, Enum s,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) {
    return outcome::call(std::move(service), std::move(request), static_cast<int32_t>(s), timeout);
  }
  static outcome dispatch(std::string queue, std::string input_json, Enum s,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) {
    return outcome::dispatch(std::move(queue), std::move(input_json), static_cast<int32_t>(s),
                             timeout);
  }
  static outcome dispatch(std::string queue, const google::protobuf::Message& input, Enum s,
                          std::chrono::milliseconds timeout = std::chrono::milliseconds{0}) {
    return outcome::dispatch(std::move(queue), input, static_cast<int32_t>(s), timeout);
  }
  static outcome wait(std::chrono::milliseconds d, Enum s) {
    return outcome::wait(d, static_cast<int32_t>(s));
  }
  static outcome done(std::string result_json = {}) {
    return outcome::done(std::move(result_json));
  }
  static outcome done(const google::protobuf::Message& m) { return outcome::done(m); }
  static outcome fail(std::string error) { return outcome::fail(std::move(error)); }

private:
  using step_at = std::function<outcome(state_machine&, Data&, context&)>;
  using undo_at = std::function<void(state_machine&, Data&, context&)>;
  struct handlers {
    int32_t state = 0;
    step_at step;
    undo_at undo;
  };

  /// Declares (or declares again) the handlers of `s`, keeping them ordered by state.
  void declare(Enum s, step_at step, undo_at undo) {
    auto state = static_cast<int32_t>(s);
    if (handlers_.empty())
      handlers_.reserve(4);  // most types have a few states: one allocation
    auto i = std::lower_bound(handlers_.begin(), handlers_.end(), state,
                              [](const handlers& h, int32_t x) { return h.state < x; });
    if (i == handlers_.end() || i->state != state)
      i = handlers_.insert(i, handlers{state, {}, {}});
    i->step = std::move(step);
    i->undo = std::move(undo);
  }

  const handlers* find(int32_t state) const {
    for (const auto& h : handlers_)  // a few states: a scan costs less than a search
      if (h.state == state)
        return &h;
    return nullptr;
  }

  Data data_;
  std::vector<handlers> handlers_;    ///< ordered by state
  std::vector<int32_t> nonblocking_;  ///< a few states: a search costs less than a set
};

}  // namespace proctor
