#include "actors/scheduling/lock_table.hpp"

#include <algorithm>

namespace proctor {

namespace {

bool foreign(const std::set<uint64_t>& holders, uint64_t owner,
             const std::vector<uint64_t>& ancestors) {
  for (auto h : holders)
    if (h != owner && std::find(ancestors.begin(), ancestors.end(), h) == ancestors.end())
      return true;
  return false;
}

bool foreign(const std::map<uint64_t, int>& holders, uint64_t owner,
             const std::vector<uint64_t>& ancestors) {
  for (const auto& [h, n] : holders)
    if (n > 0 && h != owner && std::find(ancestors.begin(), ancestors.end(), h) == ancestors.end())
      return true;
  return false;
}

}  // namespace

std::vector<std::string> lock_table::ancestors_of(const std::string& name) {
  std::vector<std::string> out;
  for (auto pos = name.find('/'); pos != std::string::npos; pos = name.find('/', pos + 1))
    out.push_back(name.substr(0, pos));
  return out;
}

bool lock_table::conflicts(uint64_t owner, const std::vector<uint64_t>& anc, const resource_lock& l,
                           std::string* blocker) const {
  auto blocked = [&](const std::string& what) {
    if (blocker != nullptr)
      *blocker = what;
    return true;
  };
  // An exclusive lock on an ancestor excludes everything below it.
  for (const auto& a : ancestors_of(l.name))
    if (auto i = nodes_.find(a); i != nodes_.end() && foreign(i->second.exclusive, owner, anc))
      return blocked(a);
  auto i = nodes_.find(l.name);
  if (i != nodes_.end()) {
    if (foreign(i->second.exclusive, owner, anc))
      return blocked(l.name);
    if (l.exclusive
        && (foreign(i->second.shared, owner, anc) || foreign(i->second.intent, owner, anc)))
      return blocked(l.name);
  }
  return false;
}

void lock_table::take(uint64_t owner, const resource_lock& l) {
  auto& n = nodes_[l.name];
  (l.exclusive ? n.exclusive : n.shared).insert(owner);
  for (const auto& a : ancestors_of(l.name))
    ++nodes_[a].intent[owner];
}

bool lock_table::try_acquire(uint64_t owner, const std::vector<uint64_t>& ancestors,
                             const lock_set& locks, std::string* blocker) {
  for (const auto& l : locks)
    if (conflicts(owner, ancestors, l, blocker))
      return false;
  force_acquire(owner, locks);
  return true;
}

void lock_table::force_acquire(uint64_t owner, const lock_set& locks) {
  if (locks.empty())
    return;
  auto& mine = owned_[owner];
  for (const auto& l : locks) {
    take(owner, l);
    mine.push_back(l);
  }
}

void lock_table::release(uint64_t owner) {
  auto i = owned_.find(owner);
  if (i == owned_.end())
    return;
  for (const auto& l : i->second) {
    auto n = nodes_.find(l.name);
    if (n != nodes_.end()) {
      n->second.exclusive.erase(owner);
      n->second.shared.erase(owner);
    }
    for (const auto& a : ancestors_of(l.name)) {
      auto an = nodes_.find(a);
      if (an == nodes_.end())
        continue;
      if (auto c = an->second.intent.find(owner); c != an->second.intent.end() && --c->second <= 0)
        an->second.intent.erase(c);
    }
  }
  owned_.erase(i);
  // Drop empty nodes so the table does not grow with every resource ever named.
  for (auto n = nodes_.begin(); n != nodes_.end();) {
    if (n->second.exclusive.empty() && n->second.shared.empty() && n->second.intent.empty())
      n = nodes_.erase(n);
    else
      ++n;
  }
}

std::string lock_table::blocker(uint64_t owner, const std::vector<uint64_t>& ancestors,
                                const lock_set& locks) const {
  std::string b;
  for (const auto& l : locks)
    if (conflicts(owner, ancestors, l, &b))
      return b;
  return {};
}

}  // namespace proctor
