// Internal: the executor's entry for one procedure (executor_state::procs).
//
// A node keeps one per procedure it knows: running, waiting (with or without an actor) or
// ended and kept until its tree's result expires. A node holding a million procedures that
// wait for days keeps a million of these, so they are compact: the executor kept a full
// proc_update per procedure (288 bytes, 320 with its hash node), the figure that made
// proctor-bench (j) miss its memory target. Here the fields every procedure has are inline,
// the type name is shared, and what few have (children, an error, a result, a nonce, another
// node) is in one allocation made only when one of them is set: 112 bytes, so that with the
// hash node's link and key an entry takes jemalloc's 128-byte class.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "actors/base/messages.hpp"

namespace proctor::exec_detail {

/// The steady clock in ns (never 0 on a running system).
inline int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

/// Procedure type names, each stored once. Names come from the registry, from the journal
/// and from other nodes' children, so the table is as large as the set of types a cluster
/// runs; nothing is removed.
class name_table {
public:
  const std::string* intern(const std::string& name) { return &*names_.insert(name).first; }

private:
  std::unordered_set<std::string> names_;
};

class proc_record {
public:
  uint64_t id = 0;
  uint64_t root_id = 0;
  uint64_t parent_id = 0;
  int64_t started_at_ms = 0;  ///< submitted (wall clock ms)
  int64_t since_ms = 0;       ///< in this state and waiting_for since
  int64_t ended_at_ms = 0;
  /// When this node first saw it live (steady clock, ns), for the runtime histogram; 0 once
  /// it ended, or if it was never live here.
  int64_t live_since_ns = 0;
  std::string waiting_for;
  proc_state state = proc_state::runnable;
  bool ended = false;
  bool bypassed = false;
  /// An operator's retry made it live again after it had ended (and been counted) FAILED:
  /// its next end is counted as a retry's outcome, not as a second end (metrics.hpp).
  bool retried = false;

  const std::string& type() const { return type_ != nullptr ? *type_ : none(); }
  const std::vector<uint64_t>& children() const {
    static const std::vector<uint64_t> empty;
    return more_ ? more_->children : empty;
  }
  const std::string& error() const { return more_ ? more_->error : none(); }
  const std::string& result_json() const { return more_ ? more_->result_json : none(); }
  const std::string& nonce() const { return more_ ? more_->nonce : none(); }
  /// Non-empty: the procedure runs on that node (this node holds a placeholder).
  const std::string& node() const { return more_ ? more_->node : none(); }

  /// Takes `u`'s fields (its strings are moved out); live_since_ns is left as it is.
  void assign(proc_update&& u, name_table& names) {
    id = u.id;
    root_id = u.root_id;
    parent_id = u.parent_id;
    started_at_ms = u.started_at_ms;
    since_ms = u.since_ms;
    ended_at_ms = u.ended_at_ms;
    waiting_for = std::move(u.waiting_for);
    state = u.state;
    ended = u.ended;
    bypassed = u.bypassed;
    if (type_ == nullptr || *type_ != u.type)
      type_ = names.intern(u.type);
    if (u.children.empty() && u.error.empty() && u.result_json.empty() && u.nonce.empty()
        && u.node.empty()) {
      more_.reset();
      return;
    }
    if (!more_)
      more_ = std::make_unique<details>();
    more_->children = std::move(u.children);
    more_->error = std::move(u.error);
    more_->result_json = std::move(u.result_json);
    more_->nonce = std::move(u.nonce);
    more_->node = std::move(u.node);
  }

  /// The entry as a status message.
  proc_update to_update() const {
    proc_update u;
    u.id = id;
    u.root_id = root_id;
    u.parent_id = parent_id;
    u.type = type();
    u.state = state;
    u.children = children();
    u.error = error();
    u.result_json = result_json();
    u.waiting_for = waiting_for;
    u.nonce = nonce();
    u.node = node();
    u.ended = ended;
    u.started_at_ms = started_at_ms;
    u.since_ms = since_ms;
    u.ended_at_ms = ended_at_ms;
    u.bypassed = bypassed;
    return u;
  }

private:
  struct details {
    std::vector<uint64_t> children;
    std::string error;
    std::string result_json;
    std::string nonce;
    std::string node;
  };

  static const std::string& none() {
    static const std::string empty;
    return empty;
  }

  const std::string* type_ = nullptr;
  std::unique_ptr<details> more_;
};

}  // namespace proctor::exec_detail
