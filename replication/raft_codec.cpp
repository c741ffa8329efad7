#include "replication/raft_codec.hpp"

#include <cstring>

namespace proctor::raft_codec {

namespace {

constexpr uint8_t entry_format = 1;

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

char* put_varint(char* out, uint64_t v) {
  while (v >= 0x80) {
    *out++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *out++ = static_cast<char>(v);
  return out;
}

void append_varint(std::string* out, uint64_t v) {
  char buf[10];
  out->append(buf, put_varint(buf, v) - buf);
}

}  // namespace

size_t encoded_size(const std::vector<store_op>& ops) {
  return (unpadded_size(ops) + 7) / 8 * 8;
}

size_t unpadded_size(const std::vector<store_op>& ops) {
  size_t n = 1 + varint_size(ops.size());
  for (const auto& op : ops) {
    n += 1 + varint_size(op.root_id);
    switch (op.what) {
      case store_op::kind::put:
        n += varint_size(op.lsn) + varint_size(op.value.size()) + op.value.size();
        break;
      case store_op::kind::delete_range:
        n += varint_size(op.from_lsn) + varint_size(op.lsn);
        break;
      case store_op::kind::delete_trees:
        n += varint_size(op.last_root_id);
        break;
    }
  }
  return n;
}

void encode_ops(const std::vector<store_op>& ops, char* out) {
  char* end = out + encoded_size(ops);
  *out++ = static_cast<char>(entry_format);
  out = put_varint(out, ops.size());
  for (const auto& op : ops) {
    *out++ = static_cast<char>(op.what);
    out = put_varint(out, op.root_id);
    switch (op.what) {
      case store_op::kind::put:
        out = put_varint(out, op.lsn);
        out = put_varint(out, op.value.size());
        if (!op.value.empty())
          std::memcpy(out, op.value.data(), op.value.size());
        out += op.value.size();
        break;
      case store_op::kind::delete_range:
        out = put_varint(out, op.from_lsn);
        out = put_varint(out, op.lsn);
        break;
      case store_op::kind::delete_trees:
        out = put_varint(out, op.last_root_id);
        break;
    }
  }
  std::memset(out, 0, end - out);  // the padding
}

bool decode_ops(std::string_view in, std::vector<store_op>* out) {
  if (in.empty() || static_cast<uint8_t>(in.front()) != entry_format)
    return false;
  in.remove_prefix(1);
  uint64_t n = 0;
  // Each op takes at least three bytes: a count beyond that is damage, not a huge vector.
  if (!get_varint(&in, &n) || n > in.size() / 3)
    return false;
  out->clear();
  out->reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    if (in.empty())
      return false;
    auto kind = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    store_op op;
    if (!get_varint(&in, &op.root_id))
      return false;
    switch (kind) {
      case static_cast<uint8_t>(store_op::kind::put): {
        op.what = store_op::kind::put;
        std::string_view v;
        if (!get_varint(&in, &op.lsn) || !get_bytes(&in, &v))
          return false;
        op.value.assign(v);
        break;
      }
      case static_cast<uint8_t>(store_op::kind::delete_range):
        op.what = store_op::kind::delete_range;
        if (!get_varint(&in, &op.from_lsn) || !get_varint(&in, &op.lsn))
          return false;
        break;
      case static_cast<uint8_t>(store_op::kind::delete_trees):
        op.what = store_op::kind::delete_trees;
        if (!get_varint(&in, &op.last_root_id))
          return false;
        break;
      default:
        return false;
    }
    out->push_back(std::move(op));
  }
  // Up to 7 zero bytes of padding, nothing else.
  if (in.size() > 7)
    return false;
  for (auto c : in)
    if (c != 0)
      return false;
  return true;
}

std::string snapshot_header(uint64_t index) {
  std::string h(snapshot_magic);
  for (int i = 0; i < 8; ++i) {
    h.push_back(static_cast<char>(index & 0xff));
    index >>= 8;
  }
  return h;
}

void append_record(std::string* out, std::string_view key, std::string_view value) {
  append_varint(out, key.size());
  out->append(key);
  append_varint(out, value.size());
  out->append(value);
}

}  // namespace proctor::raft_codec
