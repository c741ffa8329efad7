// Journal keys: root_id (8 bytes, big-endian) then lsn (8 bytes, big-endian), so a tree's
// records are contiguous and ordered by LSN. root_id 0 is the node's own metadata.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace proctor::journal_keys {

constexpr size_t key_size = 16;
constexpr uint64_t meta_root = 0;
/// (meta_root, id_floor_lsn) holds an IdFloor record: ids below it were handed out.
constexpr uint64_t id_floor_lsn = 1;
/// A replica group's own records, not the journal's (no tree has this id, and recovery skips
/// them): (replica_root, a member's Raft id) holds the id of the data directory the group
/// recorded for that member, as "NAME\nDATA_DIR_ID\nAT_MS" (actors/node/replica_node.cpp).
constexpr uint64_t replica_root = ~uint64_t{0};

inline void put_be64(char* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}

inline uint64_t get_be64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

inline std::string encode(uint64_t root_id, uint64_t lsn) {
  std::string k(key_size, '\0');
  put_be64(k.data(), root_id);
  put_be64(k.data() + 8, lsn);
  return k;
}

/// False if `key` is not a journal key (wrong size).
inline bool decode(std::string_view key, uint64_t* root_id, uint64_t* lsn) {
  if (key.size() != key_size)
    return false;
  *root_id = get_be64(key.data());
  *lsn = get_be64(key.data() + 8);
  return true;
}

}  // namespace proctor::journal_keys
