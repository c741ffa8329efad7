// Journal boundaries named by record identity, for the crash harness (crash_harness.hpp).
//
// A tree with concurrent children does not write its journal the same way twice: group
// commit merges appends differently and the children's steps interleave differently, so
// "the k-th write" names a different moment in every run. What is the same in every run is
// the set of records the tree writes. A boundary is therefore named by a record: the
// position of its procedure in the tree (root, root/0, root/0/1: the n-th child its parent
// spawned), the record's kind, and how many records of that kind the procedure wrote
// before it (its n-th step commit). A crash "before" a boundary refuses the write that
// carries that record, and every later one; "after" lets it through and refuses the rest.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <proctor/registry.hpp>

#include "actors/testing/fault_store.hpp"

namespace proctor::testing {

/// One journal record of a run, by what it is rather than by id or write count.
struct boundary {
  std::string node;                ///< the node that wrote it ("" on a run of one node)
  std::vector<uint32_t> position;  ///< child indexes from the root ({} = the root)
  int kind = 0;                    ///< JournalRecord's body field number
  uint32_t occurrence = 0;         ///< records of this kind the procedure wrote before
  int32_t state = 0;               ///< the step's or undo's state, else 0
  std::string label;      ///< "root/1: step #2 (LEDGER_STEP)", "b: root/1: ..."; not compared
  std::string event_key;  ///< an EventArrived record's key; not compared

  bool operator<(const boundary& o) const {
    return std::tie(node, position, kind, occurrence, state)
           < std::tie(o.node, o.position, o.kind, o.occurrence, o.state);
  }
  bool operator==(const boundary& o) const {
    return std::tie(node, position, kind, occurrence, state)
           == std::tie(o.node, o.position, o.kind, o.occurrence, o.state);
  }
};

/// Names the records of one run, for every node of it: the stores of a run's nodes share one,
/// so that a child's fragment on another node (its root has the id of the placeholder its
/// parent's node wrote) takes the placeholder's position in the tree. Occurrences are counted
/// per node: the placeholder's `submitted #1` on a and the fragment's on b are two boundaries.
class record_namer {
public:
  explicit record_namer(const registry& types) : types_(types) {}

  /// Names the record in `value`, written by `node`; nullopt if it is none (or not parsable).
  std::optional<boundary> name(const std::string& node, const std::string& value);

private:
  struct proc_info {
    std::vector<uint32_t> position;
    std::string type;
    uint32_t children = 0;
    std::map<std::pair<std::string, int>, uint32_t> written;  ///< per node and kind so far
  };

  std::string state_name(const std::string& type, int32_t state) const;

  const registry& types_;
  std::mutex mtx_;
  std::map<uint64_t, proc_info> procs_;
  std::map<std::pair<std::string, int>, uint32_t> tree_written_;  ///< of no procedure
};

/// A journal store for one node incarnation: names every record written through it and,
/// when armed, freezes the underlying fault_store just before or after the write that
/// carries a given record. A finished tree's garbage collection (a write that deletes
/// records of a tree, with whatever it puts) is not a boundary; the delivery that consumes
/// an event (an EventDelivered with the deletion of the event's record, in the node's
/// range) is: it comes after the end the harness waits for,
/// and whether it comes before the node stops is timing. For the same reason the harness
/// takes the clean run's records when it sees the end, not when the node stops.
class boundary_store : public forwarding_store {
public:
  /// `node`: the name boundaries carry ("" for a run of one node).
  boundary_store(std::shared_ptr<fault_store> inner, std::shared_ptr<record_namer> namer,
                 std::string node = "")
      : forwarding_store(inner), inner_(std::move(inner)), namer_(std::move(namer)),
        node_(std::move(node)) {}

  /// Crash at `target` (before or after its write) when it comes; `*fired` (if given) is
  /// set then.
  void arm(boundary target, bool after, bool* fired = nullptr) {
    std::lock_guard<std::mutex> g(mtx_);
    target_ = std::move(target);
    after_ = after;
    fired_ = fired;
  }

  /// Every record written so far, in write order.
  std::vector<boundary> seen() const {
    std::lock_guard<std::mutex> g(mtx_);
    return seen_;
  }

  /// How many events of each key (their EventArrived records) were written durably through
  /// this store.
  std::map<std::string, int> durable_events() const {
    std::lock_guard<std::mutex> g(mtx_);
    return durable_events_;
  }

  fault_store& faults() { return *inner_; }
  bool frozen() const { return inner_->frozen(); }
  uint64_t writes() const { return inner_->writes(); }

  rocksdb::Status write(const std::vector<store_op>& ops) override;

private:
  std::shared_ptr<fault_store> inner_;
  std::shared_ptr<record_namer> namer_;
  std::string node_;
  mutable std::mutex mtx_;
  std::vector<boundary> seen_;
  std::map<std::string, int> durable_events_;  ///< EventArrived records written, by key
  std::optional<boundary> target_;
  bool after_ = false;
  bool* fired_ = nullptr;
};

}  // namespace proctor::testing
