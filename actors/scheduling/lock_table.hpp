// The scheduler's resource locks: hierarchical names, shared/exclusive, all-or-nothing
// acquisition of a procedure's whole set, and inheritance (a procedure may use the locks of
// its ancestors). Pure data structure; the scheduler actor owns one.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <proctor/resource_lock.hpp>

namespace proctor {

class lock_table {
public:
  /// Tries to acquire every lock of `locks` for `owner` at once. Holders in `ancestors`
  /// (the owner's parent chain) never conflict. On conflict nothing is acquired, false is
  /// returned and `*blocker` names the first conflicting resource.
  bool try_acquire(uint64_t owner, const std::vector<uint64_t>& ancestors, const lock_set& locks,
                   std::string* blocker = nullptr);

  /// Acquires without checking (recovery: the locks were consistent when they were taken).
  void force_acquire(uint64_t owner, const lock_set& locks);

  /// Releases every lock `owner` holds.
  void release(uint64_t owner);

  /// True if `owner` holds anything.
  bool holds(uint64_t owner) const { return owned_.count(owner) != 0; }

  size_t held() const { return owned_.size(); }

  /// What each owner holds (`proctor locks`).
  const std::map<uint64_t, lock_set>& owned() const { return owned_; }

  /// The first resource that keeps `owner` from acquiring `locks` ("" when none does).
  std::string blocker(uint64_t owner, const std::vector<uint64_t>& ancestors,
                      const lock_set& locks) const;

private:
  struct node {
    std::set<uint64_t> exclusive;  // at most one owner, unless forced
    std::set<uint64_t> shared;
    std::map<uint64_t, int> intent;  // owners holding something below, with counts
  };

  static std::vector<std::string> ancestors_of(const std::string& name);
  bool conflicts(uint64_t owner, const std::vector<uint64_t>& ancestors, const resource_lock& l,
                 std::string* blocker) const;
  void take(uint64_t owner, const resource_lock& l);

  std::map<std::string, node> nodes_;
  std::map<uint64_t, lock_set> owned_;
};

}  // namespace proctor
