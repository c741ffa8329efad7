#include "actors/base/placement.hpp"

#include <algorithm>
#include <stdexcept>

namespace proctor::placement {

namespace {

constexpr uint64_t fnv_offset = 14695981039346656037ull;
constexpr uint64_t fnv_prime = 1099511628211ull;

uint64_t fnv1a(std::string_view bytes, uint64_t h = fnv_offset) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= fnv_prime;
  }
  return h;
}

/// splitmix64's finalizer: every bit of the input reaches every bit of the output.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint32_t slot_of(std::string_view key) {
  return static_cast<uint32_t>(mix(fnv1a(key)) % slot_count);
}

uint64_t fingerprint(const std::vector<std::string>& members) {
  uint64_t h = fnv_offset;
  for (const auto& m : members) {
    h = fnv1a(m, h);
    h = fnv1a(std::string_view("\0", 1), h);  // "ab","c" is not "a","bc"
  }
  h = mix(h);
  return h == 0 ? 1 : h;
}

table::table(std::vector<std::string> members) : members_(std::move(members)) {
  if (!std::is_sorted(members_.begin(), members_.end())
      || std::adjacent_find(members_.begin(), members_.end()) != members_.end())
    throw std::invalid_argument("placement::table: members must be sorted and distinct");
  if (members_.size() > slot_count)
    throw std::invalid_argument("placement::table: more members than slots");
  fingerprint_ = placement::fingerprint(members_);
  const auto n = static_cast<uint32_t>(members_.size());
  if (n == 0)
    return;
  // Quotas: floor(S/N) each, one more for the first S mod N members in an order by their
  // names' hashes (not by name, so that "a" is not always the one with more).
  std::vector<uint64_t> name_hash(n);
  for (uint32_t i = 0; i < n; ++i)
    name_hash[i] = mix(fnv1a(members_[i]));
  std::vector<uint32_t> by_hash(n);
  for (uint32_t i = 0; i < n; ++i)
    by_hash[i] = i;
  std::sort(by_hash.begin(), by_hash.end(), [&](uint32_t a, uint32_t b) {
    return name_hash[a] != name_hash[b] ? name_hash[a] < name_hash[b] : a < b;
  });
  std::vector<uint32_t> room(n, slot_count / n);
  for (uint32_t k = 0; k < slot_count % n; ++k)
    ++room[by_hash[k]];
  // Each slot, in order, to the member it prefers most (the highest mix(name hash ^ slot's
  // hash)) with room left. The quotas add up to slot_count, so one always has room.
  owner_.resize(slot_count);
  for (uint32_t s = 0; s < slot_count; ++s) {
    const uint64_t sh = mix(s + 0x9e3779b97f4a7c15ull);
    uint32_t best = n;
    uint64_t best_score = 0;
    for (uint32_t i = 0; i < n; ++i) {
      if (room[i] == 0)
        continue;
      uint64_t score = mix(name_hash[i] ^ sh);
      if (best == n || score > best_score || (score == best_score && i < best)) {
        best = i;
        best_score = score;
      }
    }
    --room[best];
    owner_[s] = static_cast<uint16_t>(best);
  }
}

const std::string& table::owner(uint32_t slot) const {
  static const std::string none;
  if (members_.empty())
    return none;
  return members_[owner_[slot % slot_count]];
}

std::vector<uint32_t> table::counts() const {
  std::vector<uint32_t> out(members_.size(), 0);
  if (!members_.empty())
    for (auto o : owner_)
      ++out[o];
  return out;
}

}  // namespace proctor::placement
