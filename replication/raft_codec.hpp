// The encoding of one journal write (a vector of store_op) as one Raft log entry, and of the
// replica's applied state as a Raft snapshot. Pure functions, any thread.
//
// Entry, format 1 (integers are unsigned LEB128 varints unless said otherwise):
//   byte   format = 1
//   varint number of ops
//   per op: byte kind (0 put, 1 delete_range, 2 delete_trees), varint root_id, then
//     put:          varint lsn, varint value size, the value's bytes
//     delete_range: varint from_lsn, varint lsn
//     delete_trees: varint last_root_id
//   then zero bytes up to a multiple of 8.
// The padding is libraft's requirement, not ours: 0.15 writes an AppendEntries' entries to the
// socket back to back at their own lengths, but the receiver (uvDecodeEntriesBatch) skips to
// the next multiple of 8 after each one. An entry of another length arrives cut and shifted,
// and the follower stores the damage in its log (found by raft_store_test: "entry is not a
// well-formed journal write", then "short read" loading the segment).
//
// Snapshot, format 1:
//   8 bytes "PRSNAP01", 8 bytes little-endian Raft index the state is at, then per record of
//   the journal's column family: varint key size, key, varint value size, value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "persistence/journal_store.hpp"

namespace proctor::raft_codec {

/// The size of encode_ops()'s output: a multiple of 8.
size_t encoded_size(const std::vector<store_op>& ops);

/// The size without the padding.
size_t unpadded_size(const std::vector<store_op>& ops);

/// Writes `ops` to `out`, which has room for encoded_size(ops) bytes.
void encode_ops(const std::vector<store_op>& ops, char* out);

/// False (with `out` unspecified) if `data` is not a well-formed entry of a known format.
bool decode_ops(std::string_view data, std::vector<store_op>* out);

constexpr std::string_view snapshot_magic = "PRSNAP01";
constexpr size_t snapshot_header_size = 16;

/// The snapshot header for state at Raft index `index`.
std::string snapshot_header(uint64_t index);

/// Appends one record to a snapshot body.
void append_record(std::string* out, std::string_view key, std::string_view value);

/// Reads a snapshot: calls `fn(key, value)` per record. False if malformed.
template <class Fn>
bool read_snapshot(std::string_view data, uint64_t* index, Fn&& fn);

// -- varints (exposed for read_snapshot) ---------------------------------------------------

inline bool get_varint(std::string_view* in, uint64_t* v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in->empty())
      return false;
    auto b = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    x |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80u) == 0) {
      *v = x;
      return true;
    }
  }
  return false;
}

inline bool get_bytes(std::string_view* in, std::string_view* out) {
  uint64_t n = 0;
  if (!get_varint(in, &n) || n > in->size())
    return false;
  *out = in->substr(0, n);
  in->remove_prefix(n);
  return true;
}

template <class Fn>
bool read_snapshot(std::string_view data, uint64_t* index, Fn&& fn) {
  if (data.size() < snapshot_header_size || data.substr(0, 8) != snapshot_magic)
    return false;
  uint64_t idx = 0;
  for (int i = 7; i >= 0; --i)
    idx = (idx << 8) | static_cast<uint8_t>(data[8 + i]);
  *index = idx;
  data.remove_prefix(snapshot_header_size);
  while (!data.empty()) {
    std::string_view k, v;
    if (!get_bytes(&data, &k) || !get_bytes(&data, &v))
      return false;
    if (!fn(k, v))
      return false;
  }
  return true;
}

}  // namespace proctor::raft_codec
